"""py3langid's classifier with its scoring table widened once, so that each text costs less and scores the same.

py3langid keeps its naive-Bayes table (100,053 features x 142 classes) in float16. Every text gathers its
features' rows and multiplies them by its feature counts; numpy first converts the gathered float16 rows to float32,
which on the coffee dump's bodies cost more than the matrix product itself (~120 us of ~300 us a text). Here the
table is converted once per process (57 MB of float32, exact: every float16 is a float32), and the product is the
library's own `_sparse_score` on the float32 rows: numpy ran that product in float32 before too, so the scores are
bit-identical (tests/curation/stages/test_language_id.py compares every real coffee body and a spread of other
texts against the stock classifier). The walk over the text's bytes, the encoding and the decision stay the
library's code.
"""
from __future__ import annotations

import numpy as np
from py3langid.langid import MODEL_FILE, LanguageIdentifier


class WideTableIdentifier(LanguageIdentifier):
    """A py3langid LanguageIdentifier whose scores use a float32 copy of its table."""

    __slots__ = ("_table32",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._table32 = np.asarray(self.nb_ptc, dtype=np.float32)

    def _sparse_score(self, visits, table):
        # The library passes its float16 table; the float32 copy holds the same numbers.
        return super()._sparse_score(visits, self._table32 if table is self.nb_ptc else table)

    def set_languages(self, langs=None):
        super().set_languages(langs)
        self._table32 = np.asarray(self.nb_ptc, dtype=np.float32)


def identifier() -> LanguageIdentifier:
    """The classifier the Language stage uses: py3langid's bundled model, probabilities normalised."""
    return WideTableIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
