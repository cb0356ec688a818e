"""The suspect-vs-reference set test: the one-sided rank test on one named score column, by hand; and the report
that puts it first."""
from __future__ import annotations

import math

import pyarrow as pa
import pytest

from scoring.detectors import parse_methods
from scoring.stats.set_test import resolve_column, suspect_vs_reference


def table(scores, labels, in_eval=None):
    n = len(scores)
    return pa.table({"id": [str(i) for i in range(n)], "label": labels, "bucket": [None] * n,
                     "in_eval": in_eval or [True] * n, "min_k@k=0.2": scores})


def test_the_rank_test_by_hand():
    # suspect {3, 4} above reference {1, 2}: U = 4 of 4, exact one-sided p = 1 / C(4, 2) = 1/6
    got = suspect_vs_reference(table([3.0, 4.0, 1.0, 2.0], [1, 1, 0, 0]), "min_k@k=0.2")
    assert got["u"] == 4 and got["auc"] == 1.0 and got["p_value"] == pytest.approx(1 / 6)
    assert (got["n_suspect"], got["n_reference"], got["method"]) == (2, 2, "exact")
    assert got["mean_suspect"] == 3.5 and got["mean_reference"] == 1.5


def test_rows_without_a_score_or_out_of_evaluation_are_left_out():
    t = table([3.0, math.nan, 4.0, 1.0, 2.0, 9.0], [1, 1, 1, 0, 0, 0], [True, True, True, True, True, False])
    got = suspect_vs_reference(t, "min_k@k=0.2")
    assert (got["n_suspect"], got["n_reference"], got["p_value"]) == (2, 2, pytest.approx(1 / 6))


def test_the_column_is_named_before_looking():
    methods = parse_methods("loss,min_k,pac@n=2")
    assert resolve_column("min_k", methods) == "min_k@k=0.2"
    assert resolve_column("loss", methods) == "loss"
    with pytest.raises(ValueError, match="names no single score column"):
        resolve_column("zlib", methods)
    with pytest.raises(ValueError, match="names no single score column"):
        resolve_column("min_k", parse_methods("min_k,min_k@k=0.1"))


def test_the_report_leads_with_the_set_test(tmp_path):
    from scoring.reports.evaluation_page import evaluation_page
    from scoring.reports.html import render

    test = suspect_vs_reference(table([3.0, 4.0, 1.0, 2.0], [1, 1, 0, 0]), "min_k@k=0.2")
    records = [{"method": "min_k", "params": {"k": 0.2}, "column": "min_k@k=0.2", "bucket": "all", "n": 4,
                "n_member": 2, "auc": 1.0, "auc_ci": [1.0, 1.0], "tpr_at_1_fpr": 1.0, "tpr_at_5_fpr": 1.0}]
    page = evaluation_page(tmp_path, records, {"set_test": test, "counts": {"in": 4}}, {"all": 0.93}, [], None)
    assert page.headline.startswith("p = 0.167: the model does not score the suspect set as more member-like")
    assert page.summary.startswith("The best detector, min_k@k=0.2")
    html = render(page)
    assert "Set test: suspect vs reference" in html and "Blind baseline on the same two sets (no model): AUC 0.93" in html
    assert "What it does not show" in html
