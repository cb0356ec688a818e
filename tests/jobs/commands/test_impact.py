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


def plain(path: Path, scores: dict[str, float], evidence) -> str:
    """A plain results file (`id`, `input`, `score`) over the overlap's benchmark items q0..q19."""
    bench = {x["id"]: x["question"] for x in map(json.loads, (evidence["root"] / "bench.jsonl").read_text().splitlines())}
    path.write_text("".join(json.dumps({"id": i, "input": bench[i], "score": s}) + "\n" for i, s in scores.items()))
    return str(path)


TARGET = {f"q{k}": float(k in (0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12)) for k in range(20)}  # leaked 8/10, clean 3/10
REFERENCE = {f"q{k}": float(k in (0, 1, 2, 3, 4, 10, 11, 12, 13)) for k in range(20)}  # leaked 5/10, clean 4/10


def plain_run(evidence, out, target: dict, reference: dict, **kw) -> dict:
    cfg = ImpactConfig(results=[plain(out.parent / "target.jsonl", target, evidence)], evidence=[evidence["overlap"]],
                       reference_results=[plain(out.parent / "ref.jsonl", reference, evidence)], out=str(out),
                       runner="local", progress=False, bootstrap=500, **kw)
    run_impact(cfg)
    return json.loads((out / "report.json").read_text())


def test_a_plain_reference_file_pairs_with_a_plain_target_of_another_name(evidence, tmp_path):
    """Issue 56: each file's task is its stem (`target`, `ref`); one task on each side pairs them."""
    rec, = plain_run(evidence, tmp_path / "out", TARGET, REFERENCE)["tasks"]
    assert (rec["task"], rec["model"], rec["reference_models"], rec["reference_task"]) == ("target", "target", ["ref"],
                                                                                         "ref")
    assert rec["n_leaked"] == 10 and rec["n_clean"] == 10
    assert rec["gap"] == pytest.approx(0.8 - 0.3) and rec["reference_gap"] == pytest.approx(0.5 - 0.4)
    assert rec["did"] == pytest.approx(0.5 - 0.1) and rec["did_reason"] is None and rec["did_n_dropped"] == 0
    assert rec["did_ci"][0] <= rec["did"] <= rec["did_ci"][1]
    assert "difference-in-differences" in (tmp_path / "out" / "report.md").read_text()


def test_items_the_reference_lacks_are_counted_and_reported(evidence, tmp_path):
    partial = {i: s for i, s in REFERENCE.items() if i not in ("q0", "q1", "q15")}  # two leaked, one clean missing
    rec, = plain_run(evidence, tmp_path / "out", TARGET, partial)["tasks"]
    assert rec["did_n_dropped"] == 3 and rec["reference_missing"] == {"ref": 3}
    keep = [f"q{k}" for k in range(20) if k not in (0, 1, 15)]
    t, r = np.array([TARGET[i] for i in keep]), np.array([REFERENCE[i] for i in keep])
    leaked = np.array([int(i[1:]) < 10 for i in keep])
    want = (t[leaked].mean() - t[~leaked].mean()) - (r[leaked].mean() - r[~leaked].mean())
    assert rec["did"] == pytest.approx(want)
    md = " ".join((tmp_path / "out" / "report.md").read_text().split())
    assert "3 items without a score from the target and every reference model are left out" in md
    assert "gap of ref (3 items missing)" in md


def test_a_reference_that_shares_no_task_or_no_item_is_refused_in_one_line(evidence, tmp_path):
    runner = CliRunner()
    target = plain(tmp_path / "target.jsonl", TARGET, evidence)
    other = tmp_path / "other.jsonl"  # another task's items (other ids), one task: pairs by the one-task rule
    other.write_text("".join(json.dumps({"id": f"x{k}", "input": f"another question {k}", "score": 1.0}) + "\n"
                             for k in range(5)))
    two = tmp_path / "two"  # the target as two tasks; a reference for a third task pairs with neither
    two.mkdir()
    for name in ("gen", "mc"):
        (two / f"{name}.jsonl").write_text((tmp_path / "target.jsonl").read_text())
    for results, ref, why in (
        (target, str(other), "--reference-results hold none of the items of --results (tasks paired: target -> other"),
        (str(two), str(other), "--reference-results share no task with --results (results: ['gen', 'mc']; "
                               "reference results: ['other'])"),
    ):
        res = runner.invoke(app, ["impact", "--results", results, "--evidence", evidence["overlap"],
                                  "--reference-results", ref, "--out", str(tmp_path / "x"), "--runner", "local"])
        assert res.exit_code == 2, res.output
        errors = [line for line in res.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and why in errors[0] and "Traceback" not in res.output, res.output
    # --task-map pairs what the names do not
    rec = [r for r in plain_run(evidence, tmp_path / "mapped", TARGET, REFERENCE, task_map=["target=ref"])["tasks"]]
    assert rec[0]["reference_task"] == "ref" and rec[0]["did"] is not None


def test_a_task_the_reference_lacks_gets_a_reason_naming_it(evidence, tmp_path):
    two = tmp_path / "two"
    two.mkdir()
    plain(two / "gen.jsonl", TARGET, evidence)
    plain(two / "mc.jsonl", TARGET, evidence)
    ref = tmp_path / "gen.jsonl"
    plain(ref, REFERENCE, evidence)
    cfg = ImpactConfig(results=[str(two)], evidence=[evidence["overlap"]], reference_results=[str(ref)],
                       out=str(tmp_path / "out"), runner="local", progress=False, bootstrap=200)
    run_impact(cfg)
    recs = {r["task"]: r for r in json.loads((tmp_path / "out" / "report.json").read_text())["tasks"]}
    assert recs["gen"]["did"] is not None and recs["gen"]["reference_task"] == "gen"
    assert recs["mc"]["did"] is None and recs["mc"]["reference_task"] is None
    assert recs["mc"]["did_reason"].startswith("the reference results hold no task paired with 'mc'")
    assert "no difference-in-differences: the reference results hold no task paired with 'mc'" in \
        " ".join((tmp_path / "out" / "report.md").read_text().split())
