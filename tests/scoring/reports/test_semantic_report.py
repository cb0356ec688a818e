"""scoring/reports/semantic_report.py: the words an item and its passage share are marked in both, passages are
escaped in report.html and report.md, and the semantic section joins the verbatim report or stands alone (--n 0)."""
from __future__ import annotations

from scoring.reports.html import Marked, Page, Section, render
from scoring.reports.semantic_report import plot_semantic, shared_spans, with_semantic

ITEM = "At the fair, Adaeze bought 964 pencils. <script>alert(1)</script> How many pencils are left?"
PASSAGE = "Worksheet: Adaeze, at a fair, got 964 pencils; how many pencils are left now? <b>end</b>"


def block(flagged_items, threshold=0.7, rate=None) -> dict:
    null = None if rate is None else {"n": 200, "flagged": 2, "path": "null.jsonl"}
    return {"n": 4, "flagged": len(flagged_items), "share": len(flagged_items) / 4, "share_ci": [0.05, 0.7],
            "threshold": threshold, "expected_false_flag_rate": rate, "false_flag_upper_bound": rate and 0.03,
            "null": null, "threshold_reason": "no --null given: not yet calibrated", "top_k": 5,
            "embedder": {"name": "minilm", "path": "/m/all-MiniLM-L6-v2", "weights_digest": "ab" * 32},
            "verifier": {"cosine_floor": 0.5, "abstain_cosine": 0.9, "weights": {"numbers": 3.0, "entities": 2.0},
                         "small_number_max": 10, "small_number_weight": 1.0, "min_weight": 4.0},
            "window": {"size": 40, "stride": 20, "how": "2 x the median item length"},
            "counts": {"corpus_files": 2, "corpus_documents": 30, "corpus_quarantined": 1, "windows": 77,
                       "corpus_reasons": {"bad_json": 1}},
            "histogram": {"bins": 10, "cosine": {"flagged": [0] * 9 + [1], "unflagged": [0] * 8 + [3, 0]},
                          "decision": {"flagged": [0] * 9 + [1], "unflagged": [3] + [0] * 9}},
            "flagged_items": flagged_items}


def flagged_item() -> dict:
    return {"id": "q<1>", "item": ITEM, "passage": PASSAGE, "doc_id": "doc-7", "cosine": 0.93,
            "decision_score": 1.0, "verifier_score": 1.0, "abstain": False, "start_word": 0, "char_start": 12,
            "char_end": 95}


def report(**kw) -> dict:
    return {"inputs": {"benchmark": "b.jsonl", "corpus": "c/"}, "verbatim": "not run: --n 0",
            "counts": {"rows_in": 5, "rows_scored": 4, "rows_quarantined": 1}, "semantic": block(**kw)}


def test_shared_words_are_marked_in_both_texts():
    item_spans, passage_spans = shared_spans(ITEM, PASSAGE)
    # a lone shared word is marked when it is an anchor (a name); runs of 2+ words whatever they are, joined
    assert [ITEM[a:b] for a, b in item_spans] == ["Adaeze", "964 pencils", "How many pencils are left"]
    assert [PASSAGE[a:b] for a, b in passage_spans] == ["Adaeze", "964 pencils; how many pencils are left"]


def test_the_page_escapes_every_passage_and_shows_the_figure(tmp_path):
    r = report(flagged_items=[flagged_item()])
    (tmp_path / "semantic.png").write_bytes(plot_semantic(r["semantic"]))
    md, page = with_semantic("", None, r, tmp_path)
    html = render(page)
    assert "<script>" not in html and "<b>end</b>" not in html
    assert "&lt;script&gt;" in html and "&lt;b&gt;end&lt;/b&gt;" in html and "<mark>" in html
    assert 'src="data:image/png;base64,' in html and "not calibrated" in html  # the uncalibrated warning
    r = report(flagged_items=[flagged_item()])
    r["semantic"] |= {"threshold_source": "default", "expected_false_flag_rate": 0.007, "false_flag_upper_bound": 0.013,
                      "threshold_reason": "no --null given: the default threshold, calibrated on the study's null"}
    md, page = with_semantic("", None, r, tmp_path)
    assert "give --null" in render(page) and "0.7%" in md and "study" in md
    assert "<script>" not in md and "&lt;b&gt;end&lt;/b&gt;" in md and "# Tidemark overlap (rephrased items)" in md
    assert page.headline.startswith("1 of 4 benchmark items (25.0%")
    cells = [c for s in page.sections for b in s.blocks if hasattr(b, "rows") for row in b.rows for c in row]
    assert any(isinstance(c, Marked) and c.text == PASSAGE for c in cells)


def test_the_section_joins_a_verbatim_report_with_its_calibrated_threshold(tmp_path):
    r = report(flagged_items=[], threshold=0.5, rate=0.01)
    verbatim = Page(kind="corpus overlap", headline="2 of 4 rows", sections=[Section("Shares")],
                    files=[("rows.parquet", "rows")])
    md, page = with_semantic("# Tidemark overlap\n", verbatim, r, tmp_path)
    assert md.startswith("# Tidemark overlap\n\n## Rephrased items")
    assert "expected false-flag rate of 1.0% (at most 3.0%" in md
    assert page.headline == "2 of 4 rows" and [s.title for s in page.sections][0] == "Shares"
    assert "semantic.parquet" in [f for f, _ in page.files] and not page.warnings
    assert "No item reached the threshold." in render(page)


def test_a_judge_that_never_says_yes_is_warned_about():
    from scoring.reports.semantic_report import judge_warning

    page = Page(kind="k", headline="h", summary="s", facts=[], sections=[], warnings=[], files=[])
    never = judge_warning(page, {"judged": 8, "verdicts": {"no": 3, "unparsed": 5}})
    assert len(never.warnings) == 1 and "none of the 8 pairs" in never.warnings[0] and "5 answers" in never.warnings[0]
    assert judge_warning(page, {"judged": 8, "verdicts": {"yes": 1, "no": 7}}).warnings == []
    assert judge_warning(page, None).warnings == [] and judge_warning(page, {"judged": 0, "verdicts": {}}).warnings == []
