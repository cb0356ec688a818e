"""py3langid's classifier, made cheaper per text with the same scores: its scoring table widened once, and its walk
over the text's bytes done with numpy.

The table: py3langid keeps its naive-Bayes table (100,053 features x 142 classes) in float16. Every text gathers its
features' rows and multiplies them by its feature counts; numpy first converts the gathered float16 rows to float32,
which on the coffee dump's bodies cost more than the matrix product itself (~120 us of ~300 us a text). Here the
table is converted once per process (57 MB of float32, exact: every float16 is a float32), and the product is the
library's own `_sparse_score` on the float32 rows: numpy ran that product in float32 before too, so the scores are
bit-identical.

The walk: the library steps a byte automaton in a Python loop (~0.1 us a byte, about half a text's cost). That
automaton is an Aho-Corasick one: each state stands for one byte string (the shortest path to it from the start, at
most 6 bytes for the bundled model), and after any text its state is the state of the longest of those strings that
ends the text, which only the text's last 6 bytes decide. So `_features` walks from the start over the 6 bytes up to
every position, all positions a step at a time in numpy (any bound at least the depth gives the same states), and
meets the same features in the same order as the library's walk: the same Counter, the same product, the same
scores. tests/curation/stages/test_language_id.py checks the Aho-Corasick rule on every state and byte of the
bundled model, the features against the library's walk, and the scores on every real coffee body and a spread of
other texts against the stock classifier. Measured on the coffee bodies: ~285 -> ~200 us a classify (one core).
The encoding and the decision stay the library's code.
"""
from __future__ import annotations

import functools
from collections import Counter

import numpy as np
from py3langid.langid import MODEL_FILE, RAW_FLOOR, LanguageIdentifier

def automaton_depth(nextmove, rowbase) -> int:
    """The length of the longest string that leads from the start to a state the shortest way (breadth first)."""
    moves, base = _arrays(nextmove, rowbase)
    seen = np.zeros(len(base), dtype=bool)
    seen[0] = True
    frontier, depth, byte = np.zeros(1, dtype=np.int64), 0, np.arange(256, dtype=np.int64)
    while True:
        reached = np.zeros(len(base), dtype=bool)
        reached[moves[base[frontier][:, None] + byte]] = True
        frontier = np.flatnonzero(reached & ~seen)
        if not len(frontier):
            return depth
        seen[frontier] = True
        depth += 1


def _arrays(nextmove, rowbase) -> tuple[np.ndarray, np.ndarray]:
    moves = np.frombuffer(nextmove, dtype=np.dtype(nextmove.typecode)) if hasattr(nextmove, "typecode") \
        else np.asarray(nextmove)
    return moves, np.asarray(rowbase, dtype=np.int64)


class WideTableIdentifier(LanguageIdentifier):
    """A py3langid LanguageIdentifier whose scores use a float32 copy of its table and whose byte walk is numpy's."""

    __slots__ = ("_table32", "_moves", "_base", "_depth", "_outputs")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._table32 = np.asarray(self.nb_ptc, dtype=np.float32)
        self._moves, self._base = _arrays(self.tk_nextmove, self._rowbase)
        self._depth = automaton_depth(self.tk_nextmove, self._rowbase)
        self._outputs = np.asarray(self.tk_output, dtype=np.int64)

    def _sparse_score(self, visits, table):
        # The library passes its float16 table; the float32 copy holds the same numbers.
        return super()._sparse_score(visits, self._table32 if table is self.nb_ptc else table)

    def set_languages(self, langs=None):
        super().set_languages(langs)
        self._table32 = np.asarray(self.nb_ptc, dtype=np.float32)

    def _features(self, text: bytes) -> np.ndarray:
        """The features py3langid's visit_counts(tk_nextmove, rowbase, tk_output, text) meets, in the order met: the
        state at each position is the walk from the start over the last `_depth` bytes up to it (module docstring),
        all positions a step at a time."""
        n = len(text)
        data = np.frombuffer(text, dtype=np.uint8).astype(np.int64)
        state = np.zeros(n, dtype=np.int64)
        for back in range(min(self._depth, n) - 1, -1, -1):  # the byte `back` before each position, oldest first
            state[back:] = self._moves[self._base[state[back:]] + data[:n - back]]
        features = self._outputs[state]
        return features[features >= 0]

    def _raw_score(self, text):
        # The library's _raw_score with its visit_counts call replaced: the same features in the same order, so the
        # same Counter (ordered as first met, the order the product sums them in) and the same scores.
        features = self._features(text)
        if len(features):
            return self._sparse_score(Counter(features.tolist()), self.nb_ptc)
        fill = 0.0 if self._norm_probs else RAW_FLOOR
        return np.full(len(self.nb_classes), fill, dtype=np.float32)


def identifier() -> LanguageIdentifier:
    """py3langid's bundled model, probabilities normalised, as the Language stage classifies with it (a new one)."""
    return WideTableIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


@functools.lru_cache(maxsize=1)
def shared_identifier() -> LanguageIdentifier:
    """One `identifier()` per process, for the Language stage. Loading it (decompressing the model, widening the
    table) costs ~1.5 s of CPU, and every parse task builds its own stage list: on a 500k-post dump that was ~12
    loads, ~15% of the job's CPU, where the tasks run in a few reused worker processes. Classifying does not change
    it; nothing may call set_languages on this shared one."""
    return identifier()
