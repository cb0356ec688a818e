"""report.html: one renderer (scoring/reports/html.py) for every job's page. Pure tests (no Ray, no model): what
goes in is escaped, plots are embedded, nothing is fetched, the headline comes first and every method has its row;
then the same page opened in headless Chromium, where it is installed."""
from __future__ import annotations

import base64
import re

import numpy as np
import pytest

from report_pages import rendered_text, screenshot
from jobs.kit.report_out import command_line
from jobs.kit.report_out import write_page
from scoring.reports.html import Code, Figure, Page, Row, Section, Table, num, pct_ci, render

METHODS = ["loss", "min_k@k=0.2", "zlib", "pac@k1=0.05,k2=0.3,n=5,ratio=0.3,seed=0"]
HEADLINE = "An estimated 60% [39%, 82%] of the audited set was seen in training."


@pytest.fixture
def plot(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1])
    path = tmp_path / "roc_all.png"
    fig.savefig(path, dpi=60)
    plt.close(fig)
    return path


def page(plot=None, **overrides) -> Page:
    rows = [Row([Code(m), 0.5 + i / 10, "71.3%"], "best" if i == 1 else "") for i, m in enumerate(METHODS)]
    fields = dict(
        kind="corpus audit", headline=HEADLINE, summary="Measured on 1,234 snippets.",
        facts=[("model", Code("runs/model")), ("rows", 1234)],
        sections=[Section("Every detector", ["AUC is the chance …", Table(["detector", "AUC", "TPR"], rows)]),
                  Section("ROC curves", [Figure(plot, "ROC, all rows")] if plot else [])],
        warnings=["The benchmark is biased."], files=[("report.md", "the numbers as Markdown")],
        command="tidemark audit --target books/", versions={"tidemark": "0.1.0"}, created="2025-01-01 00:00 UTC")
    return Page(**{**fields, **overrides})


def test_every_string_is_escaped():
    evil = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'
    doc = render(page(headline=evil, facts=[(evil, Code(evil))], warnings=[evil],
                      sections=[Section(evil, [evil, Table([evil], [[evil]], evil)])], command=evil))
    assert "<script" not in doc.lower() and "<img src=x" not in doc
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;img" in doc


def test_plots_are_embedded_and_nothing_is_fetched(plot):
    doc = render(page(plot))
    assert "data:image/png;base64," + base64.b64encode(plot.read_bytes()).decode() in doc
    assert not re.search(r"https?://", doc)
    for fetching in ("<script", "@import", "url(", "<link", "@font-face", "<iframe"):
        assert fetching not in doc.lower(), fetching
    assert re.findall(r'src="([^"]*)"', doc) and all(s.startswith("data:image/png;base64,")
                                                     for s in re.findall(r'src="([^"]*)"', doc))


def test_the_headline_comes_first_and_every_method_has_a_row():
    doc = render(page())
    body = doc[doc.index("<body>"):]
    assert body.index(HEADLINE) < min(body.index(t) for t in ("<table", "<h2", "Read this first"))
    assert re.search(r"<h1[^>]*>([^<]*)</h1>", body).group(1) == HEADLINE.replace("'", "&#x27;")
    for m in METHODS:
        assert f"<th scope=row><code>{m}</code></th>" in doc, m
    assert "<tr class=best><th scope=row><code>min_k@k=0.2</code>" in doc


def test_numbers_are_formatted_and_aligned():
    assert [num(x) for x in (1234, 0.91234, float("nan"), np.int64(7), None)] == ["1,234", "0.912", "–", "7", "–"]
    assert pct_ci(0.6, [0.39, 0.82], 0) == "60% [39%, 82%]"
    doc = render(page(sections=[Section("t", [Table(["a", "b", "c"], [["row", 0.5, "0.976 [0.96, 0.99]"]])])]))
    assert "<td class=num>0.500</td><td class=num>0.976 [0.96, 0.99]</td>" in doc


def test_a_missing_plot_is_named_not_fatal(tmp_path):
    doc = render(page(sections=[Section("ROC", [Figure(tmp_path / "roc_7.png", "ROC, bucket 7")])]))
    assert "roc_7.png was not written" in doc


def test_write_page_fills_in_versions_and_date(tmp_path):
    path = write_page(tmp_path, page(versions={}, created=""), clean=lambda s: s.replace("books", "[REDACTED]"))
    doc = path.read_text()
    assert path.name == "report.html" and "transformers" in doc and "pyarrow" in doc and "UTC" in doc
    assert "[REDACTED]/" in doc and "books/" not in doc


def test_command_line_redacts_credentials(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnop")
    line = command_line(["/opt/venv/bin/tidemark", "evaluate", "--benchmark", "b c.jsonl", "--hf-token", "s3cr3t-value",
                         "--api-key=k3y-value", "--set", "source.aws_secret_access_key=XYZ12345",
                         "--model", "s3://user:pw12345@bucket/model", "--note", "hf_abcdefghijklmnop"])
    assert line.startswith("tidemark evaluate --benchmark 'b c.jsonl' --hf-token '[REDACTED]'")
    for secret in ("s3cr3t-value", "k3y-value", "XYZ12345", "pw12345", "hf_abcdefghijklmnop"):
        assert secret not in line


def test_the_evaluation_page_warns_about_a_biased_benchmark(tmp_path):
    from curation.shift.audit import FLAG_AUC
    from scoring.reports.evaluation_page import BLIND_FLAG_AUC, evaluation_page

    assert BLIND_FLAG_AUC == FLAG_AUC
    records = [{"method": m.split("@")[0], "column": m, "bucket": b, "n": 100, "n_member": 50, "auc": auc,
                "auc_ci": [auc - 0.05, auc + 0.05], "tpr_at_1_fpr": 0.2, "tpr_at_5_fpr": 0.4, "n_nan": 0,
                "calibrated": {"threshold": -3.2, "accuracy": 0.7, "tpr": 0.6, "fpr": 0.2}}
               for b in ("all", "32") for m, auc in zip(METHODS, (0.7, 0.9, 0.6, 0.3))]
    run_info = {"benchmark": "bench.jsonl", "model": "m", "counts": {"in": 203, "scored": 200, "quarantined": 3}}
    p = evaluation_page(tmp_path, records, run_info, {"all": 0.75, "32": 0.5}, [], None)
    assert p.headline.startswith("The best detector, min_k@k=0.2, tells members from non-members with AUC 0.90")
    assert "already reaches AUC 0.75" in p.summary
    assert any("biased" in w for w in p.warnings) and any("3 of 203 rows" in w for w in p.warnings)
    doc = render(p)
    for m in METHODS:
        assert doc.count(f"<code>{m}</code>") >= 2, m  # the per-bucket table and the threshold table
    assert "blind baseline (no model)" in doc


def test_the_audit_page_states_the_corrected_share_with_its_interval(tmp_path):
    from scoring.reports.audit_page import audit_page

    report = {
        "target": "books/", "model": "m", "detector": "min_k@k=0.2", "mode": "documents",
        "calibration": {"source": "members a, non-members b", "objective": "accuracy", "target_fpr": None,
                        "threshold": -3.1, "n_members": 40, "n_non_members": 40, "tpr": 0.8, "fpr": 0.1,
                        "accuracy": 0.85, "auc": 0.9},
        "corpus": {"n_documents": 2, "n_snippets": 20, "flagged_share": 0.52, "flagged_share_ci": [0.4, 0.64],
                   "flagged_share_ci_method": "normal", "mean_rate": 0.5, "mean_rate_ci": [0.3, 0.7],
                   "median_rate": 0.5, "share_of_documents_over_50pct": 0.5,
                   "fpr_corrected": {"estimate": 0.6, "ci": [0.39, 0.82], "observed_rate": 0.52, "tpr": 0.8,
                                     "fpr": 0.1, "ci_population": [0.3, 0.9]}},
        "counts": {"target": {"documents_in": 2, "documents_scored": 2, "documents_quarantined": 0,
                              "snippets_planned": 20, "snippets_scored": 20, "snippets_quarantined": 0}},
        "documents": [{"id": f"doc{i}<b>", "n_snippets": 10, "n_flagged": 5 + i, "rate": 0.5 + i / 10,
                       "rate_ci": [0.2, 0.8], "max_score": -1.0 - i,
                       "top_snippets": [{"score": -1.0 - i, "flagged": True, "start_word": 0, "text": "Once upon"}]}
                      for i in range(2)],
        "warnings": ["only 40 calibration snippets"], "plots": ["scores_hist.png", "rates_hist.png"]}
    p = audit_page(report, tmp_path)
    assert p.headline == HEADLINE
    doc = render(p)
    assert "doc1&lt;b&gt;" in doc and "Once upon" in doc and "[30%, 90%]" in p.summary
    assert "only 40 calibration snippets" in doc and "rates_hist.png was not written" in doc


def test_chromium_renders_the_headline_and_every_method(tmp_path, plot):
    path = write_page(tmp_path, page(plot))
    text = rendered_text(path, tmp_path)
    assert text.index(HEADLINE) < text.index("Every detector")
    for m in METHODS:
        assert re.search(re.escape(m) + r" 0\.\d{3} 71\.3%", text), m  # the method's row, as a reader sees it
    width, height = screenshot(path, tmp_path / "page.png", tmp_path)
    assert (width, height) == (1200, 2400) and (tmp_path / "page.png").stat().st_size > 20_000
