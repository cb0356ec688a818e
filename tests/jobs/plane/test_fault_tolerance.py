"""Evaluate survives what a long job on a cluster meets (local Ray, 2 CPUs, a tiny GPT-2 trained in the fixture):

- a scorer actor that dies mid-job (os._exit on a given row, once) is restarted and its task retried: the output
  equals a clean run's and the accounting holds;
- a row that kills its worker every time is quarantined with the error; every other row is scored as in a clean
  run;
- a job cut off after two parts resumes: it scores only the rest (scorer calls counted from the score log) and
  writes output identical to an uninterrupted run; re-running the finished job is a no-op.
A driver killed from outside (SIGKILL, then a whole new cluster: a head restart) and node loss on a real two-node
cluster are tests/jobs/plane/test_node_loss.py and bench/chaos_bench.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from evaluate_outputs import assert_accounting, assert_same_outputs
from jobs.commands.evaluate import EvaluateConfig, run_evaluate
from jobs.plane.part_loop import ABORT_ENV, InjectedAbort

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.heavy]

SHARD = 4
METHODS = "loss,min_k,lowercase"  # views: original + lowercase, so every row is two scorer sequences


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from jobs.kit.studies import build_known_membership

    root = tmp_path_factory.mktemp("ft-study")
    info = build_known_membership(root, n_per_label=9, buckets=(32,), train_seconds=1.5, seed=1)
    info["ids"] = [json.loads(line)["id"] for line in open(info["benchmark"])]
    assert len(info["ids"]) == 18
    return info


def evaluate(study, out: Path, **kw) -> dict:
    cfg = EvaluateConfig(benchmark=study["benchmark"], model=study["model"], out=str(out), methods=METHODS,
                         shard_size=SHARD, n_bootstrap=20, progress=False, **kw)
    return run_evaluate(cfg)


def score_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def clean(study, ray_session, tmp_path_factory):
    root = tmp_path_factory.mktemp("ft-clean")
    mp = pytest.MonkeyPatch()
    mp.setenv("TIDEMARK_SCORE_LOG", str(root / "score.log"))
    try:
        result = evaluate(study, root / "out")
    finally:
        mp.undo()
    return {"out": root / "out", "result": result, "log": score_log(root / "score.log")}


def test_clean_run_is_split_into_parts_and_accounted(clean, study):
    out = clean["out"]
    run = assert_accounting(out, 18)
    markers = sorted((out / "_parts").glob("*.done.json"))
    assert len(markers) == run["parts"]["parts"] >= 3  # ~4 rows a part, cut by bytes
    infos = [json.loads(m.read_text()) for m in markers]
    assert sum(i["rows_in"] for i in infos) == 18 and all(i["token_rows"] == 2 * i["scored"] for i in infos)
    assert [p.name for p in sorted((out / "token_stats.parquet").glob("*.parquet"))] == [
        m.name.replace(".done.json", ".parquet") for m in markers]
    scored = [i for line in clean["log"] for i in line["ids"]]
    assert sorted(scored) == sorted(study["ids"] * 2)  # each row scored once per view, nothing twice


def test_an_actor_killed_mid_job_is_restarted_and_output_equals_a_clean_run(clean, study, tmp_path, monkeypatch):
    victim = study["ids"][9]  # a row in the middle of the job (shard 2)
    state = tmp_path / "fault"
    monkeypatch.setenv("TIDEMARK_FAULT_EXIT_ON_ID", victim)
    monkeypatch.setenv("TIDEMARK_FAULT_STATE_DIR", str(state))
    result = evaluate(study, tmp_path / "out")
    exits = list(state.glob("exit-*"))
    assert len(exits) == 1 and exits[0].read_text() == victim  # the actor really died, once
    run = assert_accounting(tmp_path / "out", 18)
    assert result["counts"]["quarantined"] == 0 and run["parts"]["pipeline_failures"] == 0  # Ray recovered
    assert_same_outputs(clean["out"], tmp_path / "out")


def test_a_row_that_always_kills_its_worker_is_quarantined(clean, study, tmp_path, monkeypatch):
    poison = study["ids"][5]
    monkeypatch.setenv("TIDEMARK_FAULT_EXIT_ON_ID", poison)
    monkeypatch.setenv("TIDEMARK_FAULT_MAX_EXITS", "1000")
    monkeypatch.setenv("TIDEMARK_FAULT_STATE_DIR", str(tmp_path / "fault"))
    evaluate(study, tmp_path / "out")
    run = assert_accounting(tmp_path / "out", 18)
    assert run["counts"]["quarantined"] == 1 and run["parts"]["rows_worker_failed"] == 1
    q = pq.read_table(tmp_path / "out" / "quarantine.parquet").to_pylist()
    assert [(r["id"], r["stage"], r["reason"]) for r in q] == [(poison, "score", "worker_failed")]
    assert q[0]["detail"].startswith("worker_failed: ") and len(q[0]["detail"]) > len("worker_failed: ")
    assert_same_outputs(clean["out"], tmp_path / "out", skip_ids=frozenset({poison}))


def test_an_interrupted_job_resumes_without_rescoring_finished_parts(clean, study, tmp_path, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setenv(ABORT_ENV, "2")
    monkeypatch.setenv("TIDEMARK_SCORE_LOG", str(tmp_path / "run1.log"))
    with pytest.raises(InjectedAbort):
        evaluate(study, out)
    assert not (out / "_SUCCESS").exists() and not (out / "metrics.json").exists()
    done = {p.name.split(".")[0]: json.loads(p.read_text()) for p in (out / "_parts").glob("*.done.json")}
    assert len(done) == 2  # the driver commits parts: none after the abort
    ts_dir = out / "token_stats.parquet"
    finished_ids = {i for name in done for i in pq.read_table(ts_dir / f"{name}.parquet").column("id").to_pylist()}
    before = {name: (ts_dir / f"{name}.parquet").read_bytes() for name in done}

    monkeypatch.delenv(ABORT_ENV)
    monkeypatch.setenv("TIDEMARK_SCORE_LOG", str(tmp_path / "run2.log"))
    result = evaluate(study, out)
    run2 = score_log(tmp_path / "run2.log")
    rescored = {i for line in run2 for i in line["ids"]}
    assert rescored and not rescored & finished_ids  # finished shards were not scored again
    assert rescored == set(study["ids"]) - finished_ids
    assert result["counts"]["scored"] == 18
    assert json.loads((out / "run.json").read_text())["parts"]["reused"] == len(done)
    for name, data in before.items():  # finished part files untouched
        assert (ts_dir / f"{name}.parquet").read_bytes() == data
    # Forward passes: a scorer call gets one whole part and packs its windows into micro-batches. The resumed run
    # must make exactly the calls the clean run made for the parts it had left: the same rows and views per call
    # and the same number of forward passes (the batch composition depends on the part alone), and no others.
    windows = {}
    for r in pq.read_table(clean["out"] / "token_stats.parquet", columns=["id", "n_windows"]).to_pylist():
        windows[r["id"]] = windows.get(r["id"], 0) + r["n_windows"]
    calls = lambda log: sum(line["forward_calls"] for line in log)  # noqa: E731
    key = lambda line: tuple(sorted(zip(line["ids"], line["views"])))  # noqa: E731
    clean_calls = {key(line): line["forward_calls"] for line in clean["log"]}
    assert 0 < calls(clean["log"]) <= sum(windows.values())  # batching never runs more passes than windows
    assert run2 and all(clean_calls.get(key(line)) == line["forward_calls"] for line in run2)
    left = [k for k in clean_calls if not {i for i, _ in k} & finished_ids]
    assert calls(run2) == sum(clean_calls[k] for k in left) > 0
    assert_same_outputs(clean["out"], out)
    assert_accounting(out, 18)

    # Re-running the finished job is a no-op: nothing scored, outputs untouched.
    monkeypatch.setenv("TIDEMARK_SCORE_LOG", str(tmp_path / "run3.log"))
    stamp = (out / "token_stats.parquet").stat().st_mtime_ns
    again = evaluate(study, out)
    assert again.get("skipped") is True and again["counts"] == result["counts"]
    assert not (tmp_path / "run3.log").exists()
    assert (out / "token_stats.parquet").stat().st_mtime_ns == stamp
