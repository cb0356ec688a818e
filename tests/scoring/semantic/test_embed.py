from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from scoring.semantic.embed import Embedder, read_modules, token_batches

TEXTS = [
    "Tom has 3 apples.",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    "Write a function.",
    "The quick brown fox jumps over the lazy dog while the cat sleeps, and Weng earns 12 dollars an hour.",
    "clips",
]


@pytest.fixture(scope="module")
def embedder(tiny_sentence_dir):
    return Embedder(tiny_sentence_dir, batch_tokens=64)


def hidden_states(directory, text):
    """The model's last hidden state for one text alone (no padding), straight from transformers."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(str(directory)), AutoModel.from_pretrained(str(directory)).eval()
    with torch.inference_mode():
        return model(**tok([text], return_tensors="pt")).last_hidden_state[0].numpy()


def test_token_batches_fill_a_budget_over_texts_sorted_by_length():
    batches = token_batches([5, 1, 3, 3, 10], 9)
    assert [b.tolist() for b in batches] == [[1, 2, 3], [0], [4]]  # 3 x 3 = 9 fits, 4 x 5 does not; 10 alone
    assert [b.tolist() for b in token_batches([2, 2, 2], 100)] == [[0, 1, 2]]
    assert token_batches([], 10) == []


def test_embeddings_are_unit_vectors_in_input_order(embedder):
    out = embedder.embed(TEXTS)
    assert out.dtype == np.float32 and out.shape == (len(TEXTS), 32)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    assert embedder.embed([]).shape == (0, 32)
    assert embedder.pooling == "mean" and embedder.listed_normalize


def test_a_texts_vector_does_not_depend_on_its_batch(embedder, tiny_sentence_dir):
    together = embedder.embed(TEXTS)
    alone = np.stack([embedder.embed([t])[0] for t in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    order = [3, 0, 4, 2, 1]
    np.testing.assert_allclose(embedder.embed([TEXTS[i] for i in order]), together[order], atol=1e-5)
    one_batch = Embedder(tiny_sentence_dir, batch_tokens=100_000).embed(TEXTS)  # every text padded together
    np.testing.assert_allclose(one_batch, together, atol=1e-5)
    assert not np.allclose(together[0], together[2], atol=1e-3)  # different texts, different vectors


def test_mean_pooling_is_the_masked_mean_of_the_last_hidden_state(embedder, tiny_sentence_dir):
    h = hidden_states(tiny_sentence_dir, TEXTS[0])
    mean = h.mean(0)
    expected = mean / np.linalg.norm(mean)
    got = embedder.embed([TEXTS[1], TEXTS[0], TEXTS[3]])[1]  # padded next to longer texts
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert not np.allclose(got, h[0] / np.linalg.norm(h[0]), atol=1e-3)  # not the CLS vector


def test_cls_pooling_from_the_pooling_config(tiny_sentence_dir, tmp_path):
    d = shutil.copytree(tiny_sentence_dir, tmp_path / "cls")
    pool = json.loads((d / "1_Pooling/config.json").read_text())
    pool.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    (d / "1_Pooling/config.json").write_text(json.dumps(pool))
    e = Embedder(d)
    assert e.pooling == "cls"
    h = hidden_states(d, TEXTS[2])
    np.testing.assert_allclose(e.embed([TEXTS[1], TEXTS[2]])[1], h[0] / np.linalg.norm(h[0]), atol=1e-5)


def test_modules_it_cannot_run_are_refused(tiny_sentence_dir, tmp_path):
    d = shutil.copytree(tiny_sentence_dir, tmp_path / "dense")
    modules = json.loads((d / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (d / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError, match="Dense"):
        read_modules(d)
    (d / "modules.json").write_text(json.dumps(modules[:2]))
    pool = json.loads((d / "1_Pooling/config.json").read_text())
    (d / "1_Pooling/config.json").write_text(json.dumps(pool | {"pooling_mode_max_tokens": True}))
    with pytest.raises(ValueError, match="pooling"):
        read_modules(d)
    (d / "modules.json").unlink()
    assert read_modules(d) == ("mean", False, None)  # a plain model: mean pooling


def test_long_texts_are_cut_at_max_tokens(tiny_sentence_dir):
    e = Embedder(tiny_sentence_dir, max_tokens=8)
    assert e.max_tokens == 8
    a, b = e.embed([TEXTS[1], TEXTS[1] + " Tom has 3 apples."])
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert Embedder(tiny_sentence_dir, max_tokens=10_000).max_tokens == 128  # the model's max_seq_length


def test_a_named_embedder_resolves_under_the_models_folder_or_says_how_to_get_it(tmp_path, monkeypatch,
                                                                                  tiny_sentence_dir):
    from scoring.semantic.embed import resolve_embedder

    monkeypatch.setenv("TIDEMARK_MODELS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="make minilm"):
        resolve_embedder("minilm")
    shutil.copytree(tiny_sentence_dir, tmp_path / "all-MiniLM-L6-v2")
    assert resolve_embedder("minilm") == tmp_path / "all-MiniLM-L6-v2"
    assert resolve_embedder(str(tiny_sentence_dir)) == tiny_sentence_dir
    with pytest.raises(FileNotFoundError, match="sentence-transformers model directory"):
        resolve_embedder(str(tmp_path / "nowhere"))


def test_the_tiny_models_vocabulary_is_a_function_of_its_sentences():
    """Its tokenizer's vocabulary is read off the sentences, hand-checked here, and the same in a fresh process;
    the WordPiece trainer it replaced broke ties in hash-map order and changed the model between processes."""
    import subprocess
    import sys

    from scoring.semantic.tiny import SPECIAL, wordpiece_vocab

    vocab = wordpiece_vocab(["Bob saw a cat.", "a cat saw Bob", "A dog"], size=30)
    chars = sorted(set("bobsawcatdog."))
    # "a" (3 times) and "." are characters already; then bob, cat, saw (2 each, alphabetical), dog (1)
    assert list(vocab) == [*SPECIAL, *chars, *(f"##{c}" for c in chars), "bob", "cat", "saw", "dog"]
    assert list(vocab.values()) == list(range(len(vocab)))
    assert list(wordpiece_vocab(["Bob saw a cat.", "a cat saw Bob", "A dog"], size=27))[-2:] == ["bob", "cat"]
    assert wordpiece_vocab(["Bob saw a cat."], size=1) == wordpiece_vocab(["Bob saw a cat."], size=0)  # chars kept
    code = ("from scoring.semantic.tiny import wordpiece_vocab; import json; "
            "print(json.dumps(wordpiece_vocab(['tie one', 'tie two', 'three four five six'] * 3, 40)))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(3)}
    assert len(runs) == 1 and json.loads(runs.pop()) == wordpiece_vocab(["tie one", "tie two",
                                                                         "three four five six"] * 3, 40)
