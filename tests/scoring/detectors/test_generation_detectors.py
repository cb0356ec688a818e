"""The text-only detectors against hand-computed values, DE-COP's and name cloze's answer parsing against scripted
answers (right and wrong letters, refusals, junk), and the score table they make (NaN reasons, quarantine)."""
from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest

from scoring.detectors import parse_method, parse_methods
from scoring.detectors.base import InputError
from scoring.detectors.decop import letter_probability, parse_letter
from scoring.generation.requests import GENERATIONS_SCHEMA, failed_row
from scoring.generation.scores import compute_generation_scores

CONT = "continuation@prefix=0.5"
REF = "cat sat on the mat while the dog slept"


def gen(rid, kind, sample, text, target="", top=None):
    return {"id": rid, "kind": kind, "sample": sample, "endpoint": "completions", "prompt": "p", "text": text,
            "finish_reason": "stop", "prompt_tokens": 0, "completion_tokens": 0, "seed": 1, "target": target,
            "info": "{}", "top_logprobs": json.dumps(top) if top is not None else None, "request": "k",
            "error": None}


def score(method: str, rows: list[dict], rid: str = "r") -> float:
    m = parse_method(method)
    by_kind = {}
    for g in rows:
        by_kind.setdefault(g["kind"], []).append(g)
    return m.detector.fn({"id": rid}, by_kind, **m.params)


def test_ngram_coverage_and_creativity_by_hand():
    samples = [gen("r", CONT, 0, "the cat sat on the mat and then the dog", REF),  # 5/10 at n=3
               gen("r", CONT, 1, "nothing in common at all here", REF)]  # 0
    assert score("ngram_coverage", samples) == pytest.approx(0.5)
    assert score("ngram_coverage@agg=mean", samples) == pytest.approx(0.25)
    assert score("ngram_coverage@n=2", samples) == pytest.approx(0.7)
    # n = 2..12: 0.7 + 0.5 (n = 3, 4, 5) for the first sample; max over samples
    assert score("creativity_index", samples) == pytest.approx(2.2)
    assert parse_method("ngram_coverage").column == "ngram_coverage@agg=max,n=3,prefix=0.5"


def test_samia_by_hand():
    samples = [gen("r", CONT, 0, "a b b c", "b b b d"), gen("r", CONT, 1, "b d", "b b b d")]
    assert score("samia", samples) == pytest.approx((2 / 4 + 2 / 4) / 2)
    import zlib

    weighted = (2 / 4 * len(zlib.compress(b"a b b c")) + 2 / 4 * len(zlib.compress(b"b d"))) / 2
    assert score("samia@zlib=true", samples) == pytest.approx(weighted)


@pytest.mark.parametrize("answer,letter", [
    ("A", "A"), (" B.", "B"), ("(C)", "C"), ("[D] because", "D"), ("Answer: B", "B"), ("The answer is C.", "C"),
    ("answer: d", None),  # a lower-case letter is a word, not an answer
    ("Alright, let me think", None), ("As an AI, I cannot say", None), ("I'm sorry, I can't help with that.", None),
    ("E", None), ("", None), ("  \n", None), ("%%$#", None), ("AB", None),
])
def test_decop_answers_parse_strictly(answer, letter):
    assert parse_letter(answer) == letter


def test_decop_share_leaves_out_unparsable_answers():
    kind = "decop@orderings=24"
    answers = [gen("r", kind, 0, "A", "A"), gen("r", kind, 1, "C", "B"), gen("r", kind, 2, "I refuse", "C"),
               gen("r", kind, 3, "(D)", "D")]
    assert score("decop", answers) == pytest.approx(2 / 3)
    assert math.isnan(score("decop", [gen("r", kind, 0, "junk", "A")]))


def test_decop_probability_is_the_softmax_over_the_letters():
    kind = "decop@orderings=24"
    top = [{" ": -0.1, "\n": -2.0}, {" A": math.log(0.6), "B": math.log(0.2), "x": -1.0}]
    # the first token lists no letter; at the second, C and D are missing (-1000): P(A) = 0.6 / (0.6 + 0.2)
    assert letter_probability(json.dumps(top), "A") == pytest.approx(0.75)
    assert letter_probability(json.dumps([{"x": -1.0}]), "A") is None
    answers = [gen("r", kind, 0, "A", "A", top), gen("r", kind, 1, "B", "B", top)]
    assert score("decop@score=prob", answers) == pytest.approx((0.75 + 0.25) / 2)


def test_name_cloze_is_an_exact_case_insensitive_match():
    kind = "name_cloze@ner=auto"
    assert score("name_cloze", [gen("r", kind, 0, "<name>gatsby</name>", "Gatsby")]) == 1.0
    assert score("name_cloze", [gen("r", kind, 0, "  <name>Gatsby", "Gatsby")]) == 1.0  # stopped at </name>
    assert score("name_cloze", [gen("r", kind, 0, "Gatsby", "Gatsby")]) == 1.0  # no tags: the answer itself
    assert score("name_cloze", [gen("r", kind, 0, "<name>Mr. Gatsby</name>", "Gatsby")]) == 0.0
    assert score("name_cloze", [gen("r", kind, 0, "I don't know.", "Gatsby")]) == 0.0


def test_log_probability_and_text_detectors_do_not_mix():
    assert {m.name for m in parse_methods("all", input="generations")} == {
        "ngram_coverage", "creativity_index", "samia", "decop", "name_cloze"}
    assert "samia" not in {m.name for m in parse_methods("all")}
    with pytest.raises(InputError, match="min_k need"):
        parse_methods("samia,min_k", input="generations")
    with pytest.raises(InputError, match="samia reads the text a model generates"):
        parse_methods("loss,samia")


def test_the_score_table_keeps_partly_scored_rows_and_quarantines_the_rest():
    rows = [{"id": r, "label": lab, "bucket": None, "in_eval": True} for r, lab in (("a", 1), ("b", 0), ("c", 0))]
    gens = [gen("a", CONT, 0, "cat sat on the mat", REF),
            failed_row("a", "name_cloze@ner=auto", "no_single_name: no proper name found"),
            gen("b", CONT, 0, "nothing", REF), gen("b", "name_cloze@ner=auto", 0, "<name>X</name>", "X"),
            failed_row("c", CONT, "api_error: HTTP 400: too long"),
            failed_row("c", "name_cloze@ner=auto", "no_single_name: 2 proper names found (A, B)")]
    table = pa.Table.from_pylist(gens, schema=GENERATIONS_SCHEMA)
    methods = parse_methods("ngram_coverage,name_cloze", input="generations")
    scores, quarantined, not_scored = compute_generation_scores(table, rows, methods)
    assert scores.column("id").to_pylist() == ["a", "b"]
    assert scores.column("ngram_coverage@agg=max,n=3,prefix=0.5").to_pylist() == [1.0, 0.0]
    assert math.isnan(scores.column("name_cloze").to_pylist()[0])
    assert not_scored == {"name_cloze": {"no_single_name": 1}}
    assert quarantined == [{"id": "c", "stage": "generate", "reason": "api_error",
                            "detail": "api_error: HTTP 400: too long; no_single_name: 2 proper names found (A, B)"}]
