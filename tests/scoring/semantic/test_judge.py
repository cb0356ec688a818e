"""scoring/semantic/judge.py: the kind of an item (hand-labelled: MBPP, HumanEval, GSM8K, MATH and MMLU-style items),
the prompt of a pair, the verdict read from answers real chat models give, which pairs are judged, and the decision
with a verdict."""
from __future__ import annotations

import pytest

from scoring.semantic.calibrate import COSINE_FLOOR
from scoring.semantic.decide import Candidate, Decision
from scoring.semantic.judge import KINDS, kind_of, messages, parse_verdict, prompt_digest, rephrased, to_judge
from scoring.semantic.verify import Verdict

GSM8K = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many "
         "clips did Natalia sell altogether in April and May?")


@pytest.mark.parametrize("item, kind", [
    ('def has_close_elements(numbers, threshold):\n    """Check if any two numbers are closer than threshold."""\n',
     "code"),  # HumanEval: a def line
    ("Write a function to find the shared elements from the given two lists.", "code"),  # MBPP: asks for one
    ("Write a python function to count the vowels in a string.", "code"),
    ("Fix the bug: the call parse_args(argv) drops the last flag.", "code"),  # a snake_case identifier
    ("What does getName() return when the field is unset?", "code"),  # a call of a name that is not math
    (GSM8K, "math"),  # numbers and "how many"
    ("What is sqrt(16) + 3?", "math"),  # sqrt( is math, not code; two numbers and a question
    ("Let $x$ satisfy $2x + 3 = 11$. Find x.", "math"),  # LaTeX
    ("A shirt costs 20 dollars after a 25% discount. What was the price before?", "math"),
    ("What is the capital of France?", "knowledge"),
    ("In 1969, who was the first person to walk on the Moon?", "knowledge"),  # one number (a year) and a question
    ("Which one of the following is a noble gas? A. Oxygen B. Neon C. Iron D. Sodium", "knowledge"),
])
def test_the_kind_follows_the_documented_rule(item, kind):
    assert kind_of(item) == kind


def test_a_forced_kind_wins_and_an_unknown_one_is_refused():
    assert kind_of(GSM8K, "knowledge") == "knowledge" and kind_of("What is 2?", "code") == "code"
    with pytest.raises(ValueError, match="judge kind"):
        kind_of(GSM8K, "trivia")


def test_the_prompt_holds_both_texts_asks_for_yes_or_no_and_names_the_kind():
    system, user = messages("math", "  " + GSM8K + "\n", "Worksheet. Natalia sold 48 clips in April ...")
    assert "math problem" in system and "another language" in system and "other numbers" in system
    assert 'Start your answer with "yes" or "no"' in system and "window cut from a longer document" in system
    assert f"<<<\n{GSM8K}\n>>>" in user and "Natalia sold 48 clips in April ..." in user
    assert user.endswith("Does the corpus passage contain the same math problem? Answer yes or no.")
    assert "programming task" in messages("code", "x", "y")[0] and "question" in messages("knowledge", "x", "y")[1]
    digests = {k: prompt_digest(k) for k in KINDS}
    assert len(set(digests.values())) == 3 and all(len(d) == 16 for d in digests.values())
    assert prompt_digest("math") == digests["math"]  # a digest of the templates, the same every run


@pytest.mark.parametrize("answer, verdict", [
    ("Yes", "yes"), ("yes.", "yes"), ("**Yes** - the passage restates the problem.", "yes"), ('"Yes"', "yes"),
    ("Answer: yes", "yes"), ("True", "yes"), ("<think>Same numbers, same names.</think>\n\nYes", "yes"),
    ("No", "no"), ("no, it is a different problem", "no"), ("NO.", "no"), ("False", "no"), ("Verdict: **No**", "no"),
    ("- no", "no"),
    ("", "unparsed"), (None, "unparsed"), ("I think yes", "unparsed"), ("Yesterday's worksheet differs.", "unparsed"),
    ("Maybe", "unparsed"), ("<think>Let me compare the two texts carefully", "unparsed"),  # cut mid-thought
])
def test_the_verdict_is_the_answers_first_word(answer, verdict):
    assert parse_verdict(answer) == verdict


def decision(score: float, cosine: float = 0.8, abstain: bool = False, candidate: bool = True) -> Decision:
    c = Candidate(0, cosine, "d", 0, 10, 0, 50, "text") if candidate else None
    v = Verdict({}, {}, score, None, abstain, 2.0 if abstain else 9.0) if candidate else None
    return Decision(cosine if candidate else None, c, v, score)


def test_the_judged_pairs_are_flags_near_misses_and_close_abstentions():
    t = 0.7
    assert to_judge(decision(0.9), t) and to_judge(decision(0.7), t)  # flagged: the judge may veto
    assert to_judge(decision(0.35), t) and not to_judge(decision(0.34), t)  # a near miss from half the threshold
    assert not to_judge(decision(0.0, cosine=0.95), t)  # a checkable item whose anchors are all missing
    assert to_judge(decision(0.0, cosine=COSINE_FLOOR, abstain=True), t)  # the verifier cannot check it
    assert not to_judge(decision(0.0, cosine=COSINE_FLOOR - 0.01, abstain=True), t)
    assert not to_judge(decision(0.0, candidate=False), t)  # the corpus gave no window
    assert not to_judge(decision(0.0), 0.0)  # a threshold of 0 does not make every item a near miss


def test_the_verdict_decides_where_there_is_one():
    assert rephrased(False, "yes") and not rephrased(True, "no") and not rephrased(True, "unparsed")
    assert rephrased(True, None) and not rephrased(False, None)  # not asked: the verifier's decision
