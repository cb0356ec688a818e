"""Which Ray a job's driver joins, decided before `ray.init` so that a dead cluster never blocks or hangs a job.

- RAY_ADDRESS set (a head's host:port, or `auto`): that cluster, and it must answer; if its GCS port does not
  accept a connection within a few seconds, the job stops with one line saying so (exit 2), instead of Ray's
  retry loop and traceback.
- RAY_ADDRESS unset: Ray would join the cluster recorded in /tmp/ray/ray_current_cluster, the last `ray start` on
  this machine. A head that died without `ray stop` leaves that record behind, and every later run would fail
  with "Failed to connect to Ray cluster". A recorded cluster that does not answer is ignored, said so on stderr,
  and the job starts its own local runtime.
`ray://` (Ray Client) and other schemes are passed to Ray untouched.
"""
from __future__ import annotations

import os
import socket
import sys

PROBE_TIMEOUT_S = 3.0


def answers(address: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether host:port accepts a TCP connection (the GCS of a live head does)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return True  # not host:port: let Ray interpret it
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def recorded_cluster() -> str | None:
    """The address `ray start` recorded on this machine, if any."""
    try:
        from ray._private.utils import read_ray_address

        return read_ray_address()
    except Exception:  # noqa: BLE001 - a private helper: without it, Ray's own default applies
        return None


def choose_address(environ=None) -> tuple[str | None, str | None]:
    """(address for ray.init, a note for the user or None). Raises RuntimeError for a RAY_ADDRESS that does not
    answer."""
    environ = os.environ if environ is None else environ
    explicit = environ.get("RAY_ADDRESS")
    if explicit:
        if explicit == "auto":
            explicit = recorded_cluster() or explicit
        if "://" not in explicit and explicit != "auto" and not answers(explicit):
            raise RuntimeError(f"RAY_ADDRESS={environ['RAY_ADDRESS']}: no Ray cluster answers at {explicit} "
                               f"(nothing accepted a connection in {PROBE_TIMEOUT_S:g} s); start it, fix the "
                               "address, or unset RAY_ADDRESS to run on a local Ray")
        return environ["RAY_ADDRESS"], None
    recorded = recorded_cluster()
    if recorded and not answers(recorded):
        return "local", (f"ignoring the Ray cluster recorded at {recorded} (it does not answer: a head stopped "
                         "without `ray stop`?); starting a local Ray runtime. Set RAY_ADDRESS to choose a cluster")
    return None, None


def start_driver():
    """What a job's driver calls before its first Ray call: hand freed memory back to the OS (the driver's RSS is
    what it holds, jobs/plane/driver_memory.py), then `ensure_ray()`: RAY_ADDRESS's cluster, or a local one."""
    from jobs.plane.driver_memory import return_freed_memory

    return_freed_memory()
    return ensure_ray()


def ensure_ray(**init_kwargs):
    """`ray.init` once per driver process, on the address `choose_address` picks."""
    import ray

    if ray.is_initialized():
        return ray
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    address, note = choose_address()
    if note:
        print(f"[ray] {note}", file=sys.stderr, flush=True)
    ray.init(address=address, **{"include_dashboard": False, "logging_level": "WARNING", **init_kwargs})
    return ray


def start_runner(runner: str, input_bytes: int | None, *, actors: int, gpus_per_actor: float):
    """Settle `--runner` (jobs/plane/local_plane.choose_runner), say which and why, and start what it needs: Ray
    (`start_driver`) for `ray`; for `local`, only the driver's memory hand-back. Returns (the runner object the job
    hands to its plane, jobs/plane/runners.py; why)."""
    from jobs.kit.log import log
    from jobs.plane.driver_memory import return_freed_memory
    from jobs.plane.local_plane import choose_runner
    from jobs.plane.runners import runner_named
    from jobs.plane.tasks import hooks_from_env

    runner, why = choose_runner(runner, input_bytes, hooks=hooks_from_env(), actors=actors,
                                gpus_per_actor=gpus_per_actor)
    log(f"runner: {runner} ({why})")
    if runner == "ray":
        start_driver()
    else:
        return_freed_memory()
    return runner_named(runner), why
