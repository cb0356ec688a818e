"""`tidemark cutoff`'s report content (scoring/reports/cutoff_page.py), from answers the real estimators give on a
small synthetic rows table: a source with a cutoff, one of pure noise, Wikipedia-like versions peaking at one month,
and one with too few months to test. The sentences say the months, CI ends and p; the page escapes what came from
the data and embeds the curve."""
from __future__ import annotations

import copy
import re

import numpy as np
import pyarrow as pa
import pytest

from report_pages import assert_self_contained
from scoring.cutoff.breakpoint import CutoffSettings
from scoring.cutoff.estimate import estimate_table
from scoring.cutoff.periods import month_index, month_label
from scoring.reports.cutoff_page import (conclusion, p_text, plot_curve, report_markdown, report_page, verdict,
                                         warnings)
from scoring.reports.html import render, stamped

FAST = CutoffSettings(permutations=199, bootstrap=100)  # p's floor is 1/200 = 0.005
EVIL = "tiny <b>x</b>"  # a source name as a user may write it: shown as text, never as markup


def _row(source, month, k, score, group=None, rng=None) -> dict:
    period = month_label(month)
    return {"id": f"{source}:{period}:{k}", "date": f"{period}-15", "period": period, "source": source,
            "group": group, "loss": score, "min_k_pp@k=0.2": score + rng.normal(0, 0.3)}


def rows_table(seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    start, out = month_index(2017, 1), []
    for t in range(24):  # 2017-01..2018-12
        for k in range(15):
            step = 0.6 if t <= 14 else 0.0  # read up to 2018-03
            out.append(_row("stackexchange", start + t, k, step + rng.normal(0, 0.3), rng=rng))
            out.append(_row("arxiv", start + t, k, rng.normal(0, 0.3), rng=rng))
    v0 = month_index(2019, 1)
    for g in range(30):  # 30 articles × 12 monthly versions, the 2019-06 ones most familiar
        level = rng.normal(0, 1)
        for t in range(12):
            bump = 0.8 * np.exp(-abs(t - 5) / 1.0)
            out.append(_row("wikipedia", v0 + t, 0, level + bump + rng.normal(0, 0.2), group=f"article-{g}", rng=rng))
    for t in range(4):  # a break needs 3 months each side
        for k in range(10):
            out.append(_row(EVIL, start + t, k, rng.normal(0, 0.3), rng=rng))
    return pa.Table.from_pylist(out)


@pytest.fixture(scope="module")
def report() -> dict:
    return {**estimate_table(rows_table(), settings=FAST), "model": "runs/tiny-model", "ref_model": None,
            "meaning": "p_no_cutoff is the chance of a drop at least this large."}


def source(report: dict, name: str) -> dict:
    return next(s for s in report["sources"] if s["source"] == name)


def test_a_cutoff_in_one_sentence(report):
    se = source(report, "stackexchange")
    assert se["cutoff"] == "2018-03"
    lo, hi = se["cutoff_ci"]
    assert lo <= "2018-03" <= hi
    assert conclusion(se) == (f"stackexchange: the model's familiarity drops after 2018-03 (95% CI {lo} to {hi}; "
                              f"p ≤ 0.005 that there is no drop); texts written after {hi} can serve as non-members.")


def test_no_cutoff_says_the_dates_cannot_label(report):
    ax = source(report, "arxiv")
    assert ax["cutoff"] is None and ax["p_no_cutoff"] >= ax["alpha"]
    text = conclusion(ax)
    assert text.startswith("arxiv: no drop in familiarity between 2017-01 and 2018-12 (p = ")
    if ax["best_break"]:
        assert f"that there is none; best candidate {ax['best_break']})" in text
    assert text.endswith("these dates cannot label members and non-members.")
    assert verdict(ax) == "no drop"


def test_versions_name_the_most_familiar_month(report):
    wiki = source(report, "wikipedia")
    assert wiki["estimator"] == "versions" and wiki["cutoff"] == "2019-06"
    lo, hi = wiki["cutoff_ci"]
    assert conclusion(wiki) == (f"wikipedia: the model finds the 2019-06 versions most familiar (95% CI {lo} to {hi}; "
                                "p ≤ 0.005 that no month stands out): its effective cutoff for this source is about "
                                "2019-06.")


def test_too_few_months_is_not_tested(report):
    tiny = source(report, EVIL)
    assert tiny["p_no_cutoff"] is None
    assert conclusion(tiny) == f"{EVIL}: not tested: {tiny['not_tested']}."
    assert "4 month(s)" in conclusion(tiny) and verdict(tiny) == "not tested"


def test_p_is_never_overstated():
    assert p_text(1 / 200, 199) == "p ≤ 0.005"  # at its floor: no resample reached the statistic
    assert p_text(1 / 10000, 9999) == "p ≤ 0.0001"
    assert p_text(0.0003, 9999) == "p < 0.001"
    assert p_text(0.004, 9999) == "p = 0.004"
    assert p_text(0.41, 999) == "p = 0.41"
    assert p_text(None) == "p not computed"


def test_differential_and_versions_without_a_cutoff_in_words():
    per_period = [{"period": "2016-01"}, {"period": "2024-06"}]
    base = {"source": "wiki", "estimator": "versions", "cutoff": None, "p_no_cutoff": 0.41, "permutations": 999,
            "best_break": "2019-03", "per_period": per_period, "differential": True}
    text = conclusion(base)
    assert text.startswith("wiki (target minus reference model): no month's versions stand out between 2016-01 and "
                           "2024-06 (p = 0.41 that none does; best candidate 2019-03)")
    nd = conclusion({**base, "estimator": "new_documents", "differential": False})
    assert nd.startswith("wiki: no drop in familiarity between 2016-01 and 2024-06 (p = 0.41 that there is none; "
                         "best candidate 2019-03): the model may have read all of this range or none of it")
    # a detector's answer under `detectors` has no source: the caller names it
    assert conclusion({**base, "source": None}, name="arxiv").startswith("arxiv (target minus")


def test_the_curve_is_a_png(report):
    png = plot_curve(report)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
    one = {**source(report, "stackexchange"), "source": "a $x^2$ name"}  # literal text, not mathtext
    assert plot_curve({**one, "sources": [one]}).startswith(b"\x89PNG")


def test_markdown_leads_with_the_answers_and_says_what_it_does_not_show(report):
    md = report_markdown(report)
    first = conclusion(report["sources"][0])
    assert md.index(f"**{first}**") < md.index("## ")
    for s in report["sources"]:
        assert conclusion(s) in md
    assert "| month | n | score | 95% CI |" in md and "| 2018-03 | 15 |" in md
    assert "| min_k_pp@k=0.2 | new_documents |" in md  # the other detector's answer
    assert "## What this does not show" in md and "not the probability that the date is right" in md
    assert "--ref-model" in md and "quarantined" not in md  # no counts in a unit test: no counts line
    counted = report_markdown({**report, "counts": {"in": 1000, "scored": 990, "quarantined": 10,
                                                   "reasons": {"bad_date": 10}}})
    assert "1,000 rows in, 990 scored, 10 quarantined (bad_date 10)" in counted


def test_warnings_name_what_changes_the_reading(report):
    edged = copy.deepcopy(report)
    source(edged, "wikipedia")["at_range_edge"] = True
    said = warnings({**edged, "ref_model": "runs/ref", "counts": {"in": 100, "scored": 90, "quarantined": 10}})
    assert len(said) == 2
    assert said[0].startswith("wikipedia: the most familiar month is at the range's edge")
    assert said[1].startswith("10 of 100 dated rows could not be dated or scored")
    assert any("--ref-model" in w for w in warnings(report))  # no reference model: the gentle note


def test_the_page_opens_with_the_answers_and_escapes_the_data(report, tmp_path):
    (tmp_path / "curve.png").write_bytes(plot_curve(report))
    (tmp_path / "rows.parquet").write_bytes(b"")
    page = report_page(report, tmp_path)
    assert page.headline == conclusion(report["sources"][0])
    assert all(conclusion(s) in page.summary for s in report["sources"][1:])
    (tmp_path / "report.html").write_text(render(stamped(page)))
    doc = assert_self_contained(tmp_path, "data:image/png;base64,", "What this does not show", "min_k_pp@k=0.2",
                                "runs/tiny-model", "Read this first")
    assert "<b>x</b>" not in doc and "tiny &lt;b&gt;x&lt;/b&gt;: not tested" in doc
    body = doc[doc.index("<body>"):]
    headline = re.search(r"<h1[^>]*>([^<]*)</h1>", body).group(1)
    assert headline.startswith("arxiv: no drop in familiarity between 2017-01 and 2018-12")
    assert body.index("<h1") < body.index("Read this first") < body.index("<table")
    assert "<tr class=best><th scope=row>2018-03</th>" in doc  # the cutoff month stands out in its table
    files = [name for name, _ in page.files]
    assert files == ["rows.parquet", "curve.png", "run.json"]  # what is there, and run.json written next
