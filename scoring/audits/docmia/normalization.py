"""Per-token values F for document-level membership (Meeus et al.), each the negative log of a normalised
probability of the true token t_i at position i:

  NoNorm     F = −log p
  RatioNorm  F = −log( p / R(t_i) )
  MaxNorm    F = −log( (1 − (p_max − p)) / R(t_i) )

R is a reference dictionary over the vocabulary, built from the *training folds only* (a test document must not
shape its own reference):
  TF  token frequency: count of v / all tokens; a token never seen gets half the smallest frequency seen;
  GP  general probability: the model's predicted probability of v averaged over all predicted positions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

MIN_ARG = 1e-12  # 1 − (p_max − p) is 0 only when p_max rounds to 1 and p to 0; keep −log finite


@dataclass(frozen=True)
class Normalization:
    kind: str  # "none" | "ratio" | "max"
    ref: str | None = None  # "tf" | "gp" | None

    @property
    def name(self) -> str:
        base = {"none": "NoNorm", "ratio": "RatioNorm", "max": "MaxNorm"}[self.kind]
        return base if self.ref is None else f"{base}-{self.ref.upper()}"


ALL_NORMALIZATIONS = (Normalization("none"), Normalization("ratio", "tf"), Normalization("ratio", "gp"),
                      Normalization("max", "tf"), Normalization("max", "gp"))


def parse_normalizations(spec: str) -> list[Normalization]:
    """`all` or a comma list of names: NoNorm, RatioNorm-TF, RatioNorm-GP, MaxNorm-TF, MaxNorm-GP."""
    if spec.strip().lower() == "all":
        return list(ALL_NORMALIZATIONS)
    by_name = {n.name.lower(): n for n in ALL_NORMALIZATIONS}
    out = []
    for part in spec.split(","):
        key = part.strip().lower()
        if key not in by_name:
            raise ValueError(f"unknown normalisation {part!r}; known: {', '.join(n.name for n in ALL_NORMALIZATIONS)}")
        out.append(by_name[key])
    return out


def fill_unseen(values: np.ndarray) -> np.ndarray:
    """Entries ≤ 0 (tokens absent from the reference) become half the smallest positive entry."""
    values = np.asarray(values, dtype=np.float64).copy()
    pos = values > 0
    if not pos.any():
        raise ValueError("reference dictionary is empty")
    values[~pos] = values[pos].min() / 2.0
    return values


def tf_reference(token_id_lists: Sequence[Sequence[int]], vocab_size: int) -> np.ndarray:
    """Token frequencies over every token of the given documents."""
    counts = np.zeros(int(vocab_size), dtype=np.float64)
    for ids in token_id_lists:
        ids = np.asarray(ids, dtype=np.int64)
        counts += np.bincount(ids, minlength=counts.size)[: counts.size]
    return fill_unseen(counts / max(counts.sum(), 1.0))


def gp_reference(p_sums: Sequence[np.ndarray], n_positions: Sequence[int], vocab_size: int) -> np.ndarray:
    """Mean predicted distribution over all predicted positions of the given documents."""
    total = np.zeros(int(vocab_size), dtype=np.float64)
    for s in p_sums:
        s = np.asarray(s, dtype=np.float64)
        total[: s.size] += s[: total.size]
    return fill_unseen(total / max(float(np.sum(n_positions)), 1.0))


def build_reference(norm: Normalization, docs: Sequence[Mapping], vocab_size: int) -> np.ndarray | None:
    """R for `norm` from training-fold documents (dicts with token_ids, lp and, for GP, p_sum)."""
    if norm.ref is None:
        return None
    if norm.ref == "tf":
        return tf_reference([d["token_ids"] for d in docs], vocab_size)
    if norm.ref == "gp":
        if any(d.get("p_sum") is None for d in docs):
            raise ValueError("GP normalisation needs p_sum (score with the GP scorer)")
        return gp_reference([d["p_sum"] for d in docs], [len(d["lp"]) for d in docs], vocab_size)
    raise ValueError(f"unknown reference {norm.ref!r}")


def token_values(doc: Mapping, norm: Normalization, ref: np.ndarray | None) -> np.ndarray:
    """F per predicted position. `doc["lp"]`/`doc["lp_max"]` align with `doc["token_ids"][1:]`."""
    lp = np.asarray(doc["lp"], dtype=np.float64)
    if norm.kind == "none":
        return -lp
    targets = np.asarray(doc["token_ids"], dtype=np.int64)[1:1 + lp.size]
    if targets.size and targets.max() >= ref.size:
        raise ValueError(f"token id {int(targets.max())} is outside the reference dictionary ({ref.size} entries)")
    log_r = np.log(ref[targets])
    if norm.kind == "ratio":
        return -lp + log_r
    if norm.kind == "max":
        p, p_max = np.exp(lp), np.exp(np.asarray(doc["lp_max"], dtype=np.float64))
        return -np.log(np.maximum(1.0 - (p_max - p), MIN_ARG)) + log_r
    raise ValueError(f"unknown normalisation kind {norm.kind!r}")
