"""A real llama-cpp-python server's answers, recorded (tests/fixtures/llama_cpp/record.py: the server's version,
command line and GGUF digest are in recording.json) and replayed by the loopback server, so that `make test`
covers what an unmodified llama-cpp-python server does without running one: it refuses token-id prompts with
HTTP 500, its echo pairs each token with the next position's distribution, and it takes max_tokens 0 as "no
limit". Tidemark must send text, refuse echo in one line that points to logit-bias, and score over logit-bias.
The live run against a real server is tests/scoring/api/test_llama_cpp_live.py (make test-slow). No Ray."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scoring.api.client import ApiConfig
from scoring.api.echo import parse_echo
from scoring.api.loopback import LoopbackServer
from scoring.api.probe import probe
from scoring.api.scorer import ApiScorer
from scoring.api.selfcheck import SelfCheckFailed

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "llama_cpp"


@pytest.fixture(scope="module")
def real():
    from scoring.lm.model import load_tokenizer

    rec = json.loads((FIXTURE / "recording.json").read_text())
    server = LoopbackServer(None, replay=str(FIXTURE / "recording.json")).start()
    cfg = ApiConfig(base=server.url, model=rec["model"], concurrency=1, max_retries=0, timeout_s=30)
    yield {"rec": rec, "tok": load_tokenizer(str(FIXTURE / "tokenizer")), "cfg": cfg, "server": server}
    server.stop()


def test_the_recording_says_which_server_made_it(real):
    rec = real["rec"]
    assert rec["server"].startswith("llama-cpp-python ") and "--logits_all true" in rec["command"]
    assert rec["gguf"].endswith(".gguf") and len(rec["gguf_sha256"]) == 64 and rec["exchanges"]


def test_token_id_prompts_are_refused_and_the_probe_sends_text(real):
    probed, report = probe(real["cfg"].with_(mode="logit-bias"), real["tok"])
    refused = report["prompt"]["token_ids_refused"]
    assert refused.startswith("the server refused the request: HTTP 500: ") and "Input should be a valid string" in refused
    assert "did not answer" not in refused and "\n" not in refused
    assert probed.prompt_format == "text" and probed.prefix_tokens == 0
    assert probed.method == "direct"  # llama-cpp-python reports the chosen token's unbiased log-probability
    check = report["self_check"]
    assert check["passed"] and 1 in check["positions"] and check["max_abs_difference"] <= check["tolerance_nats"]


def test_the_real_servers_shifted_echo_is_refused_before_anything_is_scored(real):
    with pytest.raises(SelfCheckFailed) as err:
        probe(real["cfg"], real["tok"])
    msg = str(err.value)
    assert msg.startswith("--api-logprobs echo is refused by the self-check: at probe position ")
    assert "shifted by one" in msg and "--api-logprobs logit-bias passed the same check on this server" in msg
    # max_tokens 0 was asked once, with stop strings, and the answer showed a generated token: not trusted
    zero = [x for x in real["rec"]["exchanges"] if x["request"].get("max_tokens") == 0]
    assert len(zero) == 1 and zero[0]["response"]["usage"]["completion_tokens"] >= 1


def test_rows_score_over_logit_bias_and_echo_would_have_written_wrong_numbers(real):
    probed, _ = probe(real["cfg"].with_(mode="logit-bias"), real["tok"])
    rec, tok = real["rec"], real["tok"]
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in rec["rows"]]
    scorer = ApiScorer(probed, tok, context=64)
    try:
        got = scorer.score(ids)
    finally:
        scorer.close()
    for g, want in zip(got, rec["said"]["logit_bias_rows"]):
        assert g["error"] is None
        np.testing.assert_array_equal(g["lp"], np.asarray(want["lp"], np.float32))
    # the same rows' echo answers, as the server gave them: far from the true log-probabilities
    echoes = [x["response"] for x in rec["exchanges"] if x["request"].get("echo") and x["request"]["prompt"] in
              rec["rows"]]
    assert len(echoes) == len(ids)
    deltas = np.concatenate([parse_echo(e, len(i), 1, probed.top_logprobs)["lp"] - g["lp"]
                             for e, i, g in zip(echoes, ids, got)])
    assert np.mean(np.abs(deltas)) > 1.0  # nats: what an unchecked echo run would have published
