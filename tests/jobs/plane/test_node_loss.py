"""`tidemark evaluate` on a genuine two-node Ray cluster (ray.cluster_utils.Cluster: a head and a worker node,
each its own raylet, 1 CPU each) loses the worker node mid-job.

Two scorer actors of 0.75 CPU cannot share a 1-CPU node, so while both run one of them is on the worker node, and
removing it kills that actor (and whatever CPU-stage actors ran there). The job must then either finish on the
head, or exit non-zero with a one-line error and finish when the same command is run again; either way its
token stats and scores equal an uninterrupted run's bit for bit, and its counts reconcile. The uninterrupted run
is the same evaluation on the test session's local Ray (same parts, same actors, same torch threads).
The rest of the chaos scenarios (audit, build-benchmark, a killed driver, a cluster with no capacity left) are
in bench/chaos_bench.py (`make bench`).
"""
from __future__ import annotations

import json

import pytest

from bench.cluster_harness import parts_done
from evaluate_outputs import assert_accounting, assert_same_outputs
from node_loss_runs import run_losing_a_worker

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.heavy]

METHODS = "loss,min_k,zlib"
SHARD = 2


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from jobs.kit.studies import build_known_membership

    info = build_known_membership(tmp_path_factory.mktemp("nl-study"), n_per_label=12, buckets=(32,),
                                  train_seconds=1.5, seed=3)
    info["n"] = sum(1 for _ in open(info["benchmark"]))
    return info


def test_evaluate_survives_losing_a_worker_node(study, ray_session, tmp_path):
    from jobs.commands.evaluate import EvaluateConfig, run_evaluate

    clean = tmp_path / "clean"
    run_evaluate(EvaluateConfig(benchmark=study["benchmark"], model=study["model"], out=str(clean), methods=METHODS,
                                actors=2, shard_size=SHARD, n_bootstrap=20, progress=False))
    n_parts = parts_done(clean)
    assert n_parts >= 6

    out = tmp_path / "out"
    argv = ["evaluate", "--benchmark", study["benchmark"], "--model", study["model"], "--out", str(out),
            "--methods", METHODS, "--actors", "2", "--shard-size", str(SHARD), "--quiet", "--stall-timeout", "120"]
    runs = run_losing_a_worker(argv, out, tmp_path, lambda: parts_done(out), n_parts)
    assert_same_outputs(clean, out)
    run = assert_accounting(out, study["n"])
    stats = run["parts"]
    assert stats["parts"] == n_parts
    print(json.dumps({"runs": [{"rc": r.rc, "seconds": r.seconds, "fault_at_s": r.fault_at_s} for r in runs],
                      "parts": stats}))
