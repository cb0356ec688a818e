"""GSM8K-style word problems with known answers, for the rephrased-contamination study (issue 57,
bench/semantic_study.py).

Why generated: the study needs benchmark items whose rephrases are planted in a corpus beside thousands of *hard
negatives*, items of the same style that are not the benchmark's. A template drawn again with other names, objects
and numbers is exactly that: the same sentence shape and vocabulary (under all-MiniLM-L6-v2 two such siblings score
a cosine of 0.7-0.9), different facts. Real GSM8K is not installable here, so its style is imitated: one to four
sentences, a question at the end, quantities both small (2-12) and multi-digit (15-2,400), money, percentages,
fractions, and an integer answer written as GSM8K writes it (`#### N`).

Each template is a function of a numpy Generator returning (text, answer); the answer is computed from the drawn
numbers, which are constrained so that it is a whole number. Items are dicts {id, input, target, template}; ids are
`<template>-<k>` in generation order, texts are distinct across a whole generate() call, and the draw depends on the
seed alone.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

NAMES = ("Aisha Ben Carlos Chloe Daniel Elena Ethan Fatima Grace Hiro Isabel Jamal Julia Kenji Lena Liam Lucas Maya "
         "Mia Nadia Noah Olivia Omar Priya Quinn Rosa Samuel Sofia Tariq Uma Victor Wendy Xavier Yara Zoe Marco Ingrid "
         "Tomas Leila Ravi").split()
STORES = ("the bakery", "the hardware store", "the farmers market", "the bookshop", "the toy store", "the pharmacy",
          "the garden center", "the corner shop")
GOODS = ("notebooks", "pencils", "candles", "mugs", "scarves", "batteries", "plant pots", "puzzles", "towels",
         "water bottles", "markers", "socks")
VEHICLES = ("train", "bus", "truck", "ferry", "van", "motorbike", "delivery drone", "cargo ship")
FOODS = ("muffins", "cupcakes", "bagels", "cookies", "pies", "croissants", "loaves of bread", "pretzels")
COLLECTIBLES = ("stickers", "stamps", "marbles", "trading cards", "seashells", "coins", "buttons", "postcards")
PLANTS = ("tomato plants", "sunflowers", "rose bushes", "pepper plants", "tulips", "lettuce heads", "bean plants")
SPORTS = ("basketball", "soccer", "hockey", "volleyball", "rugby", "handball")
SAME_SPEED = ("Moving at the same steady speed", "At that same rate", "Keeping the same speed", "If nothing changes")
HOW_LONG = ("How many minutes will it take", "How long, in minutes, does it take", "In how many minutes can")
Template = Callable[[np.random.Generator], "tuple[str, int]"]


def _pick(rng: np.random.Generator, seq, k: int = 1):
    idx = rng.choice(len(seq), size=k, replace=False)
    return [seq[i] for i in idx] if k > 1 else seq[idx[0]]


def _int(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(rng.integers(lo, hi + 1))


def _money(v: int) -> str:
    return f"${v:,}"


def _a(rng: np.random.Generator, *options: str) -> str:
    """One of several wordings of a template's fixed words: with them, two siblings rarely share a word 13-gram
    (as two real GSM8K items rarely do), so the verbatim scan is not handed the template's boilerplate."""
    return options[int(rng.integers(len(options)))]


def shopping_change(r):
    n, g1, g2 = _pick(r, NAMES), *_pick(r, GOODS, 2)
    a, p, b, q = _int(r, 2, 15), _int(r, 2, 9), _int(r, 2, 12), _int(r, 2, 8)
    bill = 100 if a * p + b * q < 100 else 200
    s = _pick(r, STORES)
    return (f"{n} {_a(r, 'buys', 'picks up', 'gets')} {a} {g1} at {_money(p)} each and {b} {g2} at {_money(q)} each "
            f"at {s}. {n} {_a(r, 'pays with', 'hands over', 'gives the cashier')} a {_money(bill)} bill. "
            f"{_a(r, 'How much change does', 'What change should', 'How many dollars in change does')} {n} "
            f"{_a(r, 'get back?', 'receive?', 'get?')}", bill - a * p - b * q)


def shopping_discount(r):
    n, g, s = _pick(r, NAMES), _pick(r, GOODS), _pick(r, STORES)
    price, pct, k = 20 * _int(r, 1, 12), _pick(r, (10, 15, 20, 25, 30, 40, 50)), _int(r, 2, 9)
    return (f"At {s}, a pack of {g} {_a(r, 'normally costs', 'usually sells for', 'is priced at')} {_money(price)}. "
            f"{_a(r, f'This week everything is {pct}% off', f'Today there is {pct}% off', f'A sale cuts it by {pct}%')}"
            f". {n} buys {k} packs. "
            f"{_a(r, 'How many dollars does', 'How much money does', 'What does')} {n} spend?",
            k * price * (100 - pct) // 100)


def travel_rate(r):
    v, h, h2 = _pick(r, VEHICLES), _int(r, 2, 8), _int(r, 3, 12)
    speed = _int(r, 12, 95)
    return (f"A {v} {_a(r, 'covers', 'travels', 'goes')} {speed * h} miles in {h} hours. "
            f"{_a(r, *SAME_SPEED)}, "
            f"{_a(r, 'how many miles will', 'how far will', 'what distance will')} the {v} "
            f"{_a(r, 'cover', 'go', 'travel')} in {h2} hours?", speed * h2)


def packing_rate(r):
    n, g = _pick(r, NAMES), _pick(r, GOODS)
    per_h, hours, days = _int(r, 12, 85), _int(r, 3, 9), _int(r, 2, 6)
    return (f"{n} packs {per_h} boxes of {g} every hour at a {_a(r, 'warehouse', 'factory', 'shipping depot')}. "
            f"{n} works {hours} hours a day for {days} days {_a(r, 'this week', 'in a row', 'straight')}. How many "
            f"does {n} pack {_a(r, 'this week', 'in total', 'over those days')}?", per_h * hours * days)


def ages_times(r):
    a, b = _pick(r, NAMES, 2)
    ago, k, later = _int(r, 2, 6), _int(r, 2, 4), _int(r, 2, 15)
    x = _int(r, ago + 3, 30)
    rel = _a(r, "aunt", "uncle", "neighbor", "cousin", "grandmother")
    return (f"{a} is {x} years old. {b}, {a}'s {rel}, is {k} times as old as {a} was {ago} years ago. "
            f"{_a(r, 'How old will', 'What age will', 'How many years old will')} {b} be in {later} years?",
            k * (x - ago) + later)


def ages_sum(r):
    a, b, c = _pick(r, NAMES, 3)
    x, older = _int(r, 8, 40), _int(r, 2, 18)
    if (x + older) % 2:
        older += 1
    return (f"{a} is {x} years old and {b} is {older} years older than {a}. {c} is half as old as {b}. "
            + _a(r, f"What is the sum of the ages of {a}, {b} and {c}?", f"How old are {a}, {b} and {c} in total?",
                 f"Add up the ages of {a}, {b} and {c}. What do you get?"), x + (x + older) + (x + older) // 2)


def wage_fraction(r):
    n, s = _pick(r, NAMES), _pick(r, STORES)
    wage, f = _int(r, 11, 32), _pick(r, (2, 3, 4, 5))
    hours = f * _int(r, 4, 12)
    return (f"{n} earns {_money(wage)} per hour {_a(r, 'working', 'on shifts', 'stocking shelves')} at {s}. "
            f"{_a(r, 'Last week', 'This month', 'Over the holidays')} {n} worked {hours} hours and spent 1/{f} of "
            f"{n}'s {_a(r, 'pay', 'money', 'earnings')} on {_a(r, 'groceries', 'rent', 'books', 'a trip')}. "
            f"How many dollars does {n} have left?", wage * hours - wage * hours // f)


def fraction_gift(r):
    a, b, c = _pick(r, NAMES, 3)
    item, k = _pick(r, COLLECTIBLES), _pick(r, (2, 3, 4, 5, 6))
    total, more = k * _int(r, 12, 300), _int(r, 3, 60)
    return (f"{a} had {total:,} {item}. {a} gave 1/{k} of them to {b} and then {_a(r, 'bought', 'got', 'traded for')}"
            f" {more} more from {c}. How many {item} does {a} have now?", total - total // k + more)


def percent_albums(r):
    a, b = _pick(r, NAMES, 2)
    item, pct, albums = _pick(r, COLLECTIBLES), _pick(r, (10, 20, 25, 40, 50, 60, 75)), _int(r, 2, 9)
    g = int(np.gcd(pct, 100))  # total a multiple of 100 / g: pct% of it and the rest are whole
    total = albums * _int(r, 1, 12) * (100 // g)
    rest = total * (100 - pct) // 100
    return (f"{a} owned {total:,} {item}. {a} gave {pct}% of them to "
            f"{_a(r, 'a cousin named', 'a friend,', 'classmate')} {b}, and {a} split the rest equally into {albums} "
            f"{_a(r, 'albums', 'binders', 'boxes')}. How many {item} "
            f"did {a} put into each {_a(r, 'one', 'of them', 'container')}?", rest // albums)


def fence_perimeter(r):
    n = _pick(r, NAMES)
    length, width, gate = _int(r, 9, 120), _int(r, 5, 60), _int(r, 2, 9)
    place = _a(r, "vegetable garden", "dog run", "chicken yard", "flower bed", "paddock")
    return (f"{n} has a rectangular {place} that measures {length} meters by {width} meters. {n} "
            f"{_a(r, 'fences it', 'puts a fence around it', 'encloses it')}, leaving a {gate}-meter gap. "
            f"{_a(r, 'How much fencing', 'What length of fence', 'How much fence')} does {n} need, in meters?",
            2 * (length + width) - gate)


def tile_cost(r):
    n = _pick(r, NAMES)
    length, width, cost = _int(r, 8, 30), _int(r, 6, 25), _int(r, 2, 9)
    room = _a(r, "kitchen floor", "bathroom floor", "patio", "hallway", "basement floor")
    return (f"The {room} in {n}'s {_a(r, 'apartment', 'house', 'cabin')} is {length} feet long and {width} feet wide. "
            f"{n} picks {_a(r, 'square tiles', 'one-foot tiles', 'square-foot tiles')} "
            f"that cost {_money(cost)} each. {_a(r, 'How much will', 'What will', 'How many dollars will')} {n} "
            f"pay to tile the "
            f"{_a(r, 'whole', 'entire', 'complete')} {room.split()[0]}?", length * width * cost)


def practice_time(r):
    n = _pick(r, NAMES)
    what = _pick(r, ("the piano", "the violin", "chess openings", "free throws", "the guitar", "Spanish verbs"))
    mins, days, weeks = 5 * _int(r, 3, 18), _int(r, 3, 7), _int(r, 2, 9)
    return (f"{n} practices {what} {days} days a week, {mins} minutes each time. Over {weeks} weeks, how many "
            f"minutes does {n} {_a(r, 'practice', 'spend on it', 'put in')}?", mins * days * weeks)


def saving_weeks(r):
    n, g = _pick(r, NAMES), _pick(r, ("bike", "tablet", "camera", "skateboard", "telescope", "keyboard"))
    per_week, weeks, have = _int(r, 6, 45), _int(r, 3, 20), _int(r, 10, 150)
    return (f"{n} wants a {g} that costs {_money(have + per_week * weeks)}. {n} has already saved {_money(have)} and "
            f"puts away {_money(per_week)} {_a(r, 'every week', 'each week', 'a week')}. How many weeks will it take "
            f"{n} to afford the {g}?", weeks)


def reading_days(r):
    n = _pick(r, NAMES)
    per_day, days = _int(r, 8, 45), _int(r, 5, 30)
    kind = _pick(r, ("mystery novel", "history book", "fantasy saga", "biography", "science textbook"))
    return (f"{n} reads {per_day} pages of a {kind} every {_a(r, 'evening', 'night', 'morning')}. The {kind} has "
            f"{per_day * days} pages. How many {_a(r, 'days', 'sittings', 'sessions')} will {n} need to finish it?",
            days)


def bakery_revenue(r):
    owner, food, k = _pick(r, NAMES), _pick(r, FOODS), _pick(r, (2, 3, 4))
    mon, price = _int(r, 25, 240), _int(r, 2, 6)
    day1, day2 = _pick(r, ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"), 2)
    return (f"{owner}'s {_a(r, 'bakery', 'cafe', 'food truck', 'market stall')} sold {mon} {food} on {day1} and {k} "
            f"times as many on {day2}. Each one {_a(r, 'sold for', 'cost', 'was priced at')} {_money(price)}. "
            f"{_a(r, 'How much money did', 'How many dollars did')} {owner} take in from {food} on {day1} and "
            f"{day2}?", (mon + k * mon) * price)


def garden_rows(r):
    n, p = _pick(r, NAMES), _pick(r, PLANTS)
    rows, per_row = _int(r, 4, 25), _int(r, 6, 40)
    died = _int(r, 2, rows * per_row // 3)
    return (f"{n} planted {rows} rows of {p} with {per_row} in each row. "
            f"{_a(r, 'A late frost killed', 'Rabbits ate', 'A storm destroyed', 'A disease wiped out')} {died} of "
            f"them. How many {p} are {_a(r, 'still alive', 'left', 'still growing')}?", rows * per_row - died)


def class_percent(r):
    teacher = _pick(r, NAMES)
    pct = _pick(r, (20, 25, 40, 60, 75))
    size = _int(r, 2, 9) * (100 // int(np.gcd(pct, 100)))
    school = _pick(r, ("Maple Grove", "Riverside", "Hillcrest", "Oakwood", "Lakeview", "Cedar Park"))
    how, other = _a(r, "walk", "bike", "skate", "get a ride"), _a(r, "ride the bus", "take the train", "come by car")
    return (f"There are {size} students in {teacher}'s {_a(r, 'class', 'homeroom', 'grade')} at {school} "
            f"{_a(r, 'Middle School', 'Elementary', 'Academy')}, and {pct}% of them {how} to school. The rest of "
            f"{teacher}'s class {other}. How many of {teacher}'s {_a(r, 'students', 'pupils', 'kids')} {other}?",
            size - size * pct // 100)


def fuel_cost(r):
    n = _pick(r, NAMES)
    mpg, gallons, price = _int(r, 18, 45), _int(r, 3, 20), _int(r, 3, 6)
    city = _pick(r, ("Denver", "Boston", "Austin", "Chicago", "Seattle", "Phoenix", "Atlanta"))
    return (f"{n}'s {_a(r, 'car', 'truck', 'van', 'pickup')} goes {mpg} miles on one gallon of "
            f"{_a(r, 'gas', 'fuel', 'gasoline')}. {n} drives {mpg * gallons} miles to {city}, and "
            f"{_a(r, 'gas costs', 'fuel is', 'a gallon sells for')} {_money(price)}"
            f"{_a(r, ' per gallon', '', ' a gallon')}. "
            f"{_a(r, 'How much does', 'What does', 'How many dollars does')} {n} {_a(r, 'pay', 'spend')} for the fuel?",
            gallons * price)


def recipe_scale(r):
    n, food = _pick(r, NAMES), _pick(r, ("cookies", "pancakes", "muffins", "biscuits", "waffles"))
    cups, batch, mult = _int(r, 2, 5), _pick(r, (12, 16, 18, 20, 24, 30)), _int(r, 2, 9)
    return (f"A recipe uses {cups} cups of flour to make {batch} {food}. {n} is baking {batch * mult} {food} for a "
            f"{_a(r, 'school fair', 'party', 'bake sale', 'wedding')}. How many cups of flour does {n} need?",
            cups * mult)


def game_points(r):
    coach, sport = _pick(r, NAMES), _pick(r, SPORTS)
    team = f"the {_pick(r, ('Hawks', 'Tigers', 'Comets', 'Falcons', 'Wolves', 'Otters', 'Bears'))}"
    opponent = _pick(r, ("Elm Grove", "Port Carlin", "Westbury", "North Fork", "Bayside", "Redhill"))
    g1, more = _int(r, 12, 95), _int(r, 3, 25)
    question = _a(r, f"How many points did Coach {coach}'s team score in all three games?",
                  f"How many points in all did Coach {coach}'s team get over the three games?",
                  f"What was the total for Coach {coach}'s team over those three games?")
    return (f"Coach {coach}'s {sport} team, {team}, scored {g1} points in their {_a(r, 'first', 'opening')} game and "
            f"{more} more {_a(r, 'in game two', 'in the next one', 'the second time')}, against {opponent}. In game "
            f"three {team} {_a(r, 'doubled', 'scored twice')} their first score of {g1}. {question}",
            g1 + (g1 + more) + 2 * g1)


def fundraiser(r):
    club = _pick(r, ("drama club", "robotics team", "school band", "chess club", "debate team"))
    students, tickets, price = _int(r, 8, 40), _int(r, 3, 15), _int(r, 2, 9)
    goal = 50 * _int(r, 2, 60)
    raised = students * tickets * price
    adviser = _pick(r, NAMES)
    return (f"The {club} has {students} members, and each member sells {tickets} "
            f"{_a(r, 'raffle tickets', 'tickets', 'candy bars')} at {_money(price)} each. Their adviser, {adviser}, set"
            f" a goal of {_money(goal)}. By how many dollars do they "
            f"{_a(r, 'miss or beat', 'beat or miss', 'differ from')} {adviser}'s goal?", abs(raised - goal))


def farm_legs(r):
    n = _pick(r, NAMES)
    b, q = _pick(r, ("chickens", "ducks", "geese", "turkeys")), _pick(r, ("cows", "goats", "sheep", "pigs", "horses"))
    x, y = _int(r, 5, 90), _int(r, 3, 60)
    return (f"On {n}'s {_a(r, 'farm', 'ranch', 'homestead')} there are {x} {b} and {y} {q}. "
            f"{_a(r, 'How many legs do', 'Counting legs, how many do', 'What is the total number of legs of')} "
            f"{n}'s {b} and {q} {_a(r, 'have altogether?', 'have?', 'have in all?')}", 2 * x + 4 * y)


def tank_fill(r):
    n = _pick(r, NAMES)
    rate, minutes, have = _int(r, 4, 35), _int(r, 5, 60), _int(r, 20, 400)
    what = _pick(r, ("water tank", "rain barrel", "swimming pool", "fish tank", "cistern"))
    return (f"{n}'s {what} holds {have + rate * minutes:,} liters and already has {have} liters in it. "
            f"{_a(r, 'A hose adds', 'A pump pours in', 'Water flows in at')} {rate} liters every minute. "
            f"{_a(r, *HOW_LONG)} "
            f"{n} fill the {what}?", minutes)


def raise_salary(r):
    n = _pick(r, NAMES)
    pct, monthly = _pick(r, (5, 10, 20, 25, 50)), 100 * _int(r, 18, 70)
    job = _pick(r, ("nurse", "electrician", "librarian", "chef", "mechanic", "designer"))
    return (f"{n} works as a {job} and earns {_money(monthly)} a month. {_a(r, 'Next year', 'From January', 'Soon')}"
            f" {n} gets a {pct}% raise. {_a(r, 'How much will', 'What will', 'How many dollars will')} {n} earn in "
            f"{_a(r, 'the whole next year', 'the twelve months after the raise', 'a full year at the new pay')}?",
            12 * monthly * (100 + pct) // 100)


def share_candy(r):
    a = _pick(r, NAMES)
    friends, each, keep = _int(r, 3, 12), _int(r, 4, 30), _int(r, 2, 20)
    sweets = _pick(r, ("jelly beans", "gummy bears", "chocolates", "caramels", "lollipops"))
    return (f"{a} has a jar of {friends * each + keep} {sweets}. {a} keeps {keep} and shares the rest equally among "
            f"{friends} of {a}'s friends. How many does each friend get?", each)


def test_average(r):
    n = _pick(r, NAMES)
    subject = _pick(r, ("math", "biology", "history", "chemistry", "geography"))
    while True:  # redraw until the needed score is a possible one
        target, s1, s2, s3 = _int(r, 70, 92), _int(r, 60, 99), _int(r, 60, 99), _int(r, 60, 99)
        need = 4 * target - s1 - s2 - s3
        if 0 < need <= 100:
            break
    return (f"{n} scored {s1}, {s2} and {s3} on the first three {subject} {_a(r, 'tests', 'quizzes', 'exams')}. "
            f"What score does {n} need on the fourth {_a(r, 'one', 'test', 'try')} to average exactly {target}?", need)


def bike_rental(r):
    a = _pick(r, NAMES)
    base, hourly, hours, people = _int(r, 5, 20), _int(r, 3, 12), _int(r, 2, 8), _int(r, 2, 6)
    place = _pick(r, ("the lake", "the beach", "the city park", "the island", "the river trail"))
    thing = _a(r, "bike", "kayak", "scooter", "paddle board")
    return (f"Renting a {thing} at {place} costs {_money(base)} plus {_money(hourly)} for every hour. {a} and "
            f"{people - 1} friends each rent a {thing} for {hours} hours. "
            f"{_a(r, 'What do', 'How much do', 'What total do')} {a} and the friends pay?",
            people * (base + hourly * hours))


def box_volume(r):
    n = _pick(r, NAMES)
    length, width, height = _int(r, 3, 24), _int(r, 3, 18), _int(r, 2, 15)
    return (f"{n} fills a {_a(r, 'box', 'crate', 'drawer', 'bin')} that is {length} cm long, {width} cm wide and "
            f"{height} cm {_a(r, 'tall', 'high', 'deep')} with 1 cm "
            f"{_a(r, 'wooden', 'plastic', 'sugar', 'foam')} cubes. "
            f"{_a(r, 'How many cubes does', 'How many of the cubes does', 'What number of cubes does')} {n} "
            f"fit inside?",
            length * width * height)


def walk_run(r):
    n = _pick(r, NAMES)
    w, wh, s, sh = _int(r, 3, 6), _int(r, 1, 4), _int(r, 8, 16), _int(r, 1, 3)
    return (f"{n} {_a(r, 'walks', 'hikes', 'strolls')} at {w} km per hour for {wh} hours and then "
            f"{n} {_a(r, 'cycles', 'rides a bike', 'jogs')} at {s} km per hour for {sh} hours. How far does {n} "
            f"{_a(r, 'travel altogether', 'go', 'get in all')}, in km?", w * wh + s * sh)


def marbles_compare(r):
    a, b = _pick(r, NAMES, 2)
    item, x, fewer = _pick(r, COLLECTIBLES), _int(r, 10, 150), _int(r, 2, 9)
    return (f"{a} has {x} {item}. {b} has {fewer} fewer than twice as many {item} as {a}. How many {item} do {a} "
            f"and {b} have together?", x + 2 * x - fewer)


TEMPLATES: dict[str, Template] = {f.__name__: f for f in (
    shopping_change, shopping_discount, travel_rate, packing_rate, ages_times, ages_sum, wage_fraction,
    fraction_gift, percent_albums, fence_perimeter, tile_cost, practice_time, saving_weeks, reading_days,
    bakery_revenue, garden_rows, class_percent, fuel_cost, recipe_scale, game_points, fundraiser, farm_legs,
    tank_fill, raise_salary, share_candy, test_average, bike_rental, box_volume, walk_run, marbles_compare)}


def item(template: str, rng: np.random.Generator, k: int) -> dict:
    text, answer = TEMPLATES[template](rng)
    return {"id": f"{template}-{k}", "input": text, "target": f"#### {int(answer)}", "template": template}


def generate(n: int, seed: int = 0, templates=None) -> list[dict]:
    """n items with distinct texts, the templates taken in turn (a seeded order), each drawn from one seeded
    Generator: the same (n, seed, templates) give the same items."""
    names = list(templates or TEMPLATES)
    rng = np.random.default_rng(seed)
    order = [names[i] for i in rng.permutation(len(names))]
    out, seen, counts, tries = [], set(), dict.fromkeys(names, 0), 0
    while len(out) < n:
        t = order[len(out) % len(order)]
        it = item(t, rng, counts[t])
        tries += 1
        if tries > 50 * (n + 10):
            raise RuntimeError(f"could not draw {n} distinct items from {len(names)} templates")
        if it["input"] in seen:
            continue
        seen.add(it["input"])
        counts[t] += 1
        out.append(it)
    return out
