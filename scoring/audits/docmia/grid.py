"""The k-fold grid's per-part arithmetic, so that no step needs every document's token stats in one place.

Everything the protocol fits on the training folds decomposes over documents:
  - a TF or GP reference for fold f is a sum over the training documents, i.e. Σ_{g≠f} S_g, where S_g sums fold
    g's documents: each part adds its documents into k per-fold sums (`fold_sums`), the driver adds the parts'
    sums and forms the k references (`fold_references`);
  - HistFE's bin edges span the pooled training values: the minimum of per-document minima and the maximum of
    per-document maxima, which AggFE already holds (columns `min` and `max`; `hist_edges_from_agg`);
  - the features of a document depend only on that document and the fitted references/edges (`part_features`).
So the workers make the features part by part, and the driver handles k per-fold vectors and one feature matrix
(documents × features) at a time. TF sums are integer counts, so its references equal the in-memory ones exactly;
GP sums are float64 over float32 rows, equal up to the order of additions (~1e-16 relative).
"""
from __future__ import annotations

from itertools import product
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from scoring.audits.docmia.features import AGG_NAMES, AggFE, hist_edges, histogram_features
from scoring.audits.docmia.normalization import Normalization, fill_unseen, token_values

FEATURE_KINDS = ("AggFE", "HistFE")


def configs(contexts: Sequence[int], norms: Sequence[Normalization], k: int) -> list[tuple[int, str, int]]:
    """(context, normalisation name, fold) in the order part feature files store them (one row group each)."""
    return [(int(c), n.name, f) for c, n, f in product(contexts, norms, range(k))]


def _documents(stats: pa.Table, fold_of: Mapping[str, int]):
    """(fold, context, doc dict) per stats row of a document in the grid (fold ≥ 0), in table order."""
    cols = {c: stats.column(c).to_pylist() for c in ("id", "context", "token_ids", "lp", "lp_max")}
    p_sums = stats.column("p_sum").to_pylist() if "p_sum" in stats.column_names else [None] * stats.num_rows
    for i, rid in enumerate(cols["id"]):
        fold = fold_of.get(rid, -1)
        if fold < 0:
            continue
        yield fold, int(cols["context"][i]), {"token_ids": cols["token_ids"][i], "lp": cols["lp"][i],
                                              "lp_max": cols["lp_max"][i], "p_sum": p_sums[i]}


def fold_sums(stats: pa.Table, fold_of: Mapping[str, int], k: int, vocab: int, refs: Sequence[str]) -> dict:
    """Per context: `tf` (k × vocab token counts), `gp` (k × vocab summed predicted distributions) and `n_pos`
    (k predicted positions), each summed over the part's documents by fold. Only the references in `refs`."""
    out: dict[int, dict] = {}
    for fold, context, doc in _documents(stats, fold_of):
        acc = out.setdefault(context, {"n_pos": np.zeros(k), **{r: np.zeros((k, vocab)) for r in refs}})
        if "tf" in refs:
            ids = np.asarray(doc["token_ids"], dtype=np.int64)
            acc["tf"][fold] += np.bincount(ids, minlength=vocab)[:vocab]
        if "gp" in refs:
            if doc["p_sum"] is None:
                raise ValueError("GP normalisation needs p_sum (score with the GP scorer)")
            p = np.asarray(doc["p_sum"], dtype=np.float64)[:vocab]
            acc["gp"][fold, : p.size] += p
        acc["n_pos"][fold] += len(doc["lp"])
    return out


def add_sums(total: dict, part: Mapping) -> dict:
    """Add one part's `fold_sums` into a running total (in place)."""
    for context, acc in part.items():
        if context not in total:
            total[context] = {key: np.array(v, dtype=np.float64) for key, v in acc.items()}
        else:
            for key, v in acc.items():
                total[context][key] += v
    return total


def fold_references(sums: Mapping, k: int) -> dict:
    """{context: {ref: k × vocab array}}: row f is the reference fitted on every fold but f."""
    refs: dict[int, dict[str, np.ndarray]] = {}
    for context, acc in sums.items():
        refs[context] = {}
        for ref in ("tf", "gp"):
            if ref not in acc:
                continue
            rows = []
            for f in range(k):
                train = sum(acc[ref][g] for g in range(k) if g != f)
                if ref == "tf":
                    rows.append(fill_unseen(train / max(float(train.sum()), 1.0)))
                else:
                    n_pos = sum(float(acc["n_pos"][g]) for g in range(k) if g != f)
                    rows.append(fill_unseen(train / max(n_pos, 1.0)))
            refs[context][ref] = np.stack(rows)
    return refs


def part_features(stats: pa.Table, fold_of: Mapping[str, int], refs: Mapping, contexts: Sequence[int],
                  norms: Sequence[Normalization], k: int, kind: str, edges: Mapping | None = None,
                  bins: int = 1000) -> list[np.ndarray]:
    """One matrix (part documents in the grid, in table order × features) per config of `configs(...)`.
    `kind` is AggFE or HistFE; HistFE needs `edges[(context, norm name, fold)]`."""
    if kind not in FEATURE_KINDS:
        raise ValueError(f"unknown feature extractor {kind!r}")
    docs: dict[int, list[dict]] = {}
    for _, context, doc in _documents(stats, fold_of):
        docs.setdefault(context, []).append(doc)
    width = len(AGG_NAMES) if kind == "AggFE" else int(bins)
    agg = AggFE()
    out = []
    for context, norm_name, fold in configs(contexts, norms, k):
        norm = next(n for n in norms if n.name == norm_name)
        ref = None if norm.ref is None else refs[context][norm.ref][fold]
        values = [token_values(d, norm, ref) for d in docs.get(context, [])]
        if not values:
            out.append(np.zeros((0, width)))
        elif kind == "AggFE":
            out.append(agg.transform(values))
        else:
            out.append(histogram_features(values, edges[(context, norm_name, fold)]))
    return out


def hist_edges_from_agg(agg_train: np.ndarray, bins: int) -> np.ndarray:
    """HistFE's edges for one config from the AggFE rows of its training documents (min and max columns)."""
    return hist_edges(float(agg_train[:, AGG_NAMES.index("min")].min()),
                      float(agg_train[:, AGG_NAMES.index("max")].max()), bins)
