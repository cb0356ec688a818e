"""The scorer: windowing predicts every token exactly once, windowed stats equal a full forward pass, the
vocabulary reduction matches a naive full-softmax computation, and a bad row fails alone."""
from __future__ import annotations

import numpy as np
import pytest

from scoring.lm.scorer import Scorer, pack_windows, plan_windows

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny_model():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=97, n_positions=64, n_embd=32, n_layer=2, n_head=2))
    return model.eval()


def naive_stats(model, ids: list[int]) -> dict:
    """What the research code does: one full forward, full log_softmax over the vocabulary."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].double()
    logp = torch.log_softmax(logits, -1)
    p = logp.exp()
    mu = (p * logp).sum(-1)
    return {"lp": logp.gather(-1, torch.tensor(ids[1:])[:, None]).squeeze(-1).numpy(),
            "lp_max": logp.max(-1).values.numpy(), "mu": mu.numpy(),
            "sigma": ((p * (logp - mu[:, None]) ** 2).sum(-1)).sqrt().numpy(), "entropy": (-mu).numpy()}


@pytest.mark.parametrize("n,first,context,stride", [
    (1, 1, 8, 4), (2, 1, 8, 4), (8, 1, 8, 4), (9, 1, 8, 4), (50, 1, 8, 7), (50, 1, 8, 1), (50, 20, 8, 3),
    (200, 1, 16, 15), (33, 0, 4, 2),
])
def test_windows_predict_every_position_exactly_once(n, first, context, stride):
    windows = plan_windows(n, first, context, stride)
    predicted = [t for w in windows for t in range(w.pred_from, w.end)]
    assert predicted == list(range(max(first, 1), n))
    for w in windows:
        assert w.length <= context and w.begin < w.pred_from  # a target always has context before it


def test_plan_windows_rejects_a_stride_that_would_skip_tokens():
    with pytest.raises(ValueError, match="stride"):
        plan_windows(10, 1, 8, 8)


def test_pack_windows_sorts_by_length_and_respects_budgets():
    windows = [w for i, n in enumerate([5, 40, 7, 39, 6]) for w in plan_windows(n, 1, 64, 32, seq=i)]
    batches = pack_windows(windows, max_batch_tokens=90, max_batch_size=3)
    key = lambda w: (w.seq, w.begin)  # noqa: E731
    assert sorted((w for b in batches for w in b), key=key) == sorted(windows, key=key)
    for b in batches:
        assert len(b) <= 3 and len(b) * max(w.length for w in b) <= 90
    lengths = [w.length for b in batches for w in b]
    assert lengths == sorted(lengths, reverse=True) or lengths == sorted(lengths)


def test_stats_match_a_naive_full_softmax(tiny_model):
    ids = list(np.random.default_rng(1).integers(0, 97, size=30))
    got = Scorer(tiny_model, context=64).score([ids])[0]
    want = naive_stats(tiny_model, ids)
    for key, value in want.items():
        np.testing.assert_allclose(got[key], value, atol=2e-5, err_msg=key)
    assert got["error"] is None and got["n_windows"] == 1


def test_vocabulary_chunks_do_not_change_results(tiny_model):
    ids = [list(np.random.default_rng(s).integers(0, 97, size=25)) for s in range(3)]
    whole = Scorer(tiny_model, context=64).score(ids)
    chunked = Scorer(tiny_model, context=64, row_chunk_elems=97 * 3).score(ids)  # 3 rows of logits at a time
    for a, b in zip(whole, chunked):
        np.testing.assert_allclose(a["lp"], b["lp"], atol=1e-6)
        np.testing.assert_allclose(a["sigma"], b["sigma"], atol=1e-6)


def test_windowed_long_text_matches_its_windows_and_full_forward_when_it_fits(tiny_model):
    ids = list(np.random.default_rng(2).integers(0, 97, size=60))
    full = Scorer(tiny_model, context=64).score([ids])[0]
    windowed = Scorer(tiny_model, context=16, stride=8).score([ids])[0]
    assert len(windowed["lp"]) == len(full["lp"]) == 59
    assert windowed["n_windows"] > 1
    # The first window sees the same context as the full pass, so its predictions agree exactly.
    np.testing.assert_allclose(windowed["lp"][:15], full["lp"][:15], atol=2e-5)
    # Each later token was predicted from a window holding at least `context - stride` tokens of history.
    assert np.isfinite(windowed["lp"]).all()


def test_batched_equals_one_at_a_time(tiny_model):
    rng = np.random.default_rng(3)
    ids = [list(rng.integers(0, 97, size=n)) for n in (5, 31, 12, 64, 2, 17)]
    single = Scorer(tiny_model, context=64, max_batch_size=1).score(ids)
    scorer = Scorer(tiny_model, context=64, max_batch_size=8, max_batch_tokens=8 * 64)
    batched = scorer.score(ids)
    assert scorer.calls < len(ids)  # it really batched
    for a, b in zip(single, batched):
        for key in ("lp", "lp_max", "mu", "sigma", "entropy"):
            np.testing.assert_allclose(a[key], b[key], atol=2e-5)


def test_a_bad_row_fails_alone(tiny_model):
    good = [1, 2, 3, 4]
    out = Scorer(tiny_model, context=64, max_batch_size=4, max_batch_tokens=256).score(
        [good, [1, 2, 500], [7], good])  # 500 is outside the vocabulary; [7] has nothing to predict
    assert out[0]["error"] is None and out[3]["error"] is None
    assert out[1]["error"] and "Error" in out[1]["error"]
    assert out[2]["error"].startswith("too_few_tokens")
    np.testing.assert_allclose(out[0]["lp"], out[3]["lp"], atol=1e-6)


def test_prefix_positions_are_not_predicted(tiny_model):
    ids = list(np.random.default_rng(4).integers(0, 97, size=20))
    out = Scorer(tiny_model, context=64).score([ids], first_predicted=[8])[0]
    full = Scorer(tiny_model, context=64).score([ids])[0]
    np.testing.assert_allclose(out["lp"], full["lp"][7:], atol=1e-6)


def test_columnar_call_adds_stats_and_keeps_prior_errors(tiny_model):
    batch = {"id": ["a", "b"], "token_ids": [[1, 2, 3], [4, 5, 6]], "first_predicted": [1, 1],
             "error": [None, "tokenize: boom"]}
    out = Scorer(tiny_model, context=64, model_name="m")(batch)
    assert out["id"] == ["a", "b"] and out["model"] == ["m", "m"]
    assert len(out["lp"][0]) == 2 and out["error"] == [None, "tokenize: boom"]
