"""Batch callables over pyarrow tables: the units that Ray Data's `map_batches` runs as actor pools. They import
no Ray, so a GPU machine without Ray (or a test) can call them directly.
"""
from __future__ import annotations

import os

import pyarrow as pa

from scoring.tokenstats import STAT_FIELDS, TOKEN_STATS_SCHEMA
from scoring.views import TOKEN_COLUMNS, ViewBuilder, ViewRequest

TOKENIZED_SCHEMA = pa.schema([
    pa.field("id", pa.string()), pa.field("view", pa.string()), pa.field("text", pa.string()),
    pa.field("token_ids", pa.list_(pa.int32())), pa.field("offsets", pa.list_(pa.int32())),
    pa.field("first_predicted", pa.int32()), pa.field("prefix_len", pa.int32()), pa.field("error", pa.string()),
])
SCORED_SCHEMA = TOKEN_STATS_SCHEMA.append(pa.field("prefix_len", pa.int32()))


class TokenizeTask:
    """CPU stage: text rows (id, input) → one tokenised row per view."""

    def __init__(self, model: str, views: tuple[str, ...], prefix_text: str | None = None,
                 rename_original: str | None = None):
        from scoring.model import load_tokenizer

        self.builder = ViewBuilder(load_tokenizer(model), ViewRequest(tuple(views), prefix_text),
                                   rename_original=rename_original)

    def __call__(self, batch: pa.Table) -> pa.Table:
        cols = self.builder(batch.select(["id", "input"]).to_pydict())
        return pa.table({c: cols[c] for c in TOKEN_COLUMNS}, schema=TOKENIZED_SCHEMA)


class ScoreTask:
    """Model stage: tokenised rows → token-stats rows. Loads the model once per actor."""

    def __init__(self, model: str, scorer_kwargs: dict | None = None, threads: int | None = None,
                 device: str | None = None):
        import torch

        from scoring.model import load_causal_lm
        from scoring.scorer import Scorer

        if threads:
            torch.set_num_threads(threads)  # two actors on 2 cores must not both spawn 2 threads
        lm, _ = load_causal_lm(model, device=device)
        self.scorer = Scorer(lm, model_name=model, **(scorer_kwargs or {}))
        self.rows_seen = 0

    def __call__(self, batch: pa.Table) -> pa.Table:
        cols = batch.to_pydict()
        self.rows_seen += batch.num_rows
        scored = self.scorer(cols)
        out = {f.name: scored.get(f.name, [None] * batch.num_rows) for f in SCORED_SCHEMA}
        for k in STAT_FIELDS:
            out[k] = [v if v else [] for v in out[k]]
        return pa.table(out, schema=SCORED_SCHEMA)


def default_threads(actors: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, actors))
