"""Prompt kinds, the plan and the budget: what a text-only run asks of each row, checked without a server."""
from __future__ import annotations

from collections import Counter

import pytest

from scoring.generation.kinds import (Settings, first_phase, kind_key, orderings, parse_paraphrases, second_phase,
                                      usable_paraphrases)
from scoring.generation.plan import admit, combine, describe, plan_rows
from scoring.generation.prompts import DEFAULTS, merged

TEXT = "The river flows north through the valley before it reaches the sea at the old harbour town."
CONT = kind_key("continuation", prefix=0.5)


def test_continuations_use_n_where_the_server_honours_it_else_one_seeded_request_each():
    with_n, _ = first_phase("r1", TEXT, [CONT], Settings(samples=4))
    assert len(with_n) == 1 and with_n[0].n == 4 and with_n[0].body(chat=False)["n"] == 4
    each, _ = first_phase("r1", TEXT, [CONT], Settings(samples=4, n_ok=False))
    assert [r.first_sample for r in each] == [0, 1, 2, 3] and {r.n for r in each} == {1}
    assert len({r.seed for r in each}) == 4
    again, _ = first_phase("r1", TEXT, [CONT], Settings(samples=4, n_ok=False))
    assert [r.key(False, "m") for r in again] == [r.key(False, "m") for r in each]  # the same requests on a rerun
    other, _ = first_phase("r2", TEXT, [CONT], Settings(samples=4, n_ok=False))
    assert not {r.seed for r in other} & {r.seed for r in each}
    req = each[0]
    # 17 words: int(17 * 0.5) = 8 in the prompt
    assert req.prompt == "The river flows north through the valley before" and req.target.startswith("it reaches")
    assert req.body(chat=False) == {"prompt": req.prompt, "max_tokens": req.max_tokens, "temperature": 1.0,
                                    "top_p": 0.95, "seed": req.seed}
    assert "seed" not in first_phase("r1", TEXT, [CONT], Settings(seed_ok=False, top_p_ok=False))[0][0].body(False)


def test_chat_requests_carry_the_instruction_as_the_users_message():
    (req,), _ = first_phase("r1", TEXT, [CONT], Settings(chat=True, samples=2))
    body = req.body(chat=True)
    assert body["messages"] == [{"role": "user", "content": DEFAULTS["continuation"]["chat"].replace(
        "{prefix}", "The river flows north through the valley before")}]
    assert req.key(True, "m") != req.key(False, "m")


def test_max_new_tokens_defaults_to_the_true_continuations_length():
    (req,), _ = first_phase("r1", TEXT, [CONT], Settings(), count_tokens=lambda t: len(t.split()) * 2)
    assert req.max_tokens == 2 * 9  # the reference has 9 words; this counter says 2 tokens a word
    (req,), _ = first_phase("r1", TEXT, [CONT], Settings(max_new_tokens=7))
    assert req.max_tokens == 7


def test_rows_that_cannot_be_asked_say_why():
    requests, skipped = first_phase("r1", "word", [CONT, kind_key("name_cloze", ner="rule")], Settings())
    assert requests == []
    assert [r["error"].split(":")[0] for r in skipped] == ["too_short", "no_single_name"]
    assert {r["sample"] for r in skipped} == {-1}


def test_orderings_put_every_option_in_every_position_equally_often():
    every = orderings(24, 0, "r")
    assert len(set(every)) == 24
    for k in (4, 8, 12):
        chosen = orderings(k, 0, "row-7")
        assert len(set(chosen)) == k
        for position in range(4):
            assert Counter(o[position] for o in chosen) == {0: k // 4, 1: k // 4, 2: k // 4, 3: k // 4}
    assert orderings(8, 0, "row-7") == orderings(8, 0, "row-7")
    with pytest.raises(ValueError):
        orderings(6, 0, "r")


def test_paraphrases_parse_strictly_then_loosely():
    answer = "Example B: first one.\n\nExample C: second one.\n\nExample D: third one.\n---"
    assert parse_paraphrases(answer, completion=False) == ["first one.", "second one.", "third one."]
    bold = "**Example B:** one\n**Example C:** two\n**Example D:** three"
    assert parse_paraphrases(bold, completion=False) == ["one", "two", "three"]
    # a completion prompt ends in "Example B:", so the answer starts inside B
    assert parse_paraphrases(" one\n\nExample C: two\n\nExample D: three", completion=True) == ["one", "two", "three"]
    assert parse_paraphrases("I cannot do that.", completion=False) == []
    assert usable_paraphrases("Same text.", ["same  TEXT.", "other", "other", "third", "fourth"]) == \
        ["other", "third", "fourth"]


def test_decop_questions_follow_the_paraphrases():
    requests, _ = first_phase("r1", TEXT, [kind_key("decop", orderings=4)], Settings())
    assert [r.kind for r in requests] == ["paraphrase"]  # the question waits for the paraphrases
    answer = {"id": "r1", "kind": "paraphrase", "sample": 0, "endpoint": "chat", "error": None,
              "text": "Example B: P one.\n\nExample C: P two.\n\nExample D: P three."}
    questions, skipped = second_phase("r1", TEXT, [kind_key("decop", orderings=4)], [answer], Settings())
    assert not skipped and len(questions) == 4
    for q in questions:
        letter = q.target
        assert f"{letter}. {TEXT}\n" in q.prompt and q.temperature == 0.0 and q.n == 1
    assert sorted(q.target for q in questions) == ["A", "B", "C", "D"]
    bad = dict(answer, text="Example B: P one.")
    _, skipped = second_phase("r1", TEXT, [kind_key("decop", orderings=4)], [bad], Settings())
    assert skipped[0]["error"] == "decop_paraphrases: 1 of 3 usable paraphrases"


def test_the_plan_counts_requests_and_tokens_and_the_budget_admits_whole_parts():
    s = Settings(samples=5, n_ok=False)
    plan = plan_rows([("a", TEXT), ("b", "word")], [CONT], s, count_tokens=lambda t: len(t.split()))
    assert plan["rows"] == 2 and plan["requests"] == 5  # "word" is not asked
    # this counter says a token a word: 8 prompt tokens, and the true continuation's 9 as max_tokens
    assert plan["prompt_tokens"] == 5 * 8 and plan["completion_tokens"] == 5 * 9
    estimated = plan_rows([("a", TEXT)], [CONT], s)  # no tokenizer: bytes / 3, and 1.5 tokens a reference word
    assert estimated["prompt_tokens"] == 5 * 16 and estimated["completion_tokens"] == 5 * 14
    assert plan["by_kind"][CONT]["rows_not_asked"] == 1
    assert "2 rows: 5 requests" in describe(plan)
    parts = [(0, plan), (1, plan), (2, plan)]
    assert admit(parts, None, None)[0] == [0, 1, 2]
    admitted, fits, whole = admit(parts, 10, None)
    assert admitted == [0, 1] and fits["requests"] == 10 and whole == combine([plan] * 3)
    assert admit(parts, None, 169)[0] == [0]  # 85 tokens a part
    assert admit(parts, 4, None)[0] == []


def test_prompt_overrides_are_checked():
    assert merged({"continuation": {"chat": "Go on: {prefix}"}})["continuation"]["chat"] == "Go on: {prefix}"
    with pytest.raises(ValueError, match="unknown prompt kind"):
        merged({"continuations": {}})
    with pytest.raises(ValueError, match="no field"):
        merged({"decop": {"system": "x"}})
