"""The token-stats table: the one artefact every detector reads.

One row per (text id, view, model). Per predicted position it holds `lp` (log p of the true token), `lp_max`,
`mu` / `sigma` (mean and std of log p under the model's own next-token distribution: Min-K%++ needs them) and
`entropy`. The stats of row r align with `token_ids[first_predicted:]`: position i of `lp` is the prediction of
token `token_ids[first_predicted + i]`. Without a prefix, `first_predicted` is 1 (nothing predicts the first
token); a ReCaLL-prefixed view stores only the text's own tokens and sets it to 0.

Written to Parquet, the table can be rescored at any time without the model. `lp_source` says whether the stats
came from the weights or from a served model's API (where mu/sigma/entropy are top-n approximations).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa

STAT_FIELDS = ("lp", "lp_max", "mu", "sigma", "entropy")

TOKEN_STATS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("view", pa.string()),
        pa.field("model", pa.string()),
        pa.field("text", pa.string()),  # the view's text (null for views made on token ids, e.g. PAC copies)
        pa.field("token_ids", pa.list_(pa.int32())),
        pa.field("offsets", pa.list_(pa.int32())),  # char start of each token in `text` (Tag&Tab maps words)
        pa.field("first_predicted", pa.int32()),
        pa.field("n_windows", pa.int32()),
        *[pa.field(name, pa.list_(pa.float32())) for name in STAT_FIELDS],
        pa.field("error", pa.string()),  # set when this row could not be scored; stats are then empty
        # Where the numbers came from: "local" (the weights) or "api:<method>:top<n>" (a served model,
        # scoring/api): over an API, mu/sigma/entropy are top-n approximations. Absent (null) in older tables.
        pa.field("lp_source", pa.string()),
        # The gradient view's rows only (scoring/lm/gradnorm.py): each parameter tensor's gradient p-norm, for
        # p = inf, 1, 2 in turn. Null elsewhere, and absent in older tables.
        pa.field("grad_norms", pa.list_(pa.float32())),
    ]
)


@dataclass
class TokenStats:
    """Token stats of one view for a list of texts, in a fixed id order. Missing rows hold empty arrays."""

    ids: list[str]
    token_ids: list[np.ndarray]
    lp: list[np.ndarray]
    lp_max: list[np.ndarray]
    mu: list[np.ndarray]
    sigma: list[np.ndarray]
    entropy: list[np.ndarray]
    first_predicted: np.ndarray
    texts: list[str | None] = field(default_factory=list)
    offsets: list[np.ndarray | None] = field(default_factory=list)
    grad_norms: list[np.ndarray] = field(default_factory=list)  # the gradient view's per-tensor norms

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def from_records(cls, records: Sequence[dict]) -> "TokenStats":
        """Build from dict rows shaped like TOKEN_STATS_SCHEMA (missing keys are allowed for hand-made tests)."""

        def arr(rec: dict, key: str, dtype) -> np.ndarray:
            val = rec.get(key)
            return np.asarray(val if val is not None else [], dtype=dtype)

        return cls(
            ids=[str(r["id"]) for r in records],
            token_ids=[arr(r, "token_ids", np.int64) for r in records],
            lp=[arr(r, "lp", np.float64) for r in records],
            lp_max=[arr(r, "lp_max", np.float64) for r in records],
            mu=[arr(r, "mu", np.float64) for r in records],
            sigma=[arr(r, "sigma", np.float64) for r in records],
            entropy=[arr(r, "entropy", np.float64) for r in records],
            first_predicted=np.asarray([int(r.get("first_predicted", 1) or 0) for r in records], dtype=np.int64),
            texts=[r.get("text") for r in records],
            offsets=[None if r.get("offsets") is None else np.asarray(r["offsets"], dtype=np.int64) for r in records],
            grad_norms=[arr(r, "grad_norms", np.float64) for r in records],
        )


def empty_record(rec_id: str, view: str, model: str, error: str | None = None) -> dict:
    return {
        "id": rec_id, "view": view, "model": model, "text": None, "token_ids": [], "offsets": None,
        "first_predicted": 1, "n_windows": 0, **{k: [] for k in STAT_FIELDS}, "error": error,
        "lp_source": None, "grad_norms": None,
    }


def views_by_name(table: pa.Table, ids: Iterable[str]) -> dict[str, TokenStats]:
    """Split a token-stats table into one TokenStats per view, each aligned to `ids` (absent ids → empty)."""
    ids = list(ids)
    rows = table.to_pylist()
    by_view: dict[str, dict[str, dict]] = {}
    for r in rows:
        if r.get("error"):
            continue
        by_view.setdefault(r["view"], {})[r["id"]] = r
    out = {}
    for view, recs in by_view.items():
        out[view] = TokenStats.from_records([recs.get(i, {"id": i}) for i in ids])
    return out
