"""A real llama-cpp-python server's answers to a text-only audit, recorded (tests/fixtures/llama_cpp/
record_text_only.py: the server's version, the GGUF's sha256, every exchange) and replayed by the loopback server:
what an unmodified llama-cpp-python 0.3.36 honours (n ignored, seed reproducible, top_p, stop, log-probabilities of
generated tokens on both endpoints), and that the pool stage asks exactly the recorded requests and scores their
answers as they were scored against the live server. No Ray. The live run is test_llama_cpp_live.py (make
test-slow)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from scoring.api.client import ApiConfig, CompletionsClient
from scoring.api.loopback import LoopbackServer
from scoring.generation.probe import probe_generation

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "llama_cpp"
RECORDING = FIXTURE / "recording_text_only.json"
sys.path.insert(0, str(FIXTURE))

from record_text_only import part_of, run_endpoint  # noqa: E402


@pytest.fixture(scope="module")
def recording():
    return json.loads(RECORDING.read_text())


def test_the_recording_is_from_the_real_server(recording):
    assert recording["server"] == "llama-cpp-python 0.3.36" and recording["gguf"].startswith("SmolLM2-135M-Instruct")
    assert len(recording["exchanges"]) > 40


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_what_llama_cpp_python_honours(recording, endpoint):
    chat = endpoint == "chat"
    with LoopbackServer("", replay=str(RECORDING)) as srv:
        api = ApiConfig(base=srv.url, model="smollm2", mode="none", max_retries=0)
        probe = probe_generation(CompletionsClient(api, endpoint="chat/completions" if chat else "completions"), chat)
    assert probe == recording["said"][endpoint]["probe"]
    # llama-cpp-python answers one choice whatever n asks: every sample is its own seeded request
    assert probe["n"] is False and probe["seed_reproducible"] and probe["top_p"] and probe["generated_logprobs"]


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_the_part_asks_the_recorded_requests_and_scores_them_as_live(recording, endpoint, tmp_path):
    with LoopbackServer("", replay=str(RECORDING)) as srv:
        got = run_endpoint(srv.url, endpoint == "chat", part_of(recording["rows"], tmp_path), tmp_path / "out")
        assert srv.statuses.get(500, 0) == 0  # every request was one the live server was asked
    live = recording["said"][endpoint]
    assert got["summary"] == live["summary"]
    for a, b in zip(got["scores"], live["scores"]):
        assert a.keys() == b.keys() and a["id"] == b["id"]
        for k, v in a.items():
            if isinstance(v, float):
                assert (math.isnan(v) and math.isnan(b[k])) or v == b[k], (a["id"], k)
    gens = pq.read_table(tmp_path / "out" / "generations.parquet").to_pylist()
    assert {g["endpoint"] for g in gens if g["sample"] >= 0} == {endpoint if endpoint == "chat" else "completions"}
