"""The gradient view against autograd by hand: per parameter tensor, the p-norm of the gradient of the text's mean
token loss (HF's own `labels=` loss), for p = inf, 1, 2; a text longer than the context gives the gradient of its
windows' mean loss; a bf16 model is differentiated in float32; the scorer actor back-propagates `grad` rows and
scores the others in one batch. No Ray."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from scoring.lm.gradnorm import ORDERS, GradNorms, split_norms
from scoring.lm.scorer import plan_windows

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=97, n_positions=64, n_embd=32, n_layer=2, n_head=2)).eval()


def by_hand(model, loss) -> dict[str, np.ndarray]:
    params = [p for p in model.parameters()]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    flat = [g.double().flatten() for g in grads if g is not None]
    return {"inf": np.array([g.abs().max().item() for g in flat]), "1": np.array([g.abs().sum().item() for g in flat]),
            "2": np.array([g.pow(2).sum().sqrt().item() for g in flat])}


def test_the_norms_are_those_of_the_mean_token_loss_gradient(tiny):
    ids = [5, 17, 3, 88, 42, 42, 9, 1, 60, 2]
    with torch.enable_grad():
        want = by_hand(tiny, tiny(torch.tensor([ids]), labels=torch.tensor([ids])).loss)
    got = GradNorms(tiny, context=64).one(ids)
    assert got.dtype == np.float32 and len(got) == 3 * len(want["inf"])
    for p in ORDERS:
        np.testing.assert_allclose(split_norms(got, p), want[p], rtol=1e-4, atol=1e-7, err_msg=p)
    # the detector's score: minus the mean over tensors (MIMIR's aggregation)
    assert -split_norms(got, "inf").mean() == pytest.approx(-want["inf"].mean(), rel=1e-4)
    assert all(p.grad is None for p in tiny.parameters())  # nothing is left behind for the next text


def test_a_long_text_back_propagates_its_windows_mean_loss(tiny):
    ids = list(np.random.default_rng(0).integers(0, 97, size=40))
    windows = plan_windows(len(ids), 1, 16, 8)
    seq = torch.tensor(ids)
    with torch.enable_grad():  # one graph over every window: the mean of every predicted token's loss
        total = 0
        for w in windows:
            logits = tiny(seq[w.begin:w.end][None]).logits[0]
            lp = torch.log_softmax(logits[w.pred_from - w.begin - 1: w.end - w.begin - 1], -1)
            total = total - lp.gather(-1, seq[w.pred_from:w.end, None]).sum()
        want = by_hand(tiny, total / (len(ids) - 1))
    got = GradNorms(tiny, context=16, stride=8).one(ids)
    np.testing.assert_allclose(split_norms(got, "2"), want["2"], rtol=1e-4, atol=1e-7)


def test_a_half_precision_model_is_differentiated_in_float32(tiny):
    import copy

    half = copy.deepcopy(tiny).to(torch.bfloat16)
    g = GradNorms(half, context=64)
    assert next(g.model.parameters()).dtype == torch.float32 and next(half.parameters()).dtype == torch.bfloat16
    want = GradNorms(copy.deepcopy(half).float(), context=64).one([5, 17, 3, 88, 42])
    np.testing.assert_allclose(g.one([5, 17, 3, 88, 42]), want, rtol=1e-5)


def test_a_row_without_a_prediction_fails_alone(tiny):
    got = GradNorms(tiny, context=64)([[7], [5, 17, 3]])
    assert got[0][0] is None and got[0][1].startswith("too_few_tokens")
    assert got[1][1] is None and len(got[1][0]) > 0


def test_the_scorer_actor_back_propagates_grad_rows_and_scores_the_rest(tmp_path, tiny):
    from jobs.kit.studies import train_tiny_gpt2
    from jobs.plane.tasks import SCORED_SCHEMA, ScoreTask
    from scoring.lm.model import load_tokenizer

    model = tmp_path / "m"
    train_tiny_gpt2(["the river flows north through the valley to the sea"] * 8, model, steps=2, context=32,
                    vocab_size=300, seed=0)
    tok = load_tokenizer(str(model))
    ids = [tok("the river flows north")["input_ids"], tok("to the sea")["input_ids"]]
    batch = pa.table({"id": ["a", "a", "b", "b"], "view": ["original", "grad", "grad", "original"],
                      "text": [None] * 4, "token_ids": [ids[0], ids[0], ids[1], ids[1]],
                      "offsets": [None] * 4, "first_predicted": [1] * 4, "prefix_len": [None] * 4,
                      "error": [None] * 4})
    out = ScoreTask(str(model), threads=1)(batch).to_pylist()
    assert [r["view"] for r in out] == ["original", "grad", "grad", "original"] and len(out) == 4
    assert out[0]["grad_norms"] is None and len(out[0]["lp"]) == len(ids[0]) - 1
    assert len(out[1]["grad_norms"]) > 0 and out[1]["lp"] == [] and out[1]["error"] is None
    assert set(out[0]) == set(SCORED_SCHEMA.names)
