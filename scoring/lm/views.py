"""Views: the extra texts a detector needs beside the original, built as ordinary rows for the same batched
scorer (never a per-example loop).

A view name says how to build it, so that a detector can ask for exactly the copies its parameters imply:
  original            the text as given
  lowercase           text.lower()                                   (Lowercase baseline)
  prefixed            a fixed non-member prefix + the text; only the text's tokens are kept   (ReCaLL)
  prefixed:<label>:<shots>  the same with `shots` labelled members or non-members as the prefix     (Con-ReCall)
  pac:<ratio>:<seed>:<j>  copy j of the original token ids with round(ratio·n) random pair swaps     (PAC)
  ref                 the original, under a second (reference) model with its own tokenizer
  nbr:<dropout>:<seed>:<j>  the passage with one word swapped by a masked LM, the j-th best such swap
                      (neighbourhood attack; made on the scorer actor by scoring/lm/neighbours.py, not here)
  grad                the original's token ids, back-propagated instead of scored: the row holds each parameter
                      tensor's gradient norms (GradNorm; scoring/lm/gradnorm.py, on the scorer actor)
  codec:<shots>:<seed>  `shots` other samples of the same set + the text; only the text's tokens are kept (CoDeC).
                      The samples come from a seeded pool of the set (the job's survey picks it), chosen per row
                      by `codec_contexts`, so a row's context depends on its id and the pool, never on the parts
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

ORIGINAL, LOWERCASE, PREFIXED, REF, GRAD = "original", "lowercase", "prefixed", "ref", "grad"


def pac_view(ratio: float, seed: int, copy: int) -> str:
    return f"pac:{ratio:g}:{seed}:{copy}"


def parse_pac_view(name: str) -> tuple[float, int, int]:
    _, ratio, seed, copy = name.split(":")
    return float(ratio), int(seed), int(copy)


def neighbour_view(dropout: float, seed: int, j: int) -> str:
    return f"nbr:{dropout:g}:{seed}:{j}"


def parse_neighbour_view(name: str) -> tuple[float, int, int]:
    _, dropout, seed, j = name.split(":")
    return float(dropout), int(seed), int(j)


def labelled_prefix_view(label: str, shots: int) -> str:
    """Con-ReCall's views: `label` is member or nonmember."""
    return f"prefixed:{label}:{int(shots)}"


def parse_labelled_prefix_view(name: str) -> tuple[str, int]:
    _, label, shots = name.split(":")
    return label, int(shots)


def codec_view(shots: int, seed: int) -> str:
    return f"codec:{int(shots)}:{int(seed)}"


def parse_codec_view(name: str) -> tuple[int, int]:
    _, shots, seed = name.split(":")
    return int(shots), int(seed)


CODEC_JOIN = "\n\n"  # CoDeC's demo joins its context samples and the target with blank lines


def codec_contexts(rid: str, pool_ids: Sequence[str], shots: int, seed: int) -> list[int]:
    """The pool indices of a row's context samples: `shots` of the pool (the row itself excluded), drawn without
    replacement by a generator seeded with the row's id, in the order drawn."""
    others = [i for i, p in enumerate(pool_ids) if p != rid]
    rng = np.random.default_rng(stable_seed("codec", seed, rid))
    return [others[int(j)] for j in rng.choice(len(others), size=min(int(shots), len(others)), replace=False)]


def is_late_view(name: str) -> bool:
    """Views the scorer actor builds (it holds the model they need), which the CPU stage leaves out."""
    return name.startswith("nbr:")


def encode(tokenizer, texts: list[str]) -> list[tuple[list[int], list[int]]]:
    """Token ids (with the model's special tokens) and each token's character start, per text."""
    enc = tokenizer(texts, add_special_tokens=True, return_offsets_mapping=True)
    return [(list(ids), [int(o[0]) for o in offs]) for ids, offs in zip(enc["input_ids"], enc["offset_mapping"])]


def stable_seed(*parts) -> int:
    """A seed that depends only on its parts (not on Python's salted hash), so copies reproduce across runs."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def swap_augment(token_ids: Sequence[int], ratio: float, seed: int) -> np.ndarray:
    """PAC augmentation: swap two random positions, repeated round(ratio·n) times (Ye et al. 2024)."""
    ids = np.array(token_ids, dtype=np.int64, copy=True)
    n = ids.size
    if n < 2:
        return ids
    rng = np.random.default_rng(seed)
    for _ in range(int(round(ratio * n))):
        i, j = rng.choice(n, size=2, replace=False)
        ids[i], ids[j] = ids[j], ids[i]
    return ids


@dataclass(frozen=True)
class ViewRequest:
    """What to build for one model: the view names, for `prefixed` the prefix text, for each
    `prefixed:<label>:<shots>` view its prefix text ((view, text) pairs), and for `codec:` views the pool."""

    views: tuple[str, ...]
    prefix_text: str | None = None
    prefixes: tuple[tuple[str, str], ...] = ()
    context_pool: tuple[tuple[str, str], ...] = ()  # CoDeC's (id, text) pool


class ViewBuilder:
    """Tokenise texts and expand each row into one row per requested view. Runs on CPU workers, ahead of the
    scorer, so the GPU actors only run forward passes.

    Input batch columns: `id`, `input` (text). Output: one row per (id, view) with `view`, `text`, `token_ids`,
    `offsets`, `first_predicted`, `error`.
    """

    def __init__(self, tokenizer, request: ViewRequest, *, rename_original: str | None = None):
        self.tokenizer = tokenizer
        self.request = request
        self.rename_original = rename_original  # the ref model's rows are the original text, named "ref"
        self._prefix_ids: dict[str, list[int]] = {}

    def _encode(self, texts: list[str]) -> list[tuple[list[int], list[int]]]:
        return encode(self.tokenizer, texts)

    def _prefix(self, view: str = PREFIXED) -> list[int]:
        if view not in self._prefix_ids:
            text = self.request.prefix_text if view == PREFIXED else dict(self.request.prefixes).get(view)
            if not text:
                raise ValueError(f"view {view!r} needs a prefix text")
            self._prefix_ids[view] = list(self._encode([text])[0][0])
        return self._prefix_ids[view]

    def _context(self, rid: str, view: str) -> list[int]:
        """CoDeC: the row's context samples joined, each followed by a blank line, as token ids."""
        pool = self.request.context_pool
        if not pool:
            raise ValueError(f"view {view!r} needs a context pool")
        shots, seed = parse_codec_view(view)
        chosen = codec_contexts(rid, [i for i, _ in pool], shots, seed)
        if not chosen:
            return []
        return list(self._encode(["".join(pool[j][1] + CODEC_JOIN for j in chosen)])[0][0])

    def rows(self, ids: Sequence[str], texts: Sequence[str]) -> list[dict]:
        views = tuple(v for v in self.request.views if not is_late_view(v))
        encoded = self._encode(list(texts))
        lowered = self._encode([t.lower() for t in texts]) if LOWERCASE in views else None
        out = []
        for i, (rid, text) in enumerate(zip(ids, texts)):
            tok, offs = encoded[i]
            for view in views:
                row = {"id": rid, "view": view, "text": None, "offsets": None, "first_predicted": 1, "error": None}
                if view == ORIGINAL:
                    row.update(view=self.rename_original or ORIGINAL, text=text, token_ids=tok, offsets=offs)
                elif view == LOWERCASE:
                    row.update(text=text.lower(), token_ids=lowered[i][0], offsets=lowered[i][1])
                elif view == PREFIXED or view.startswith("prefixed:"):
                    # Score prefix + text in one sequence; only the text's tokens are predicted and kept.
                    prefix = self._prefix(view)
                    row.update(token_ids=prefix + tok, first_predicted=len(prefix), prefix_len=len(prefix))
                elif view == GRAD:
                    row.update(token_ids=tok)
                elif view.startswith("codec:"):
                    prefix = self._context(rid, view)
                    if prefix:
                        row.update(token_ids=prefix + tok, first_predicted=len(prefix), prefix_len=len(prefix))
                    else:
                        row.update(token_ids=[], error="no_context: the pool holds no other sample")
                elif view.startswith("pac:"):
                    ratio, seed, copy = parse_pac_view(view)
                    row.update(token_ids=swap_augment(tok, ratio, stable_seed(seed, rid, copy)).tolist())
                else:
                    raise ValueError(f"unknown view {view!r}")
                out.append(row)
        return out

    def __call__(self, batch: dict) -> dict:
        rows = self.rows([str(x) for x in batch["id"]], [str(x) for x in batch["input"]])
        return to_columns(rows)


TOKEN_COLUMNS = ("id", "view", "text", "token_ids", "offsets", "first_predicted", "prefix_len", "error")


def to_columns(rows: Iterable[dict], columns: Sequence[str] = TOKEN_COLUMNS) -> dict:
    rows = list(rows)
    return {c: [r.get(c) for r in rows] for c in columns}


def strip_prefixes(scored, schema):
    """`strip_prefix` over a scored Arrow table, returned as `schema` (which has no `prefix_len`), rows in order.
    Only prefixed rows go through Python: converting every row's per-token lists would cost seconds per
    thousand texts, for the handful of ReCaLL rows that need it."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    for name in schema.names:  # a column this table predates (e.g. lp_source) is null, not an error
        if name not in scored.column_names:
            scored = scored.append_column(schema.field(name), pa.nulls(scored.num_rows, schema.field(name).type))
    mask = pc.greater(pc.fill_null(scored.column("prefix_len"), 0), 0)  # every prefixed view sets prefix_len
    mask = np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)
    if not mask.any():
        return scored.select(schema.names).cast(schema)
    picked, kept = np.flatnonzero(mask), np.flatnonzero(~mask)
    stripped = pa.Table.from_pylist([strip_prefix(r) for r in scored.take(picked).to_pylist()], schema=schema)
    joined = pa.concat_tables([scored.take(kept).select(schema.names).cast(schema), stripped])
    return joined.take(np.argsort(np.concatenate([kept, picked]), kind="stable"))


def strip_prefix(record: dict) -> dict:
    """After scoring a prefixed row, keep only the text's tokens so stats align with `token_ids[0:]`."""
    n = record.get("prefix_len") or 0
    if n:
        record = dict(record)
        record["token_ids"] = list(record["token_ids"])[n:]
        record["first_predicted"] = 0
    return record
