"""Fixtures of the served-model tests (test_api_scoring.py, test_served_checks.py): one tiny GPT-2, trained once."""
from __future__ import annotations

import pytest

TEXTS = ["The President spoke to the Congress about the state of the union and the economy of the nation today.",
         "We must work together to build a stronger and more prosperous country for all of our citizens.",
         "Peace"]


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    from scoring.studies.known_membership import sotu_passages
    from scoring.lm.model import load_causal_lm
    from scoring.lm.scorer import Scorer
    from jobs.kit.studies import train_tiny_gpt2

    out = tmp_path_factory.mktemp("api") / "model"
    texts = [p["text"] for p in sotu_passages(64, 200)]
    train_tiny_gpt2(texts, out, steps=40, context=32, n_embd=64, n_layer=2, vocab_size=600, seed=0)
    lm, tok = load_causal_lm(str(out), device="cpu")
    # context 32 < the longest text: windows with stride 16 are exercised too
    local = Scorer(lm, model_name="local", context=32, stride=16)
    ids = [tok(t)["input_ids"] for t in TEXTS]
    return {"path": str(out), "tok": tok, "ids": ids, "local": local.score(ids)}


