"""A real local Ray cluster (`ray start --head --block` on 127.0.0.1, its own temporary dir and free ports, with the
dashboard and job server), a job submitted to it with `ray job submit --working-dir . --runtime-env
infra/runtime_env.yaml -- tidemark evaluate ...` exactly as docs/cluster.md says, and its output checked.

The cluster runs with a planted fake AWS secret in its environment (so the job driver and every worker have it);
afterwards no output file, no Ray log and nothing the CLI printed may contain it.

Teardown never calls `ray stop`: it stops *every* Ray process of the user on the machine, including other test
sessions' runtimes. The cluster is stopped through its own process group (`ray start --block` leads it; SIGTERM
makes it shut its children down), then any process still holding this cluster's temporary dir is killed by pid.
This runs in a `finally`, whether the test passed or not.

Nothing here touches the pytest process's own Ray (the `ray_session` fixture): the cluster is only reached
through subprocesses and HTTP.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# A fake secret made at run time (so this file, which the job's working dir ships, does not contain it).
PLANTED = "planted+FAKE/" + uuid.uuid4().hex

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _cluster_pids(temp: str, leader: int) -> list[int]:
    import psutil

    pids = []
    for proc in psutil.process_iter(["pid", "cmdline", "cwd"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            cwd = proc.info["cwd"] or ""
            if proc.pid != os.getpid() and (temp in cmd or cwd.startswith(temp)):
                pids.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    try:
        pids += [c.pid for c in psutil.Process(leader).children(recursive=True)]
    except psutil.Error:
        pass
    return sorted(set(pids))


def stop_cluster(proc: subprocess.Popen, temp: str) -> None:
    """Stop only this cluster: its process group, then stragglers that hold its temp dir, by pid."""
    import psutil

    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _cluster_pids(temp, proc.pid):
        time.sleep(0.5)
    for pid in _cluster_pids(temp, proc.pid):
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@pytest.fixture
def cluster():
    if not (BIN / "ray").exists():
        pytest.skip("the `ray` CLI is not installed next to this Python")
    pytest.importorskip("aiohttp", reason="ray[default] (dashboard + job server) is needed for `ray job submit`")
    temp = tempfile.mkdtemp(prefix="tmray-", dir="/tmp")  # short: Ray's Unix socket paths must stay < 108 chars
    gcs, dash, agent_http, agent_grpc, metrics, rt_env, client, node_mgr, obj_mgr = free_ports(9)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", RAY_AUTH_MODE="disabled", HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", AWS_SECRET_ACCESS_KEY=PLANTED,
               RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0")  # SIGTERM: shut down now, no 30 s node drain
    cmd = [str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(gcs),
           "--temp-dir", temp, "--num-cpus", "2", "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
           "--dashboard-port", str(dash), "--dashboard-agent-listen-port", str(agent_http),
           "--dashboard-agent-grpc-port", str(agent_grpc), "--metrics-export-port", str(metrics),
           "--runtime-env-agent-port", str(rt_env), "--ray-client-server-port", str(client),
           "--node-manager-port", str(node_mgr), "--object-manager-port", str(obj_mgr), "--disable-usage-stats"]
    log = open(os.path.join(temp, "ray-start.log"), "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        address = f"http://127.0.0.1:{dash}"
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"ray start exited with {proc.returncode}:\n"
                                   + Path(temp, "ray-start.log").read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{address}/api/version", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the dashboard did not come up in 180 s:\n"
                                   + Path(temp, "ray-start.log").read_text()[-3000:])
            time.sleep(1)
        yield {"address": address, "env": env, "temp": temp}
    finally:
        log.close()
        stop_cluster(proc, temp)
        leftover = _cluster_pids(temp, proc.pid)
        shutil.rmtree(temp, ignore_errors=True)
        assert not leftover, f"processes of the test cluster still running: {leftover}"


@pytest.fixture
def tiny(tmp_path):
    from jobs.kit.studies import build_known_membership

    return build_known_membership(tmp_path / "study", n_per_label=5, buckets=(32,), train_seconds=1.0, seed=2)


def ray_cli(args: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "ray"), *args], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_ray_job_submit_runs_evaluate_on_a_real_cluster(cluster, tiny, tmp_path):
    out = tmp_path / "eval"
    job_id = f"tidemark-test-{os.getpid()}-{int(time.time())}"
    submit = ["job", "submit", "--address", cluster["address"], "--submission-id", job_id,
              "--working-dir", ".", "--runtime-env", "infra/runtime_env.yaml", "--",
              "tidemark", "evaluate", "--benchmark", tiny["benchmark"], "--model", tiny["model"], "--out", str(out),
              "--methods", "loss,min_k", "--shard-size", "4", "--quiet"]
    for attempt in range(30):  # the job agent can lag the dashboard by a few seconds after start
        result = ray_cli(submit, cluster["env"], timeout=420)
        if "No available agent" not in result.stdout + result.stderr:
            break
        time.sleep(2)
    printed = result.stdout + result.stderr
    with urllib.request.urlopen(f"{cluster['address']}/api/jobs/{job_id}", timeout=30) as resp:
        info = json.loads(resp.read())
    assert info["status"] == "SUCCEEDED", (info, printed[-5000:])
    assert info["entrypoint"].startswith("tidemark evaluate")
    assert result.returncode == 0, printed[-5000:]
    logs = ray_cli(["job", "logs", "--address", cluster["address"], job_id], cluster["env"], timeout=60)
    assert "| loss |" in logs.stdout and "| min_k" in logs.stdout, logs.stdout[-3000:]  # the report, printed

    # The job's output, written by the driver the cluster ran.
    marker = json.loads((out / "_SUCCESS").read_text())
    counts = marker["counts"]
    assert counts["in"] == 10 == counts["scored"] + counts["quarantined"]
    run = json.loads((out / "run.json").read_text())
    assert run["counts"] == counts and run["parts"]["parts"] >= 2
    assert len(list((out / "_parts").glob("*.done.json"))) == run["parts"]["parts"]
    import pyarrow.parquet as pq

    assert pq.read_table(out / "scores.parquet").num_rows == counts["scored"]

    # The planted secret was in the environment of the driver and every worker: it is in no output and no log.
    assert PLANTED not in printed and PLANTED not in logs.stdout + logs.stderr
    scanned = 0
    for base in (out, Path(cluster["temp"])):
        for path in base.rglob("*"):
            if path.is_file() and not path.is_symlink():
                scanned += 1
                assert PLANTED.encode() not in path.read_bytes(), path
    assert scanned > 20
