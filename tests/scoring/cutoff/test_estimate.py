"""From a rows table to report.json's answers (scoring/cutoff/estimate.py): one answer per source and detector, the
estimator chosen per source, the differential with a reference model, and the release dates a cutoff implies."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from scoring.cutoff.breakpoint import CutoffSettings
from scoring.cutoff.estimate import estimate_table, member_window
from scoring.cutoff.periods import month_index, month_label

FAST = CutoffSettings(permutations=999, bootstrap=200)


def rows(rng, *, sources=(("se", 10), ("arxiv", None)), months=20, n=15, ref=False):
    out = []
    for source, at in sources:
        for t in range(months):
            for k in range(n):
                step = 0.5 if at is not None and t <= at else 0.0
                drift = -0.03 * t  # newer text is harder for every model
                r = {"id": f"{source}:{t}:{k}", "date": f"{month_label(month_index(2021, 1) + t)}-02",
                     "period": month_label(month_index(2021, 1) + t), "source": source, "group": None,
                     "loss": step + drift + rng.normal(0, 0.3), "zlib": rng.normal(0, 1)}
                if ref:
                    r["ref:loss"] = 2 * drift + rng.normal(0, 0.05)
                    r["ref:zlib"] = rng.normal(0, 1)
                out.append(r)
    return pa.Table.from_pylist(out)


def test_one_answer_per_source_and_detector():
    rep = estimate_table(rows(np.random.default_rng(0)), settings=FAST)
    assert [s["source"] for s in rep["sources"]] == ["arxiv", "se"]  # sorted: the same order however parts fell
    se = rep["sources"][1]
    assert se["detector"] == "loss" and se["cutoff"] == "2021-11" and se["estimator"] == "new_documents"
    assert set(se["detectors"]) == {"zlib"} and se["detectors"]["zlib"]["cutoff"] is None
    assert rep["sources"][0]["cutoff"] is None  # arxiv: no step, only the drift
    assert rep["source"] == "arxiv" and rep["detector"] == "loss"  # the top level is the first source's first
    assert rep["settings"]["alpha"] == 0.01


def test_columns_choose_the_first_detector():
    rep = estimate_table(rows(np.random.default_rng(0)), columns=["zlib", "loss"], settings=FAST)
    assert rep["detector"] == "zlib" and set(rep["detectors"]) == {"loss"}


def test_the_differential_removes_what_every_model_sees():
    """The reference's scores fall with the months (harder text); target minus reference is what the estimate
    reads, and the report says so."""
    rep = estimate_table(rows(np.random.default_rng(1), ref=True), settings=FAST)
    se = rep["sources"][1]
    assert se["differential"] and se["cutoff"] == "2021-11"
    # the differential's per-month scores rise where the raw ones fall (0.03 a month, less twice that)
    first, last = se["per_period"][12]["score"], se["per_period"][-1]["score"]
    assert last > first


def test_groups_choose_the_versions_estimator_per_source():
    rng = np.random.default_rng(2)
    recs = []
    for g in range(20):
        base = rng.normal()
        for t in range(8):
            recs.append({"id": f"w{g}@{t}", "date": month_label(month_index(2020, 1) + t),
                         "period": month_label(month_index(2020, 1) + t), "source": "wiki", "group": f"w{g}",
                         "loss": base - 0.3 * abs(t - 5) + rng.normal(0, 0.1)})
    recs += [{"id": f"n{k}", "date": "2020-01", "period": "2020-01", "source": "news", "group": None,
              "loss": rng.normal()} for k in range(10)]
    rep = estimate_table(pa.Table.from_pylist(recs), settings=FAST)
    by = {s["source"]: s for s in rep["sources"]}
    assert by["wiki"]["estimator"] == "versions" and by["wiki"]["cutoff"] == "2020-06"
    assert by["news"]["estimator"] == "new_documents" and "not_tested" in by["news"]
    with pytest.raises(ValueError, match="group"):
        estimate_table(pa.Table.from_pylist(recs), estimator="versions", settings=FAST)


def test_rows_without_a_source_are_one_curve():
    t = rows(np.random.default_rng(3), sources=(("x", 8),))
    t = t.set_column(t.schema.get_field_index("source"), "source", pa.array([None] * t.num_rows, pa.string()))
    rep = estimate_table(t, settings=FAST)
    assert rep["source"] == "all" and len(rep["sources"]) == 1


def test_member_window():
    assert member_window(["2018-02", "2018-05"], 2) == {"member_before": "2018-01-01",
                                                        "nonmember_after": "2018-08-01"}
    assert member_window(["2018-02", "2018-05"], 0) == {"member_before": "2018-03-01",
                                                        "nonmember_after": "2018-06-01"}
    assert member_window(None, 2) is None
    with pytest.raises(ValueError):
        member_window(["2018-02", "2018-05"], -1)
