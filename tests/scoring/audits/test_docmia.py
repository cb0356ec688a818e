"""Document-level membership pieces against hand-computed values: reference dictionaries, NoNorm/RatioNorm/MaxNorm,
AggFE/HistFE, the k-fold grid, and the GP scorer's summed distributions."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from scoring.audits.docmia.features import AggFE, HistFE
from scoring.audits.docmia.normalization import (Normalization, build_reference, gp_reference, parse_normalizations,
                                          tf_reference, token_values)

# Training-fold documents over a 4-token vocabulary; token 3 never occurs in them.
TRAIN = [{"token_ids": [0, 1, 1, 2], "lp": [0.0] * 3, "p_sum": [1.0, 2.0, 1.0, 0.0]},
         {"token_ids": [1, 1], "lp": [0.0], "p_sum": [0.0, 1.0, 1.0, 0.0]}]
# Predicts targets 1, 3, 2 with p = 0.5, 0.1, 0.25 while the top token had p_max = 0.5, 0.6, 0.5.
DOC = {"token_ids": [0, 1, 3, 2], "lp": np.log([0.5, 0.1, 0.25]).tolist(), "lp_max": np.log([0.5, 0.6, 0.5]).tolist()}


def test_tf_reference_counts_training_tokens_and_gives_unseen_half_the_smallest():
    # counts 1, 4, 1, 0 of 6 tokens → 1/6, 4/6, 1/6 and, unseen, (1/6)/2
    np.testing.assert_allclose(tf_reference([d["token_ids"] for d in TRAIN], 4), [1 / 6, 4 / 6, 1 / 6, 1 / 12])


def test_gp_reference_is_the_mean_predicted_distribution_over_all_positions():
    # summed distributions [1, 3, 2, 0] over 3 + 1 predicted positions; token 3 unseen → (1/4)/2
    ref = gp_reference([d["p_sum"] for d in TRAIN], [len(d["lp"]) for d in TRAIN], 4)
    np.testing.assert_allclose(ref, [1 / 4, 3 / 4, 2 / 4, 1 / 8])
    assert np.allclose(build_reference(Normalization("max", "gp"), TRAIN, 4), ref)


def test_nonorm_is_the_token_loss():
    np.testing.assert_allclose(token_values(DOC, Normalization("none"), None), -np.log([0.5, 0.1, 0.25]))


def test_rationorm_tf_by_hand():
    ref = build_reference(Normalization("ratio", "tf"), TRAIN, 4)  # R(1)=4/6, R(3)=1/12, R(2)=1/6
    expected = [-math.log(0.5 / (4 / 6)), -math.log(0.1 / (1 / 12)), -math.log(0.25 / (1 / 6))]
    np.testing.assert_allclose(token_values(DOC, Normalization("ratio", "tf"), ref), expected)


def test_maxnorm_tf_by_hand():
    ref = build_reference(Normalization("max", "tf"), TRAIN, 4)
    # 1 − (p_max − p) = 1, 0.5, 0.75; divided by R = 4/6, 1/12, 1/6 → 1.5, 6, 4.5
    np.testing.assert_allclose(token_values(DOC, Normalization("max", "tf"), ref),
                               [-math.log(1.5), -math.log(6.0), -math.log(4.5)])


def test_maxnorm_gp_by_hand():
    ref = build_reference(Normalization("max", "gp"), TRAIN, 4)  # R(1)=3/4, R(3)=1/8, R(2)=1/2
    np.testing.assert_allclose(token_values(DOC, Normalization("max", "gp"), ref),
                               [-math.log(1 / 0.75), -math.log(0.5 / 0.125), -math.log(0.75 / 0.5)])


def test_maxnorm_stays_finite_when_the_top_token_takes_all_mass():
    doc = {"token_ids": [0, 1], "lp": [-800.0], "lp_max": [0.0]}  # p = 0, p_max = 1
    v = token_values(doc, Normalization("max", "tf"), np.array([0.5, 0.5]))
    assert np.isfinite(v).all() and v[0] > 20


def test_parse_normalizations():
    assert [n.name for n in parse_normalizations("all")] == ["NoNorm", "RatioNorm-TF", "RatioNorm-GP", "MaxNorm-TF",
                                                             "MaxNorm-GP"]
    assert [n.name for n in parse_normalizations("maxnorm-tf, NoNorm")] == ["MaxNorm-TF", "NoNorm"]
    with pytest.raises(ValueError, match="unknown normalisation"):
        parse_normalizations("MinNorm")


def test_aggfe_by_hand():
    x = AggFE().fit([]).transform([np.array([1.0, 2.0, 3.0, 4.0])])[0]
    assert x[:4].tolist() == pytest.approx([1.0, 4.0, 2.5, math.sqrt(1.25)])
    assert x[4] == pytest.approx(1.03)  # 1st percentile, linear: 1 + 0.01·3
    assert x[8] == pytest.approx(2.5)  # median


def test_histfe_bins_are_fitted_on_training_values_and_fractions_sum_to_one():
    fe = HistFE(bins=4).fit([np.array([0.0, 1.0]), np.array([2.0, 4.0])])  # edges 0, 1, 2, 3, 4
    np.testing.assert_allclose(fe.edges, [0, 1, 2, 3, 4])
    # test values outside [0, 4] count in the end bins: 10 → last, −1 → first
    x = fe.transform([np.array([0.0, 0.5, 1.5, 3.9, 10.0, -1.0]), np.array([0.0, 1.0])])
    np.testing.assert_allclose(x[0], [3 / 6, 1 / 6, 0, 2 / 6])
    np.testing.assert_allclose(x[1], [0.5, 0.5, 0, 0])
    assert HistFE(1000).fit([np.arange(5.0)]).transform([np.arange(5.0)]).shape == (1, 1000)


REFERENCE = Path(__file__).parents[2] / "fixtures" / "docmia_grid" / "reference.json"


def _grid_on_parts(tmp_path, docs_by_context, labels, cfg, split):
    """The job's grid (jobs/parts/doc_mia/grid.py) on doc_stats part files written from in-memory stats; `split` cuts the
    documents into parts. Ray-free: the per-part calls run in a plain loop."""
    import pyarrow as pa

    from jobs.parts.doc_mia.grid import run_grid_on_parts
    from curation.io.outputs import Location
    from scoring.audits.docmia.protocol import make_folds
    from scoring.audits.docmia.stats import DOC_STATS_SCHEMA

    dest = Location(tmp_path)
    labels = np.asarray(labels)
    folds = make_folds(labels, cfg.k, cfg.seed)
    contexts = sorted(docs_by_context)
    n = labels.size
    ids = [f"doc{i:03d}" for i in range(n)]
    parts, vocab = {}, 0
    for index, (lo, hi) in enumerate(zip([0, *split], [*split, n])):
        rows = [{"id": ids[i], "context": c, "n_windows": 1, "error": None,
                 **{k: docs_by_context[c][i][k] for k in ("token_ids", "lp", "lp_max")},
                 "p_sum": None if docs_by_context[c][i].get("p_sum") is None else list(docs_by_context[c][i]["p_sum"])}
                for i in range(lo, hi) for c in contexts]
        dest.write_parquet(f"doc_stats.parquet/part-{index:05d}.parquet",
                           pa.Table.from_pylist(rows, schema=DOC_STATS_SCHEMA))
        parts[index] = {ids[i]: int(folds[i]) for i in range(lo, hi)}
        for r in rows:
            vocab = max(vocab, max(r["token_ids"]) + 1, len(r["p_sum"] or []))
    baseline = {c: np.asarray([np.mean(d["lp"]) for d in docs_by_context[c]]) for c in contexts}
    records, oof = run_grid_on_parts(dest, parts, labels, folds, baseline, cfg, contexts, vocab)
    return records, oof, folds


def test_grid_on_parts_equals_the_in_memory_grid_it_replaced(tmp_path):
    """Against golden output of the first version's in-memory run_grid (tests/fixtures/docmia_grid/make_reference.py
    at commit a3fa021), on seeded synthetic stats: same folds, every record and every out-of-fold score."""
    import json

    from scoring.audits.docmia.protocol import GridConfig

    ref = json.loads(REFERENCE.read_text())
    docs = {int(c): d for c, d in ref["docs"].items()}
    cfg = GridConfig(**ref["config"])
    records, oof, folds = _grid_on_parts(tmp_path, docs, ref["labels"], cfg, split=[5, 11])
    assert folds.tolist() == ref["folds"]
    assert sorted(oof) == sorted(ref["oof"])
    for col, want in ref["oof"].items():
        np.testing.assert_allclose(oof[col], want, rtol=0, atol=1e-12, err_msg=col)
    assert len(records) == len(ref["records"])
    for got, want in zip(records, ref["records"]):
        assert (got["normalization"], got["features"], got["context"]) == (
            want["normalization"], want["features"], want["context"])
        for key in ("auc_mean", "auc_std", "tpr_at_1_fpr_mean", "tpr_at_10_fpr_mean"):
            assert got[key] == pytest.approx(want[key], abs=1e-12), (got["normalization"], got["features"], key)


def test_grid_uses_training_folds_only_and_separates_an_easy_split(tmp_path):
    from scoring.audits.docmia.protocol import GridConfig, make_folds
    from scoring.reports.doc_mia_page import report_table

    rng = np.random.default_rng(0)
    docs, labels = [], []
    for i in range(20):
        member = i % 2
        ids = rng.integers(0, 50, size=300)
        lp = rng.normal(-2.0 if member else -3.0, 1.0, size=299).clip(max=0)
        psum = rng.random(50) * 299 / 25
        docs.append({"token_ids": ids.tolist(), "lp": lp.tolist(), "lp_max": np.zeros(299).tolist(), "p_sum": psum})
        labels.append(member)
    folds = make_folds(np.array(labels), 4, 0)
    assert sorted(np.bincount(folds).tolist()) == [5, 5, 5, 5]
    records, oof, folds2 = _grid_on_parts(tmp_path, {16: docs}, labels, GridConfig(k=4, n_trees=20, hist_bins=50),
                                          split=[7])
    assert (folds == folds2).all()
    assert len(records) == 1 + 5 * 2  # baseline + 5 normalisations × 2 feature sets
    by = {(r["normalization"], r["features"]): r for r in records}
    assert by[("NoNorm", "AggFE")]["auc_mean"] > 0.9
    assert all(np.isfinite(v).all() for v in oof.values())
    table = report_table(records)
    assert "MaxNorm-GP" in table and "C=16" in table
    with pytest.raises(ValueError, match="at least 5 documents per class"):
        make_folds(np.array(labels[:8]), 5, 0)


def test_fold_references_are_the_training_folds_sums():
    """Per-part fold sums added up give, for fold f, exactly tf_reference/gp_reference over every other fold."""
    import pyarrow as pa

    from scoring.audits.docmia.grid import add_sums, fold_references, fold_sums
    from scoring.audits.docmia.stats import DOC_STATS_SCHEMA

    docs = [dict(TRAIN[0], lp_max=[0.0] * 3), dict(TRAIN[1], lp_max=[0.0]),
            {"token_ids": [3, 3, 0], "lp": [0.0, 0.0], "lp_max": [0.0, 0.0], "p_sum": [0.0, 0.0, 1.0, 1.0]}]
    tables = [pa.Table.from_pylist([{"id": f"d{i}", "context": 8, **d, "n_windows": 1, "error": None}],
                                   schema=DOC_STATS_SCHEMA) for i, d in enumerate(docs)]
    fold_of = {"d0": 0, "d1": 0, "d2": 1}
    total = {}
    for t in tables:
        add_sums(total, fold_sums(t, fold_of, 2, 4, ["tf", "gp"]))
    refs = fold_references(total, 2)[8]
    np.testing.assert_array_equal(refs["tf"][1], tf_reference([d["token_ids"] for d in docs[:2]], 4))
    np.testing.assert_array_equal(refs["tf"][0], tf_reference([docs[2]["token_ids"]], 4))  # counts 1,0,0,2 → 1/3, …
    np.testing.assert_allclose(refs["gp"][1], gp_reference([d["p_sum"] for d in docs[:2]], [3, 1], 4))
    np.testing.assert_allclose(refs["gp"][0], [0.25, 0.25, 0.5, 0.5])  # [0,0,1,1]/2 positions; unseen → 0.5/2


def test_gp_scorer_sums_the_full_distribution_once_per_predicted_position():
    torch = pytest.importorskip("torch")
    from transformers import GPT2Config, GPT2LMHeadModel

    from scoring.audits.docmia.stats import GPScorer

    torch.manual_seed(0)
    lm = GPT2LMHeadModel(GPT2Config(vocab_size=40, n_positions=32, n_embd=16, n_layer=1, n_head=2)).eval()
    ids = torch.randint(0, 40, (1, 20))
    short = GPScorer(lm, context=32, stride=31).score([ids[0].tolist()])[0]
    with torch.no_grad():
        direct = torch.softmax(lm(ids).logits[0, :-1].float(), -1).sum(0).numpy()
    np.testing.assert_allclose(short["p_sum"], direct, rtol=1e-5, atol=1e-6)
    long_ids = torch.randint(0, 40, (75,)).tolist()
    res = GPScorer(lm, context=8, stride=7, max_batch_size=4).score([long_ids, long_ids[:30]])
    for r, n in zip(res, (75, 30)):
        assert len(r["lp"]) == n - 1 and r["n_windows"] > 1
        assert float(np.sum(r["p_sum"])) == pytest.approx(n - 1, rel=1e-6)  # one distribution per prediction
