"""`tidemark impact`'s inputs, without Ray: lm-evaluation-harness 0.4.13 --log_samples files read as they are (a
real recorded run: tests/fixtures/lm_eval/), plain result files with bad rows, and evidence joined by id or text."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from jobs.parts.impact.join import label_items, match_source
from jobs.parts.impact.results import read_results, text_key
from jobs.plane.runners import LOCAL

RUN = Path(__file__).resolve().parents[3] / "fixtures" / "lm_eval" / "run"
SETTINGS = {"metric": None, "filter": None, "input_field": None, "answer_field": None}


def read(specs, **settings):
    return read_results([str(s) for s in specs], {**SETTINGS, **settings}, runner=LOCAL, progress=False)


def lines(model_dir: str, task: str) -> list[dict]:
    f, = (RUN / model_dir).glob(f"samples_{task}_*.jsonl")
    return [json.loads(x) for x in f.read_text().splitlines() if x.strip()]


def test_harness_samples_are_read_as_they_are():
    items, quarantine, files = read([RUN])
    assert quarantine.num_rows == 0 and len(files) == 4
    assert sorted(set(items.column("model").to_pylist())) == ["/tmp/lmeval-model", "/tmp/lmeval-model-more"]
    by = {(f["model"], f["task"]): f for f in files}
    gen = by[("/tmp/lmeval-model", "tidemark_arith_gen")]
    assert gen["filters"] == ["none", "strict-match", "flexible-extract"] and gen["filter"] == "strict-match"
    assert gen["lines"] == 60 and gen["other_filter_lines"] == 40 and gen["metric"] == ["exact_match"]
    assert by[("/tmp/lmeval-model", "tidemark_arith_mc")]["metric"] == ["acc"]
    t = items.filter(pc.equal(items.column("task"), "tidemark_arith_gen"))
    assert t.num_rows == 40 and set(t.column("filter").to_pylist()) == {"strict-match"}
    # every score is the line's own exact_match for the chosen filter, keyed by doc_id
    want = {str(x["doc_id"]): x["exact_match"] for x in lines("__tmp__lmeval-model", "tidemark_arith_gen")
            if x["filter"] == "strict-match"}
    got = {i: s for m, i, s in zip(*(t.column(c).to_pylist() for c in ("model", "item", "score")))
           if m == "/tmp/lmeval-model"}
    assert got == want
    # the input key is the doc's question, whatever its case and punctuation
    first = lines("__tmp__lmeval-model", "tidemark_arith_gen")[0]
    assert t.column("input_key").to_pylist()[0] == text_key(first["doc"]["question"].upper() + "!!")


def test_another_filter_and_metric_can_be_asked():
    items, _, files = read([RUN], filter="flexible-extract")
    assert {f["filter"] for f in files if f["task"] == "tidemark_arith_gen"} == {"flexible-extract"}
    items, _, _ = read([RUN], metric="acc_norm")
    mc = items.filter(pc.equal(items.column("task"), "tidemark_arith_mc"))
    want = [x["acc_norm"] for x in lines("__tmp__lmeval-model", "tidemark_arith_mc")]
    got = [s for m, s in zip(mc.column("model").to_pylist(), mc.column("score").to_pylist()) if m == "/tmp/lmeval-model"]
    assert got == want


def test_plain_results_quarantine_what_cannot_be_read(tmp_path):
    f = tmp_path / "my-model.jsonl"
    f.write_text("\n".join([json.dumps({"id": "a", "input": "One two three.", "score": 1}),
                            json.dumps({"id": "b", "input": "Four five.", "score": 0.25}),
                            json.dumps({"id": "c", "input": "no score"}),
                            "not json",
                            json.dumps({"id": "a", "input": "One two three.", "score": 0})]) + "\n")
    items, quarantine, files = read([f])
    assert items.column("item").to_pylist() == ["a", "b"] and items.column("score").to_pylist() == [1.0, 0.25]
    assert sorted(quarantine.column("reason").to_pylist()) == ["bad_json", "duplicate_item", "no_score"]
    assert files[0]["rows_in"] == 5 and set(items.column("model").to_pylist()) == {"my-model"}


def evidence(ids, keys, flags, values=None):
    values = values if values is not None else [float(f) for f in flags]
    return pa.table({"item": ids, "input_key": pa.array(keys, pa.uint64()), "value": values, "flag": flags})


def test_join_by_id_or_by_text_and_the_splits():
    texts = ["Ben has 5 coins.", "Zoe has 5 coins.", "Lia has 3 pens.", "Ann has 2 cups."]
    items = pa.table({"item": ["0", "1", "2", "3"], "input_key": pa.array([text_key(t) for t in texts], pa.uint64())})
    # the evidence job named the same rows q0..q3 and saw their texts with other spacing and case: text join
    ev = evidence(["q0", "q1", "q2"], [text_key(t.lower() + "  ") for t in texts[:3]], [True, False, True])
    found, facts = match_source(items, ev)
    assert facts == {"join": "text", "matched": 3, "unmatched": 1, "matched_by_id": 0, "matched_by_text": 3}
    assert {k: v[1] for k, v in found.items()} == {"0": True, "1": False, "2": True}
    by_id = evidence(["0", "1", "3"], [None, None, None], [False, True, False])
    assert match_source(items, by_id)[1]["join"] == "id"
    answers = evidence(["0", "1", "2", "3"], [None] * 4, [True, True, False, False])
    table, facts = label_items(items, [{"name": "overlap:input", "role": "input", "table": ev},
                                       {"name": "overlap:answer", "role": "answer", "table": answers}])
    assert table.column("split").to_pylist() == ["input_and_answer_leaked", "answer_leaked", "input_leaked",
                                                 "clean"]
    alone, _ = label_items(items, [{"name": "overlap:input", "role": "input", "table": ev}])
    assert alone.column("split").to_pylist() == ["input_leaked", "clean", "input_leaked", "unmatched"]
    assert alone.column("overlap:input:leaked").to_pylist() == [True, False, True, None]
    with pytest.raises(ValueError, match="--join"):
        match_source(items, ev, "fuzzy")
    assert np.isnan(np.array(alone.column("overlap:input").to_pylist(), dtype=float)[3])
