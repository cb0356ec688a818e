"""Black-box scoring (scoring/api) against a stdlib server on 127.0.0.1 serving a tiny GPT-2 built here: every way of
extracting log-probabilities must give what the local scorer gives from the same weights (exactly, or within the
bound it reports), and every way a server can fail must end in a retry or one clear error. No Ray."""
from __future__ import annotations

import numpy as np
import pytest

from scoring.api.client import ApiConfig, ApiFatal, CompletionsClient, RateLimiter, Secret
from scoring.api.echo import topk_moments
from scoring.api.loopback import LoopbackServer
from scoring.api.probe import probe
from scoring.api.scorer import ApiScorer

def api_scores(tiny, server, context=32, **cfg):
    api = ApiConfig(base=server.url, model="tiny", **cfg)
    probed, report = probe(api, tiny["tok"])
    scorer = ApiScorer(probed, tiny["tok"], context=context, stride=16)
    try:
        return scorer.score(tiny["ids"]), scorer.stats(), report
    finally:
        scorer.close()


def assert_close(got, want, field, tol):
    for g, w in zip(got, want):
        assert g["error"] is None
        assert g["n_windows"] == w["n_windows"]
        assert len(g[field]) == len(w[field])
        np.testing.assert_allclose(g[field], w[field], atol=tol, rtol=0)


def test_topk_moments_by_hand():
    # log p = log(0.5), log(0.3), log(0.2): renormalised weights are the probabilities themselves
    v = np.log([0.5, 0.3, 0.2])
    lp_max, mu, sigma = topk_moments([v[1], v[0], v[2]], 3, float(v[2]))
    assert lp_max == pytest.approx(np.log(0.5))
    assert mu == pytest.approx(0.5 * v[0] + 0.3 * v[1] + 0.2 * v[2])
    assert sigma == pytest.approx(np.sqrt(0.5 * (v[0] - mu) ** 2 + 0.3 * (v[1] - mu) ** 2 + 0.2 * (v[2] - mu) ** 2))
    # only the `top` largest count (a server may add the actual token as an extra entry)
    assert topk_moments([v[0], v[1], v[2]], 1, float(v[2]))[1:] == (pytest.approx(v[0]), 0.0)


@pytest.mark.parametrize("refuse_zero", [False, True])
def test_echo_equals_local_scoring(tiny, refuse_zero):
    want = tiny["local"]
    context = 32
    if refuse_zero:  # the generated token needs room: windows one shorter, locally too (jobs/kit/served_model.py)
        from scoring.lm.model import load_causal_lm
        from scoring.lm.scorer import Scorer

        context = 31
        want = Scorer(load_causal_lm(tiny["path"], device="cpu")[0], context=31, stride=16).score(tiny["ids"])
    with LoopbackServer(tiny["path"], name="tiny", refuse_max_tokens_0=refuse_zero) as server:
        got, stats, report = api_scores(tiny, server, context=context)
        sent = server.bodies[-1]
    assert report["max_tokens"] == (1 if refuse_zero else 0)  # 0 refused: 1, and the generated token dropped
    assert sent["echo"] is True and sent["temperature"] == 0 and isinstance(sent["prompt"][0], int)
    for field in ("lp", "lp_max"):
        assert_close(got, want, field, 1e-4)
    # one call per window, every predicted position once
    assert stats["calls"] == sum(w["n_windows"] for w in want)
    assert stats["positions"] == sum(len(w["lp"]) for w in want)


@pytest.mark.parametrize("server_mode, method", [("after", "inversion"), ("before", "direct")])
def test_logit_bias_exact_methods_equal_local_scoring(tiny, server_mode, method):
    with LoopbackServer(tiny["path"], name="tiny", bias_logprobs=server_mode) as server:
        got, stats, report = api_scores(tiny, server, mode="logit-bias")
    assert report["method"] == method
    assert_close(got, tiny["local"], "lp", 1e-4)
    assert_close(got, tiny["local"], "lp_max", 1e-4)
    assert stats["listed"] < stats["positions"]  # the bias path really ran
    assert stats["beyond_bias"] == 0


def test_logit_bias_binary_search_is_within_its_reported_bound(tiny):
    with LoopbackServer(tiny["path"], name="tiny", bias_logprobs="hidden") as server:
        got, stats, report = api_scores(tiny, server, mode="logit-bias", search_tol=1e-3)
    assert report["method"] == "search"
    bound = stats["max_bound"]
    assert 0 < bound <= 0.5e-3
    for g, w in zip(got, tiny["local"]):
        assert np.max(np.abs(g["lp"] - w["lp"])) <= bound + 2e-5  # + float32 rounding of the two computations
    assert stats["calls"] > 5 * stats["positions"]  # what the search costs: ~log2(range / tol) calls a token


def test_a_server_that_ignores_logit_bias_is_refused(tiny):
    with LoopbackServer(tiny["path"], name="tiny", bias_logprobs="ignore") as server:
        with pytest.raises(ApiFatal, match="ignores logit_bias"):
            probe(ApiConfig(base=server.url, model="tiny", mode="logit-bias"), tiny["tok"])


def test_a_server_without_echo_is_refused_in_echo_mode(tiny):
    with LoopbackServer(tiny["path"], name="tiny", echo=False) as server:
        with pytest.raises(ApiFatal, match="refused echo"):
            probe(ApiConfig(base=server.url, model="tiny"), tiny["tok"])


def test_a_mismatched_tokenizer_is_refused(tiny, tmp_path):
    from scoring.studies.tiny_lm import train_tokenizer

    other = train_tokenizer(["completely different words " * 50, "zebra quantum lattice " * 50], vocab_size=300)
    other.save_pretrained(tmp_path / "other")
    from scoring.lm.model import load_tokenizer

    with LoopbackServer(tiny["path"], name="tiny") as server:
        with pytest.raises(ApiFatal, match="--tokenizer does not match"):
            probe(ApiConfig(base=server.url, model="tiny"), load_tokenizer(str(tmp_path / "other")))


def test_429_and_5xx_are_retried_with_backoff(tiny):
    waits = []
    with LoopbackServer(tiny["path"], name="tiny", fail_first=[429, 500, 503]) as server:
        client = CompletionsClient(ApiConfig(base=server.url, model="tiny", backoff_s=0.01), sleep=waits.append)
        resp = client.complete({"prompt": tiny["ids"][0][:5], "max_tokens": 1, "logprobs": 2})
        assert server.statuses == {429: 1, 500: 1, 503: 1, 200: 1}
    assert resp["choices"][0]["logprobs"]["top_logprobs"][0]
    assert client.stats["retries"] == 3 and len(waits) == 3
    assert all(0.005 <= w <= 0.01 * 2 ** k * 1.5 for k, w in enumerate(waits))  # exponential, with jitter


def test_a_dead_server_is_one_clear_error():
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = CompletionsClient(ApiConfig(base=f"http://127.0.0.1:{port}/v1", model="m", max_retries=2),
                               sleep=lambda s: None)
    with pytest.raises(ApiFatal, match=r"did not answer after 3 tries \(last: ConnectionRefusedError"):
        client.complete({"prompt": [1, 2], "max_tokens": 1})


def test_bad_requests_fail_the_row_not_the_job(tiny):
    with LoopbackServer(tiny["path"], name="tiny") as server:
        probed, _ = probe(ApiConfig(base=server.url, model="tiny"), tiny["tok"])
        scorer = ApiScorer(probed, tiny["tok"], context=4096)  # the server's context is 32: too long → HTTP 400
        got = scorer.score([tiny["ids"][0], tiny["ids"][2]])
        scorer.close()
    assert got[0]["error"].startswith("api_error: HTTP 400") and "exceeds the context" in got[0]["error"]
    assert got[1]["error"] is None  # the short row still scores


def test_the_key_is_sent_as_a_bearer_token_and_never_shown(tiny):
    with LoopbackServer(tiny["path"], name="tiny", api_key="sk-test-123") as server:
        with pytest.raises(ApiFatal, match="HTTP 401"):
            CompletionsClient(ApiConfig(base=server.url, model="tiny")).complete({"prompt": [1, 2], "max_tokens": 1})
        client = CompletionsClient(ApiConfig(base=server.url, model="tiny"), api_key="sk-test-123")
        assert client.complete({"prompt": [1, 2], "max_tokens": 1})["choices"]
    assert "sk-test" not in repr(client) and "sk-test" not in repr(Secret("sk-test-123"))


def test_an_unknown_model_name_is_fatal(tiny):
    with LoopbackServer(tiny["path"], name="tiny") as server:
        with pytest.raises(ApiFatal, match="does not exist"):
            probe(ApiConfig(base=server.url, model="nope"), tiny["tok"])


def test_the_rate_limiter_spaces_requests(monkeypatch):
    import scoring.api.client as client_mod

    now = [100.0]
    slept = []
    monkeypatch.setattr(client_mod.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(client_mod.time, "sleep", lambda s: slept.append(round(s, 6)))
    limiter = RateLimiter(4.0)  # one start every 0.25 s
    for _ in range(4):
        limiter.wait()
    assert slept == [0.25, 0.5, 0.75]  # all called at t=100: each waits its turn
    assert RateLimiter(0).interval == 0.0


def test_config_errors_are_clear():
    with pytest.raises(ValueError, match="--api-logprobs"):
        ApiConfig(base="http://x/v1", model="m", mode="magic")
    with pytest.raises(ValueError, match="--api-base"):
        ApiConfig(base="localhost:8000", model="m")


def test_full_distribution_detectors_are_gated_by_where_the_stats_came_from():
    from scoring.detectors import parse_methods
    from scoring.detectors.base import DistributionError, distribution_gate

    api, local = {"original": {"api:echo:top5"}}, {"original": {"local"}}
    with pytest.raises(DistributionError, match=r"min_k_pp@k=0.2 needs the full next-token .* min_k_pp@topk=5"):
        distribution_gate(parse_methods("loss,min_k_pp"), api)
    distribution_gate(parse_methods("loss,min_k_pp@topk=5"), api)  # accepted, and named as such:
    assert parse_methods("min_k_pp@topk=5")[0].column == "min_k_pp@k=0.2,topk=5"
    assert parse_methods("min_k_pp")[0].column == "min_k_pp@k=0.2"  # the exact detector keeps its old name
    with pytest.raises(DistributionError, match="hold top-\\[5\\]"):
        distribution_gate(parse_methods("min_k_pp@topk=3"), api)
    with pytest.raises(DistributionError, match="come from the weights"):
        distribution_gate(parse_methods("min_k_pp@topk=5"), local)
    distribution_gate(parse_methods("all"), local)
    distribution_gate(parse_methods("all"), {})  # an older table without lp_source: the weights


def test_methods_all_over_an_api_leaves_min_k_pp_out_and_naming_it_is_refused(capsys):
    import typer

    from jobs.kit.served_model import ServedModel, drop_full_distribution
    from scoring.detectors import parse_methods

    served = ServedModel(ApiConfig(base="http://127.0.0.1:1/v1", model="m", method="echo"), "tok", 64, {})
    kept = drop_full_distribution(parse_methods("all"), "all", served)
    assert "min_k_pp" not in {m.name for m in kept} and "loss" in {m.name for m in kept}
    assert "left out of --methods all: min_k_pp@k=0.2" in capsys.readouterr().err
    with pytest.raises(typer.BadParameter, match="min_k_pp"):
        drop_full_distribution(parse_methods("loss,min_k_pp"), "loss,min_k_pp", served)
    assert drop_full_distribution(parse_methods("all"), "all", None) == parse_methods("all")
