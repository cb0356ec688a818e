"""One node-loss scenario, shared by the node-loss tests (tests/jobs/plane/test_node_loss*.py): run a `tidemark`
command on a genuine two-node cluster (bench/cluster_harness.py), remove the worker node once `done()` parts are
committed, and hold the job to the contract: the fault hit mid-job, the job did not hang, and it either finished
or failed with one `error:` line, no _SUCCESS, and finished when the same command was run again."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from bench.cluster_harness import ChaosRun, run_cli, two_node_cluster


def run_losing_a_worker(argv: Sequence[str], out: Path, logs: Path, done: Callable[[], int], n_parts: int,
                        timeout_s: float = 400) -> list[ChaosRun]:
    """The runs it took (one, or the failed one and the rerun), each checked as the module docstring says."""
    with two_node_cluster(head_cpus=1, worker_cpus=1) as nodes:
        first = run_cli(argv, nodes.address, logs / "first.log", fault=nodes.remove_worker,
                        fault_name="worker node removed", when=lambda: done() >= 2,
                        observe=lambda: {"parts": done(), "success": (out / "_SUCCESS").exists()},
                        timeout_s=timeout_s)
        assert first.fault == "worker node removed", first.stderr_tail
        assert first.observed_at_fault["parts"] < n_parts and not first.observed_at_fault["success"]  # mid-job
        assert first.rc is not None, f"the job hung after losing a node: {first.stderr_tail}"
        runs = [first]
        if first.rc != 0:  # a clean failure: one line saying why, no _SUCCESS, and the same command resumes
            assert len(first.error_lines()) == 1, first.stderr_tail
            assert not (out / "_SUCCESS").exists()
            runs.append(run_cli(argv, nodes.address, logs / "second.log", timeout_s=timeout_s))
            assert runs[-1].rc == 0, runs[-1].stderr_tail
    return runs
