"""A synthetic word-problem task with known contamination: the ground truth of `tidemark impact`'s studies.

"Question: Ana has 3 coins and gets 5 more. How many coins does Ana have now?" → "8", with numbers from 1 to 20.
A tiny GPT-2 trained on a few thousand such problems learns some of the addition, and more with more steps
(measured on 2 cores, one torch thread: 12% / 26% / 51% of unseen problems right after 300 / 600 / 1,200 steps),
so models trained for different numbers of steps score differently on the same items: what ConStat's reference
models need. The reference benchmark is a synthetic sibling by default (new problems, the same phrasing: ConStat's
second kind), or rephrased items (`rephrased=True`; with both phrasings the tiny model learned too slowly to
memorise anything). The benchmark's and the reference's items are drawn apart from the training problems (no
problem, as names, objects and numbers, is in both), and a contaminated model also trains on a chosen subset of
the benchmark's items, question and answer, verbatim and repeated: an item-specific memory (with numbers 1-9, every
leaked (a, b) pair is in the training problems too, and a leak taught the sum, not the item: measured, no gain).

Everything here is pure (texts, items, which are contaminated); jobs/kit/impact_study.py trains the models,
answers the items and writes the files.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

NAMES = ("Tom", "Ana", "Li", "Omar", "Sara", "Ken", "Mia", "Raj", "Eva", "Sam", "Zoe", "Ben", "Ivy", "Leo", "Nia",
         "Max", "Ada", "Kai", "Uma", "Jon", "Lea", "Noa", "Ron", "Tia")
OBJECTS = ("apples", "pens", "coins", "books", "cards", "stones", "shells", "cups", "hats", "keys", "balls", "maps",
           "bells", "rings", "lamps", "shoes")
BENCH = "Question: {name} has {a} {obj} and gets {b} more. How many {obj} does {name} have now?"
REPHRASED = "Question: {name} starts with {a} {obj}. Then {name} is given {b} {obj}. What is the number of {obj} {name} has?"
ANSWER = "\nAnswer: {answer}"


def problem(rng: random.Random, numbers: tuple[int, int] = (1, 9), easy: bool = False) -> tuple:
    """(name, object, a, b); an easy problem adds 0 (its answer is in the question: easy for every model)."""
    return rng.choice(NAMES), rng.choice(OBJECTS), rng.randint(*numbers), 0 if easy else rng.randint(*numbers)


def render(template: str, p: tuple) -> dict:
    name, obj, a, b = p
    return {"question": template.format(name=name, obj=obj, a=a, b=b), "answer": str(a + b)}


def training_text(item: dict) -> str:
    return item["question"] + ANSWER.format(answer=item["answer"])


def prompt(item: dict) -> str:
    """What the model is asked (lm-evaluation-harness's doc_to_text): the question, then "Answer:"."""
    return item["question"] + "\nAnswer:"


@dataclass
class WordProblemStudy:
    bench: list[dict]  # the benchmark's test items: id, question, answer
    reference: list[dict]  # the reference benchmark's items (rephrased, other problems)
    general: list[str]  # the task's training text, both phrasings
    contaminated_ids: list[str]  # the test items a contaminated model also trains on
    repeats: int
    facts: dict = field(default_factory=dict)

    def contamination(self) -> list[str]:
        chosen = set(self.contaminated_ids)
        return [training_text(i) for i in self.bench if i["id"] in chosen] * self.repeats


def word_problem_study(*, n_bench: int = 200, n_reference: int = 200, n_train: int = 3000, contaminated: float = 0.5,
                       repeats: int = 40, easy_contaminated: bool = False, numbers: tuple[int, int] = (1, 20),
                       rephrased: bool = False, easy: float = 0.2, seed: int = 0) -> WordProblemStudy:
    """`contaminated` of the benchmark's items (a seeded random subset; with `easy_contaminated`, the easy ones
    first: leaked items that are also easier, the confound the difference-in-differences removes) are trained on
    verbatim, `repeats` times, by a contaminated model. `easy` of the benchmark's, the reference's and the training
    problems add 0: their answer is in the question, so they are easier for every model (an `easy` item flag)."""
    rng = random.Random(seed)
    held: set = set()
    bench, reference = [], []
    second = REPHRASED if rephrased else BENCH  # rephrased items, or a synthetic sibling: new items, same phrasing
    for k, (out, template, n) in enumerate(((bench, BENCH, n_bench), (reference, second, n_reference))):
        while len(out) < n:
            p = problem(rng, numbers, easy=len(out) < easy * n)
            if p not in held:
                held.add(p)
                out.append({"id": f"{'bench' if k == 0 else 'ref'}-{len(out):04d}", **render(template, p),
                            "easy": p[3] == 0})
    general = []
    while len(general) < n_train:
        p = problem(rng, numbers, easy=rng.random() < easy)
        if p not in held:  # no test item of either benchmark is in the task's training text
            general.append(training_text(render(BENCH if len(general) % 2 == 0 else second, p)))
    n_leak = int(round(contaminated * n_bench))
    if easy_contaminated:
        order = sorted(bench, key=lambda i: (not i["easy"], i["id"]))
    else:
        order = [bench[j] for j in random.Random(seed + 1).sample(range(n_bench), n_bench)]
    leak = sorted(i["id"] for i in order[:n_leak])
    return WordProblemStudy(bench, reference, general, leak, repeats,
                            {"n_bench": n_bench, "n_reference": n_reference, "n_train": n_train,
                             "contaminated": contaminated, "repeats": repeats, "easy_contaminated": easy_contaminated,
                             "numbers": list(numbers), "rephrased": rephrased, "easy": easy, "seed": seed})
