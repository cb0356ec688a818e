"""A genuine multi-node Ray cluster on this machine, and the real `tidemark` CLI run on it while nodes are removed.

`ray.cluster_utils.Cluster` is the harness Ray's own test suite uses: every node it adds is a separate raylet (own
object store, own workers), registered with one head's GCS. The CLI runs as a subprocess with RAY_ADDRESS set to
the head, exactly as a user's job joins a cluster; `remove_node(..., allow_graceful=False)` kills a node's raylet
and workers the way a lost VM or an evicted pod does. Used by tests/jobs/plane/test_node_loss.py (one evaluate
run in `make test`) and bench/chaos_bench.py (every job, in `make bench`).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

TIDEMARK = str(Path(sys.executable).parent / "tidemark")


@dataclass
class TwoNodes:
    """A head and one worker node; `address` is what RAY_ADDRESS gets."""

    cluster: object
    worker: object
    address: str

    def remove_worker(self) -> None:
        self.cluster.remove_node(self.worker, allow_graceful=False)

    def add_worker(self, num_cpus: int) -> None:
        self.worker = self.cluster.add_node(num_cpus=num_cpus)
        self.cluster.wait_for_nodes()


@contextmanager
def two_node_cluster(head_cpus: int = 1, worker_cpus: int = 1) -> Iterator[TwoNodes]:
    """Start the cluster, yield it, and always shut it down (its nodes are this process's children)."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": head_cpus, "include_dashboard": False})
    _forget_recorded_address()
    try:
        worker = cluster.add_node(num_cpus=worker_cpus)
        cluster.wait_for_nodes()
        yield TwoNodes(cluster, worker, cluster.address)
    finally:
        cluster.shutdown()


def _forget_recorded_address() -> None:
    """Cluster() records its head in /tmp/ray/ray_current_cluster, where every `ray.init()` on this machine without
    an address would join it (another test session, another user's job). Our CLI runs get RAY_ADDRESS instead."""
    try:
        from ray._common.utils import reset_ray_address

        reset_ray_address()
    except Exception:  # noqa: BLE001 - a private helper; without it the record stays until shutdown
        pass


def parts_done(out: Path) -> int:
    """Parts committed under OUT/_parts (jobs/plane/part_store.py)."""
    return len(list((Path(out) / "_parts").glob("*.done.json")))


@dataclass
class ChaosRun:
    """What one CLI run on the cluster did: exit code, seconds, when the fault was injected and what it saw."""

    argv: list[str]
    rc: int | None
    seconds: float
    fault: str | None = None
    fault_at_s: float | None = None
    observed_at_fault: dict = field(default_factory=dict)
    stderr_tail: list[str] = field(default_factory=list)

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr_tail if line.startswith("error:")]


def run_cli(argv: Sequence[str], address: str, log: Path, *, fault: Callable[[], None] | None = None,
            fault_name: str | None = None, when: Callable[[], bool] = lambda: False,
            observe: Callable[[], dict] = dict, kill_driver: bool = False,
            timeout_s: float = 600.0, env: dict | None = None) -> ChaosRun:
    """Run `tidemark ARGV` against `address`; the first time `when()` holds, call `fault()` (e.g. remove a node)
    or, with `kill_driver`, SIGKILL the driver (and its process group). `observe()` is recorded at the fault.
    Stderr goes to `log`. A run past `timeout_s` is killed (rc None)."""
    full_env = {**os.environ, "RAY_ADDRESS": address, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1",
                **(env or {})}
    t0 = time.monotonic()
    run = ChaosRun(list(argv), None, 0.0)
    with open(log, "w") as err:
        proc = subprocess.Popen([TIDEMARK, *argv], env=full_env, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
        while proc.poll() is None:
            if run.fault is None and when():
                run.fault_at_s = round(time.monotonic() - t0, 2)
                run.observed_at_fault = observe()
                run.fault = fault_name or ("driver SIGKILL" if kill_driver else "fault")
                if kill_driver:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
                fault()
            if time.monotonic() - t0 > timeout_s:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                run.seconds = round(time.monotonic() - t0, 2)
                run.stderr_tail = _tail(log)
                return run
            time.sleep(0.2)
    run.rc = proc.returncode
    run.seconds = round(time.monotonic() - t0, 2)
    run.stderr_tail = _tail(log)
    return run


def _tail(log: Path, n: int = 40) -> list[str]:
    lines = Path(log).read_text(errors="replace").splitlines()
    return [line[:400] for line in lines if not line.startswith("    [")][-n:]  # raylet log dumps are noise
