"""`tidemark impact` end to end on a real lm-evaluation-harness run (tests/fixtures/lm_eval/: two tiny models, a
generation task whose documents 0-9 were in the models' training problems and a multiple-choice task) and a real
`tidemark overlap` of the task's questions against a corpus holding documents 0-9's questions: the splits, the
clean score, the gap and its exact p, the difference-in-differences against the other model, every number
recomputed here from the samples files; unmatched items counted; refusals in one line."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy.stats import hypergeom
from typer.testing import CliRunner

from jobs.cli import app
from jobs.commands.impact import ImpactConfig, run_impact

RUN = Path(__file__).resolve().parents[2] / "fixtures" / "lm_eval" / "run"
TASKS = RUN.parent / "tasks"
A, B = "/tmp/lmeval-model", "/tmp/lmeval-model-more"


def samples(model_dir: str, task: str, filter_: str) -> dict[int, dict]:
    f, = (RUN / model_dir).glob(f"samples_{task}_*.jsonl")
    return {x["doc_id"]: x for x in map(json.loads, f.read_text().splitlines()) if x["filter"] == filter_}


@pytest.fixture(scope="module")
def evidence(tmp_path_factory, ray_session):
    """`tidemark overlap` of the generation task's questions (ids q0..q19: not the harness's doc ids, so the join
    goes by text) against a corpus holding documents 0-9's questions, one per line with other text around."""
    from jobs.commands.overlap import OverlapConfig, run_overlap

    root = tmp_path_factory.mktemp("impact")
    docs = [json.loads(x) for x in (TASKS / "arith_gen.jsonl").read_text().splitlines()]
    bench = root / "bench.jsonl"
    bench.write_text("".join(json.dumps({"id": f"q{k}", "question": d["question"]}) + "\n" for k, d in enumerate(docs)))
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{k}", "text": f"Practice set. {d['question']} Answer: {d['answer']}."})
                              + "\n" for k, d in enumerate(docs[:10])))
    out = root / "overlap"
    run_overlap(OverlapConfig(benchmark=str(bench), benchmark_field="question", corpus=str(corpus), out=str(out),
                              progress=False))
    return {"root": root, "overlap": str(out)}


def run(evidence, out, **kw):
    cfg = ImpactConfig(results=[str(RUN / "__tmp__lmeval-model")], evidence=[evidence["overlap"]], out=str(out),
                       runner="local", progress=False, bootstrap=500, **kw)
    run_impact(cfg)
    return json.loads((out / "report.json").read_text())


def test_splits_clean_score_gap_and_exact_p(evidence, tmp_path):
    report = run(evidence, tmp_path / "out")
    gen = next(r for r in report["tasks"] if r["task"] == "tidemark_arith_gen")
    lines = samples("__tmp__lmeval-model", "tidemark_arith_gen", "strict-match")
    s = np.array([lines[k]["exact_match"] for k in range(20)])
    leaked, clean = s[:10], s[10:]
    assert gen["model"] == A and gen["filter"] == "strict-match" and gen["metric"] == "exact_match"
    assert gen["n"] == 20 and gen["n_leaked"] == 10 and gen["n_clean"] == 10 and gen["n_unmatched"] == 0
    assert gen["full_score"] == pytest.approx(s.mean()) and gen["clean_score"] == pytest.approx(clean.mean())
    assert gen["gap"] == pytest.approx(leaked.mean() - clean.mean())
    k, n_right = int(leaked.sum()), int(s.sum())
    assert gen["p_value"] == pytest.approx(hypergeom.sf(k - 1, 20, n_right, 10))  # exact, one-sided
    assert {x["split"]: x["n"] for x in gen["splits"]} == {"clean": 10, "input_leaked": 10}
    m = report["matching"]["tidemark_arith_gen"][0]
    assert (m["join"], m["matched"], m["matched_by_id"]) == ("text", 20, 0)  # q0.. against doc ids 0..
    # the multiple-choice task's questions are not in the overlap's benchmark: every item unmatched, none dropped
    mc = next(r for r in report["tasks"] if r["task"] == "tidemark_arith_mc")
    assert mc["n_unmatched"] == 10 and mc["clean_score"] is None and mc["gap"] is None
    items = pq.read_table(tmp_path / "out" / "items.parquet").to_pylist()
    assert len(items) == 30 and {r["split"] for r in items if r["task"] == "tidemark_arith_mc"} == {"unmatched"}
    for name in ("report.md", "report.html", "run.json", "_SUCCESS", "task_00.png"):
        assert (tmp_path / "out" / name).is_file(), name


def test_difference_in_differences_against_the_other_model(evidence, tmp_path):
    report = run(evidence, tmp_path / "out", reference_results=[str(RUN / "__tmp__lmeval-model-more")])
    gen = next(r for r in report["tasks"] if r["task"] == "tidemark_arith_gen")
    t = np.array([samples("__tmp__lmeval-model", "tidemark_arith_gen", "strict-match")[k]["exact_match"]
                  for k in range(20)])
    r = np.array([samples("__tmp__lmeval-model-more", "tidemark_arith_gen", "strict-match")[k]["exact_match"]
                  for k in range(20)])
    ref_gap = r[:10].mean() - r[10:].mean()
    assert gen["reference_models"] == [B] and gen["reference_gap"] == pytest.approx(ref_gap)
    assert gen["did"] == pytest.approx((t[:10].mean() - t[10:].mean()) - ref_gap)
    assert gen["did_ci"][0] <= gen["did"] <= gen["did_ci"][1]
    items = pq.read_table(tmp_path / "out" / "items.parquet")
    assert f"ref:{B}" in items.column_names


def test_refusals_in_one_line(evidence, tmp_path):
    runner = CliRunner()
    assert runner.invoke(app, ["impact", "--help"]).exit_code == 0
    for args, why in (
        (["--results", str(RUN), "--out", str(tmp_path / "x")], "nothing to measure"),
        (["--results", str(RUN), "--out", str(tmp_path / "x"), "--method", "constat"], "reference-benchmark"),
        (["--results", str(tmp_path / "missing"), "--evidence", evidence["overlap"], "--out", str(tmp_path / "x")],
         "does not exist"),
        (["--results", str(RUN), "--evidence", str(tmp_path), "--out", str(tmp_path / "x")], "_SUCCESS"),
    ):
        res = runner.invoke(app, ["impact", *args])
        assert res.exit_code == 2, (args, res.output)
        assert why in " ".join(res.output.split()), res.output
