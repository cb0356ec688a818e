"""The plane without Ray (`evaluate --runner local`, jobs/plane/local_plane.py): which runner `auto` picks and why,
and, on a tiny GPT-2 trained in the fixture, that the local runner writes what the Ray pool writes (token stats,
scores, quarantine and metrics equal bit for bit), resumes a job the other runner began, isolates a row that
raises and quarantines it with the error, and runs where Ray cannot be imported at all (a GPU machine)."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from evaluate_outputs import assert_accounting, assert_same_outputs
from jobs.plane.local_plane import LOCAL_MAX_BYTES, choose_runner, local_input_bytes

METHODS = "loss,min_k,zlib,lowercase"
SHARD = 5


def test_auto_is_local_only_when_nothing_asks_for_ray():
    base = {"hooks": {}, "actors": 0, "gpus_per_actor": 0.0, "environ": {}, "ray_running": False}
    assert choose_runner("auto", 1_000, **base)[0] == "local"
    assert choose_runner("auto", LOCAL_MAX_BYTES, **base)[0] == "local"
    for why, kw in (("over 8 MiB", {"input_bytes": LOCAL_MAX_BYTES + 1}),
                    ("not a local file", {"input_bytes": None}),
                    ("RAY_ADDRESS", {"environ": {"RAY_ADDRESS": "10.0.0.1:6379"}}),
                    ("fault injection", {"hooks": {"exit_on_id": "x", "state_dir": "/tmp"}}),
                    ("asks for a pool", {"actors": 4}),
                    ("more than one GPU", {"gpus_per_actor": 2.0}),
                    ("already running", {"ray_running": True})):
        args = {**base, "input_bytes": 1_000, **kw}
        runner, reason = choose_runner("auto", args.pop("input_bytes"), **args)
        assert runner == "ray" and why in reason, (why, reason)
    # the score log is an audit trail, not a fault: it works in one process too
    assert choose_runner("auto", 1_000, **{**base, "hooks": {"score_log": "/tmp/x"}})[0] == "local"
    # an explicit runner is taken as it is
    assert choose_runner("local", None, **{**base, "environ": {"RAY_ADDRESS": "auto"}}) == ("local", "--runner local")
    assert choose_runner("ray", 10, **base)[0] == "ray"
    with pytest.raises(ValueError, match="--runner must be one of"):
        choose_runner("threads", 10, **base)


def test_runners_are_objects_a_job_hands_down(tmp_path):
    from jobs.kit.runtime import start_runner
    from jobs.plane.runners import LOCAL, RAY, runner_named

    assert runner_named("local") is LOCAL and runner_named("ray") is RAY
    with pytest.raises(ValueError, match="no runner named"):
        runner_named("auto")  # settled before it becomes a runner
    runner, why = start_runner("local", 10, actors=0, gpus_per_actor=0.0)
    assert runner is LOCAL and why == "--runner local"
    # the local runner's map and part loop run here, in order, with no Ray
    assert list(LOCAL.map(lambda shared, x: shared["k"] * x, [{"x": 1}, {"x": 2}], {"k": 3}, desc="t",
                          progress=False)) == [3, 6]
    assert list(LOCAL.replanning(lambda work: (w * 2 for w in work), [1, 2], lambda w: False, {}, print)) == [2, 4]
    f = tmp_path / "b.jsonl"
    f.write_text('{"input": "a", "label": 1}\n')
    assert local_input_bytes(str(f)) == f.stat().st_size
    assert local_input_bytes("s3://bucket/b.jsonl") is None
    assert local_input_bytes(str(tmp_path / "missing.jsonl")) is None


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from jobs.kit.studies import build_known_membership

    root = tmp_path_factory.mktemp("local-plane")
    info = build_known_membership(root, n_per_label=8, buckets=(32,), train_seconds=1.0, seed=2)
    info["ids"] = [json.loads(line)["id"] for line in open(info["benchmark"])]
    return info


def evaluate(study, out: Path, runner: str, **kw) -> dict:
    from jobs.commands.evaluate import EvaluateConfig, run_evaluate

    cfg = EvaluateConfig(benchmark=study["benchmark"], model=study["model"], out=str(out), methods=METHODS,
                         shard_size=SHARD, n_bootstrap=50, progress=False, runner=runner, **kw)
    return run_evaluate(cfg)


@pytest.fixture(scope="module")
def on_ray(study, ray_session, tmp_path_factory):
    out = tmp_path_factory.mktemp("on-ray") / "out"
    evaluate(study, out, "ray")
    return out


@pytest.fixture(scope="module")
def on_local(study, tmp_path_factory):
    out = tmp_path_factory.mktemp("on-local") / "out"
    evaluate(study, out, "local")
    return out


@pytest.mark.ray
def test_local_runner_writes_what_the_ray_pool_writes(study, on_ray, on_local):
    assert_same_outputs(on_ray, on_local)
    for d in ("token_stats.parquet", "scores.parquet", "quarantine.parquet"):  # part by part, the same files
        parts = sorted(p.name for p in (on_ray / d).iterdir())
        assert parts == sorted(p.name for p in (on_local / d).iterdir()) and len(parts) > 1
        for name in parts:
            assert pq.read_table(on_ray / d / name).equals(pq.read_table(on_local / d / name)), (d, name)
    assert json.loads((on_ray / "metrics.json").read_text()) == json.loads((on_local / "metrics.json").read_text())
    run = assert_accounting(on_local, len(study["ids"]))
    assert run["runner"] == {"used": "local", "why": "--runner local"}
    assert json.loads((on_ray / "run.json").read_text())["runner"]["used"] == "ray"
    assert run["fingerprint"] == json.loads((on_ray / "run.json").read_text())["fingerprint"]


@pytest.mark.ray
def test_a_job_cut_off_on_one_runner_resumes_on_the_other(study, on_ray, tmp_path, monkeypatch):
    from jobs.plane.part_loop import ABORT_ENV, InjectedAbort

    out = tmp_path / "out"
    monkeypatch.setenv(ABORT_ENV, "1")
    with pytest.raises(InjectedAbort):
        evaluate(study, out, "local")
    monkeypatch.delenv(ABORT_ENV)
    evaluate(study, out, "ray")
    run = json.loads((out / "run.json").read_text())
    assert run["parts"]["reused"] == 1 and run["parts"]["scored"] == run["parts"]["parts"] - 1
    assert_same_outputs(on_ray, out)


def test_a_row_that_raises_is_isolated_and_quarantined_locally(study, on_local, tmp_path, monkeypatch):
    from jobs.plane.tasks import ScoreTask

    bad = study["ids"][7]
    real = ScoreTask.__call__

    def failing(self, batch):
        if bad in batch.column("id").to_pylist():
            raise RuntimeError("tensor of doom")
        return real(self, batch)

    monkeypatch.setattr(ScoreTask, "__call__", failing)
    evaluate(study, tmp_path / "out", "local")
    run = assert_accounting(tmp_path / "out", len(study["ids"]))
    assert run["counts"]["quarantined"] == 1 and run["parts"]["pipeline_failures"] == 1
    q = pq.read_table(tmp_path / "out" / "quarantine.parquet").to_pylist()
    assert [(r["id"], r["stage"]) for r in q] == [(bad, "score")]
    assert "tensor of doom" in q[0]["detail"]
    assert_same_outputs(on_local, tmp_path / "out", skip_ids=frozenset([bad]))


def test_evaluate_runs_where_ray_cannot_be_imported(study, on_local, tmp_path, run_without_ray):
    out = tmp_path / "out"
    done = run_without_ray(f"""
        from jobs.commands.evaluate import EvaluateConfig, run_evaluate
        run_evaluate(EvaluateConfig(benchmark={study['benchmark']!r}, model={study['model']!r}, out={str(out)!r},
                                    methods={METHODS!r}, shard_size={SHARD}, n_bootstrap=50, progress=False))
        import sys
        assert "ray" not in sys.modules
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "runner: local (auto:" in done.stderr
    assert_same_outputs(on_local, out)
