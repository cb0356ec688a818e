"""`tidemark impact` with `overlap --semantic` evidence (issue 57): an overlap OUT written by hand here
(semantic.parquet after scoring/semantic/decide.SEMANTIC_SCHEMA, report.json's `semantic` block, and with the n-gram
pass rows.parquet too), results where the rephrased items score higher: the `rephrased_leaked` split's members, its
gap to clean computed by hand, an item flagged only semantically kept out of clean, the facts of the run, and the
refusals."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curation.io.outputs import Location
from jobs.cli import app
from jobs.commands.impact import ImpactConfig, run_impact
from scoring.semantic.decide import SEMANTIC_SCHEMA

TEXTS = [f"Question {w}: how many apples does {name} have after {k} days?"
         for k, (w, name) in enumerate(zip("abcdefghijkl", ["Ann", "Ben", "Cy", "Di", "Ed", "Flo", "Gus", "Hal",
                                                               "Ivy", "Jo", "Kim", "Lu"]))]
IDS = [f"q{k}" for k in range(12)]
REPHRASED = {"q0", "q1", "q2", "q3"}
# the rephrased items score higher (real-valued scores: the gap's p is a permutation p)
SCORES = [0.9, 0.8, 0.95, 0.7, 0.6, 0.2, 0.4, 0.3, 0.5, 0.1, 0.35, 0.25]
BLOCK = {"n": 12, "flagged": 4, "share": 4 / 12, "share_ci": [0.14, 0.61], "share_ci_method": "wilson",
         "threshold": 0.62, "expected_false_flag_rate": 0.008, "false_flag_upper_bound": 0.021,
         "threshold_source": "null", "embedder": {"name": "minilm", "path": "/models/minilm",
                                                  "weights_digest": "sha256:abc"},
         "verifier": {"rule": "weighted anchor recall"}, "judge": None, "top_k": 5}


def semantic_rows() -> pa.Table:
    rows = []
    for k, rid in enumerate(IDS):
        row = dict.fromkeys(SEMANTIC_SCHEMA.names)
        flagged = rid in REPHRASED
        row.update(id=rid, score=0.8 if flagged else 0.4, doc_id=f"doc{k}", decision_score=0.9 if flagged else 0.1,
                   rephrased=flagged, judge=None)
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=SEMANTIC_SCHEMA)


def overlap_out(root: Path, name: str, verbatim: dict[str, float] | None = None, semantic: bool = True,
                field: str | None = None) -> str:
    """An overlap OUT: semantic.parquet (when `semantic`), rows.parquet when `verbatim` (id -> share) is given."""
    bench = root / "bench.jsonl"
    bench.write_text("".join(json.dumps({"id": i, "input": t}) + "\n" for i, t in zip(IDS, TEXTS)))
    out = root / name
    out.mkdir()
    report = {"job": "overlap", "inputs": {"benchmark": str(bench), "corpus": "corpus/", "mode": "scan"},
              "settings": {"n": 13 if verbatim else 0, "benchmark_field": field}}
    if verbatim is None:
        report["verbatim"] = "not run: --n 0 (no n-gram pass, so no rows.parquet)"
    else:
        pq.write_table(pa.table({"id": list(verbatim), "share": list(verbatim.values())}), out / "rows.parquet")
    if semantic:
        report["semantic"] = BLOCK
        pq.write_table(semantic_rows(), out / "semantic.parquet")
    (out / "report.json").write_text(json.dumps(report))
    Location(str(out)).mark_complete({"job": "overlap"})
    return str(out)


def results(path: Path, ids: list[str], texts: list[str]) -> str:
    path.write_text("".join(json.dumps({"id": i, "input": t, "score": s}) + "\n"
                            for i, t, s in zip(ids, texts, SCORES)))
    return str(path)


def impact(tmp_path: Path, evidence: list[str], ids=IDS, texts=TEXTS) -> tuple[dict, dict, list[dict]]:
    out = tmp_path / "impact"
    run_impact(ImpactConfig(results=[results(tmp_path / "model.jsonl", ids, texts)], evidence=evidence, out=str(out),
                            runner="local", progress=False, bootstrap=200, permutations=999))
    report = json.loads((out / "report.json").read_text())
    rec, = report["tasks"]
    return report, rec, pq.read_table(out / "items.parquet").to_pylist()


def split_of(items: list[dict]) -> dict[str, set]:
    out: dict[str, set] = {}
    for r in items:
        out.setdefault(r["split"], set()).add(r["item"])
    return out


def test_semantic_only_evidence_makes_the_rephrased_split_and_its_gap(tmp_path):
    """--n 0: only semantic.parquet. The results name the items 0..11 in other case and spacing: joined by text."""
    ev = overlap_out(tmp_path, "overlap")
    report, rec, items = impact(tmp_path, [ev], ids=[str(k) for k in range(12)], texts=[t.upper() for t in TEXTS])
    assert split_of(items) == {"rephrased_leaked": {"0", "1", "2", "3"}, "clean": {str(k) for k in range(4, 12)}}
    s = np.array(SCORES)
    gap = s[:4].mean() - s[4:].mean()
    assert rec["n_leaked"] == 4 and rec["n_clean"] == 8 and rec["gap"] == pytest.approx(gap)
    split = {x["split"]: x for x in rec["splits"]}
    assert split["rephrased_leaked"]["n"] == 4 and split["rephrased_leaked"]["score"] == pytest.approx(s[:4].mean())
    assert split["rephrased_leaked"]["gap"] == pytest.approx(gap) and split["rephrased_leaked"]["p_value"] < 0.05
    assert rec["clean_score"] == pytest.approx(s[4:].mean())
    m, = report["matching"]["model"]
    assert (m["source"], m["role"], m["join"], m["matched"]) == ("overlap:rephrased", "rephrased", "text", 12)
    ev_facts, = report["evidence"]
    assert ev_facts["semantic"] is True and ev_facts["embedder"] == "minilm" and ev_facts["threshold"] == 0.62
    assert ev_facts["expected_false_flag_rate"] == 0.008 and ev_facts["role"] == "rephrased"
    md = " ".join((tmp_path / "impact" / "report.md").read_text().split())
    assert "question found rephrased, not verbatim | 4 |" in md
    assert "the 4 items whose question was found rephrased score" in md
    assert "rephrased in the corpus: decision score >= 0.62" in md
    assert "question found rephrased" in (tmp_path / "impact" / "report.html").read_text()


def test_with_the_ngram_pass_an_item_flagged_only_semantically_is_not_clean(tmp_path):
    """rows.parquet flags q0 (also rephrased) and q4 (verbatim only); q11 is too short for an n-gram (NaN share):
    the verbatim split names q0, the rephrased split holds q1-q3, and clean is what neither pass flagged."""
    shares = {i: 0.0 for i in IDS} | {"q0": 0.5, "q4": 0.3, "q11": float("nan")}
    ev = overlap_out(tmp_path, "overlap", verbatim=shares)
    report, rec, items = impact(tmp_path, [ev])
    got = split_of(items)
    assert got == {"input_leaked": {"q0", "q4"}, "rephrased_leaked": {"q1", "q2", "q3"},
                   "clean": {f"q{k}" for k in range(5, 12)}}
    assert not got["clean"] & REPHRASED
    s = dict(zip(IDS, SCORES))
    clean = np.mean([s[i] for i in got["clean"]])
    split = {x["split"]: x for x in rec["splits"]}
    assert split["rephrased_leaked"]["gap"] == pytest.approx(np.mean([s["q1"], s["q2"], s["q3"]]) - clean)
    assert split["input_leaked"]["gap"] == pytest.approx(np.mean([s["q0"], s["q4"]]) - clean)
    assert rec["gap"] == pytest.approx(np.mean([s[f"q{k}"] for k in range(5)]) - clean)
    assert [e["name"] for e in report["evidence"]] == ["overlap:input", "overlap:rephrased"]
    by_item = {r["item"]: r for r in items}
    assert by_item["q0"]["overlap:rephrased:leaked"] is True and by_item["q0"]["overlap:input:leaked"] is True
    assert by_item["q11"]["overlap:input:leaked"] is None and by_item["q11"]["overlap:rephrased:leaked"] is False
    md = " ".join((tmp_path / "impact" / "report.md").read_text().split())
    assert "question found rephrased, not verbatim minus clean" in md  # each leaked split's own gap, two of them
    assert "question leaked (answer not checked) |" in md


def test_refusals_in_one_line(tmp_path):
    runner = CliRunner()
    res_file = results(tmp_path / "model.jsonl", IDS, TEXTS)
    empty = overlap_out(tmp_path, "neither", semantic=False)  # --n 0 without semantic.parquet: nothing to read
    answers = overlap_out(tmp_path, "answers", field="answer")  # --semantic over the answers
    for ev, why in ((empty, "an overlap output with neither rows.parquet nor semantic.parquet"),
                    (answers, "a rephrased answer is not read as evidence")):
        res = runner.invoke(app, ["impact", "--results", res_file, "--evidence", ev, "--out", str(tmp_path / "x"),
                                  "--runner", "local", "--quiet"])
        said = " ".join(res.output.replace("│", " ").split())  # typer draws the error in a wrapped box
        assert res.exit_code == 2 and why in said and "Traceback" not in res.output, res.output
    assert not (tmp_path / "x").exists()  # refused before anything is written
