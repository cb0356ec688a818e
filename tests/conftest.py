"""Shared fixtures. One Ray runtime for the whole session (ray.init takes seconds and ~2 GB); unit tests of
stages never touch it."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SHARED_DATA = SHARED / "data"


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray runtime with 2 CPUs, shared by every test that asks for it, shut down at the end."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data, which a user's clone does not have: tests that need it skip with the reason."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (only present in the development workspace)")
    return SHARED_DATA


@pytest.fixture
def moto_s3(monkeypatch):
    """`moto_s3(bucket, key_id=..., secret=...)`: an in-memory S3 (moto) with one bucket, the given credentials in
    the environment and every other AWS setting cleared, so nothing can reach a real endpoint. Returns a boto3
    client; the mock ends with the test."""
    moto = pytest.importorskip("moto")
    import boto3

    with contextlib.ExitStack() as stack:
        def start(bucket: str, key_id: str = "testing", secret: str = "testing"):
            monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
            monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
            monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
            for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
                monkeypatch.delenv(var, raising=False)
            stack.enter_context(moto.mock_aws())
            client = boto3.client("s3", region_name="us-east-1")
            client.create_bucket(Bucket=bucket)
            return client

        yield start


@pytest.fixture
def moto_server(monkeypatch):
    """`moto_server(bucket, key_id=..., secret=...)`: a moto S3 *server* on 127.0.0.1 (a free port), with boto3
    pointed at it through AWS_ENDPOINT_URL and the given credentials in the environment. Unlike `moto_s3` (which
    mocks boto3 inside this process only), other processes that get this environment, a `tidemark` subprocess and
    the Ray workers it starts, reach the same buckets. Returns a boto3 client; the server stops with the test.
    Every request the server answers is recorded in `moto_server.requests` as (method, path?query, its
    x-amz-request-payer header), which is how a test sees what a subprocess or a worker sent."""
    pytest.importorskip("flask", reason="moto's server mode needs moto[server]")
    import socket

    import boto3
    from moto.server import ThreadedMotoServer

    servers, requests = [], []

    class RecordingMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:  # moto's own, with its WSGI app wrapped in a recorder
            from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, \
                create_backend_app
            from werkzeug.serving import make_server

            app = DomainDispatcherApplication(create_backend_app)

            def recorded(environ, start_response):
                path, query = environ.get("PATH_INFO", ""), environ.get("QUERY_STRING")
                requests.append((environ["REQUEST_METHOD"], path + (f"?{query}" if query else ""),
                                 environ.get("HTTP_X_AMZ_REQUEST_PAYER")))
                return app(environ, start_response)

            self._server = make_server(self._ip_address, self._port, recorded, True, request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    def start(bucket: str, key_id: str = "testing", secret: str = "testing"):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = RecordingMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        servers.append(server)
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
            monkeypatch.delenv(var, raising=False)
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=bucket)
        return client

    start.requests = requests
    yield start
    for server in servers:
        server.stop()


RAY_BLOCKER = textwrap.dedent("""
    import sys

    class BlockRay:
        def find_spec(self, name, path=None, target=None):
            if name == "ray" or name.startswith("ray."):
                raise ImportError("ray is blocked in this test")
            return None

    sys.meta_path.insert(0, BlockRay())
    sys.path.insert(0, {root!r})
""")


@pytest.fixture
def run_without_ray():
    """`run_without_ray(script, timeout)`: run `script` in a fresh Python at the repository root with every
    import of `ray` failing, as on a GPU machine that has no Ray. Returns the CompletedProcess."""
    def run(script: str, timeout: int = 300) -> subprocess.CompletedProcess:
        code = RAY_BLOCKER.format(root=str(ROOT)) + textwrap.dedent(script)
        return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout)

    return run


def built_once(tmp_path_factory, name: str, build) -> Path:
    """`build(dir)` once per test run, also when pytest-xdist's workers each run a share of the tests (`make test`
    runs two): the workers' temporary folders share a parent, the first to arrive builds under a file lock and the
    others wait and reuse what it built. Returns the folder."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    target = root / name
    with FileLock(str(root / f"{name}.lock")):
        if not (target / ".built").is_file():
            target.mkdir(parents=True, exist_ok=True)
            build(target)
            (target / ".built").touch()
    return target


@pytest.fixture(scope="session")
def generation_lm(tmp_path_factory):
    """A tiny GPT-2 and a 24-row benchmark of real 48-word passages (12 members seen 20 times in training, 12 held
    out), for the text-only tests: sampling, the journal, the budget, the reports. 150 fixed steps on 128-token
    blocks (~25 s; member loss ~1) with 512 positions, so name cloze's and DE-COP's prompts fit."""
    import json

    from jobs.kit.studies import train_tiny_gpt2
    from scoring.studies.known_membership import sotu_passages

    pool = sotu_passages(48, 24, seed=3)
    members, held_out = pool[:12], pool[12:]

    def build(root: Path) -> None:
        train_tiny_gpt2([p["text"] for p in members] * 20, root / "model", tokenizer_texts=[p["text"] for p in pool],
                        steps=150, seed=0, vocab_size=1000, context=128, positions=512)
        with open(root / "bench.jsonl", "w") as fh:
            for label, group in ((1, members), (0, held_out)):
                for p in group:
                    fh.write(json.dumps({"id": p["id"], "input": p["text"], "label": label}) + "\n")

    root = built_once(tmp_path_factory, "generation", build)
    bench = root / "bench.jsonl"
    return {"model": str(root / "model"), "bench": str(bench), "members": members, "held_out": held_out}


def pytest_collection_modifyitems(config, items):
    """The end-to-end files (tests/jobs/commands: each trains a model and runs whole jobs) first: `make test`'s two
    xdist processes take a file at a time in this order, so the long files start early and the short ones fill
    the end, instead of one process finishing a long file alone. The order within a file is kept."""
    first = ROOT / "tests" / "jobs" / "commands"
    items.sort(key=lambda item: 0 if Path(str(item.path)).is_relative_to(first) else 1)
