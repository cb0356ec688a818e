from __future__ import annotations

import math

from scoring.semantic.anchors import Anchors, anchors
from scoring.semantic.verify import MIN_WEIGHT, WindowTerms, item_weight, verify

ITEM = ("Tom packs 24 pencils into each of 3 boxes. He gives 5 pencils to each of his 7 friends at Lincoln School. "
        "How many pencils does Tom have left?")
REPHRASE = ("Each of the 3 boxes that Tom fills holds 24 pencils. Tom hands out 5 pencils apiece to 7 friends from "
            "Lincoln School. What number of pencils remains with Tom? He keeps 37.")
OTHER = ("Sara has 3 bags with 12 marbles in each bag. She gives 5 marbles to her brother. "
         "How many marbles does Sara have now?")
GERMAN = ("Tom packt 24 Bleistifte in jede von 3 Schachteln. Er gibt jedem seiner 7 Freunde an der Lincoln School "
          "5 Bleistifte. Wie viele Bleistifte hat Tom noch?")
FRENCH = ("Tom range 24 crayons dans chacune des trois bo\u00eetes. Il donne cinq crayons \u00e0 chacun de ses sept "
          "amis de la Lincoln School. Combien de crayons reste-t-il \u00e0 Tom ?")


def test_the_score_is_the_weighted_recall_of_the_items_anchors():
    item = Anchors(numbers=frozenset({"48", "3"}), entities=frozenset({"Natalia"}), rare_words=frozenset({"barrettes"}))
    # weights: 48 -> 3, 3 (small) -> 1, an entity -> 2: 6 >= MIN_WEIGHT, so the rare word weighs 0 (a fallback)
    v = verify(item, "Then natalia bought 3 barrettes, not 4.8 of them")
    assert v.found == {"numbers": 1, "code": 0, "entities": 1, "rare_words": 1}
    assert v.total == {"numbers": 2, "code": 0, "entities": 1, "rare_words": 1}
    assert math.isclose(v.score, 3 / 6) and v.weight == 6.0 and not v.abstain
    assert v.answer_found is None
    assert v.recall("numbers") == 0.5 and math.isnan(v.recall("code"))
    assert verify(item, WindowTerms.of("48, 3, Natalia, barrettes")).score == 1.0


def test_a_rephrase_scores_high_and_finds_the_answer():
    item = anchors(ITEM, answer="24 * 3 - 5 * 7 = 37\n#### 37")
    assert item.numbers == {"24", "3", "5", "7"} and item.entities == {"Tom", "Lincoln School"}
    assert item_weight(item) == 10.0  # 3 + 1 + 1 + 1 + 2 names x 2
    v = verify(item, REPHRASE)
    assert v.score == 1.0 and v.answer_found is True


def test_a_different_problem_sharing_small_numbers_scores_low():
    v = verify(anchors(ITEM, answer="#### 37"), OTHER)
    assert v.found["numbers"] == 2  # 3 and 5, the small numbers every such problem has
    assert math.isclose(v.score, 2 / 10) and v.answer_found is False and not v.name_forgiven


def test_a_translation_keeps_the_numbers_and_the_names():
    item = anchors(ITEM)
    de = verify(item, GERMAN)
    assert de.recall("numbers") == 1.0 and de.recall("entities") == 1.0 and de.score == 1.0
    fr = verify(item, FRENCH)  # the French spells 3, 5 and 7 out: only English number words are read
    assert fr.recall("numbers") == 0.25 and fr.recall("entities") == 1.0
    assert math.isclose(fr.score, 7 / 10) and fr.score > 3 * verify(item, OTHER).score


def test_a_rephrased_code_problem_keeps_its_identifiers():
    item = anchors("Write a Python function count_vowels(text) that returns how many vowels are in the string. "
                   "For example, count_vowels(\"banana\") should return 3.")
    assert item.code == {"count_vowels", "banana"}
    v = verify(item, "Implement count_vowels(text): given a string, return the number of vowel characters in it; "
                     "count_vowels('banana') gives 3.")
    assert v.recall("code") == 1.0 and v.recall("numbers") == 1.0 and v.recall("entities") == 0.0
    assert math.isclose(v.score, 7 / 9)  # code 3 + 3, the small number 1, of 9 (Python's 2 missing)
    other = verify(item, "Write a function count_words(text) that returns how many words the string has; "
                         "count_words(\"a b c\") is 3.")
    assert math.isclose(other.score, 1 / 9)


def test_too_few_anchors_abstain():
    v = verify(anchors("What is the capital of France?"), "The capital of France is Paris.")
    assert v.abstain and v.weight == 2.0 < MIN_WEIGHT and v.score == 1.0
    assert verify(anchors("is it so?"), "anything").score == 0.0  # no anchor at all
    assert verify(anchors("Ana paid 40 dollars."), "x").abstain  # Ana starts the sentence: 40 alone weighs 3
    assert not verify(anchors("Then Ana paid 40 dollars."), "x").abstain  # 40 (3) + Ana (2) = 5


def test_a_name_at_a_windows_sentence_start_still_counts():
    item = Anchors(entities=frozenset({"Lincoln"}), code=frozenset({"hello world", "getName"}))
    v = verify(item, "Lincoln said getname. Then print('hello world').")
    assert v.found == {"numbers": 0, "code": 2, "entities": 1, "rare_words": 0}


def test_rare_words_count_only_for_an_item_with_too_little_else():
    """An item whose numbers, code and names weigh < MIN_WEIGHT decides on its rare words (weight 1 each)."""
    item = Anchors(entities=frozenset({"Lactase"}), rare_words=frozenset({"enzyme", "lactose", "hydrolysis"}))
    assert item_weight(item) == 2.0 + 3.0
    v = verify(item, "the enzyme that splits lactose is lactase")
    assert math.isclose(v.score, 4 / 5) and not v.abstain  # lactase (2), enzyme, lactose (1 + 1) of 5
    with_number = Anchors(numbers=frozenset({"1935", "12"}), rare_words=frozenset({"lactose"}))
    assert item_weight(with_number) == 6.0 and verify(with_number, "1935 12").score == 1.0  # lactose weighs 0


def test_translations_keep_the_anchors_the_verifier_reads():
    """What crosses a language: digits (with the thousands a translation writes: a narrow no-break space, or digits
    against CJK characters) and names. Rare words weigh 0 for this item, so the English words lost cost nothing."""
    item = anchors("Lucas had 1,050 stickers. He gave 1/6 of them to Hiro and then bought 54 more from Julia. "
                   "How many stickers does Lucas have now?")
    assert item.numbers == {"1050", "1", "6", "54"} and item.entities == {"Hiro", "Julia", "Lucas"}
    french = ("Lucas avait 1\u202f050 autocollants. Il en a donné 1/6 à Hiro, puis en a acheté 54 de plus à Julia. "
              "Combien d'autocollants Lucas a-t-il maintenant ?")
    chinese = "卢卡斯有1,050张贴纸。他把其中的1/6给了Hiro，又从Julia那里买了54张。Lucas现在有多少张？"
    assert verify(item, french).score == 1.0
    v = verify(item, chinese)  # digits against CJK characters, names inside CJK \w runs: all found
    assert v.found == {"numbers": 4, "code": 0, "entities": 3, "rare_words": 0} and v.score == 1.0
    german_sibling = "Lukas hatte 2.050 Aufkleber und gab Hiro 1/5 davon."  # another problem: 2050, 1/5
    assert verify(item, german_sibling).score < 0.5


def test_a_name_of_several_words_is_one_anchor_and_one_missing_name_is_forgiven():
    """SmolLM2 rephrased "There are 20 students in Leila's homeroom at Oakwood Middle School, and 40% of them get a
    ride..." keeping the numbers and Leila and dropping the school (bench/results/semantic_study.md)."""
    item = anchors("There are 20 students in Leila's homeroom at Oakwood Middle School, and 40% of them get a ride to "
                   "school. How many of Leila's kids ride the bus?")
    assert item.entities == {"Leila", "Oakwood Middle School"} and item_weight(item) == 10.0  # 3 + 3 + 2 + 2
    dropped = verify(item, "There are 20 students in Leila's homeroom. 40% of them get a ride to school.")
    assert dropped.found["entities"] == 1 and dropped.name_forgiven and dropped.score == 1.0  # (6 + 2 + 2) / 10
    partial = verify(item, "20 kids of Leila at Oakwood, 40% by bus")  # a name's words must all be there
    assert partial.found["entities"] == 1 and partial.name_forgiven and partial.score == 1.0
    no_name = verify(item, "There are 20 students, and 40% of them get a ride.")  # no name found: nothing forgiven
    assert not no_name.name_forgiven and math.isclose(no_name.score, 6 / 10)
    weak = anchors("Ana and Ben met Carl at Dover in 3 days.")  # numbers weigh 1 < MIN_WEIGHT: names all needed
    assert weak.entities == {"Ben", "Carl", "Dover"}  # Ana starts the sentence
    v = verify(weak, "ana met ben and carl in 3 days")
    assert v.found["entities"] == 2 and not v.name_forgiven and math.isclose(v.score, 5 / 7)
    names_only = anchors("Did Napoleon meet Talleyrand?")  # 2 + 2: decidable, and never found on one name
    assert not verify(names_only, "Napoleon met him").name_forgiven
