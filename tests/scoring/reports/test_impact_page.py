"""`tidemark impact`'s report content (scoring/reports/impact_page.py, impact_figure.py), from records the real
statistics give on small synthetic score arrays (jobs/parts/impact/records.split_numbers, scoring/impact/constat.py)
and from hand-written ones whose sentence can be checked word for word: splits with and without reference models,
ConStat inside and above the reference models' range, no leaked item, a real-valued metric, a task name with markup.
"""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest

from jobs.parts.impact.records import split_numbers
from report_pages import assert_self_contained
from scoring.impact.constat import constat
from scoring.reports.html import render, stamped
from scoring.reports.impact_page import (conclusion, is_proportion, plot_task, report_markdown, report_page,
                                         warnings)

FAST = SimpleNamespace(bootstrap=200, permutations=999, seed=0)
EVIL = "tiny <b>x</b>"  # a task name as a file may carry it: shown as text, never as markup
REFS = ["ref-a", "ref-b", "ref-c", "ref-d"]


def bernoulli(rng, p: float, n: int) -> np.ndarray:
    return (rng.random(n) < p).astype(np.float64)


def split_of(clean: int, inp: int, both: int, unmatched: int) -> np.ndarray:
    return np.array(["clean"] * clean + ["input_leaked"] * inp + ["input_and_answer_leaked"] * both
                    + ["unmatched"] * unmatched, dtype=object)


def splits_record(task="gsm8k", model="model-x", with_refs=True, seed=0) -> dict:
    """400 items: 300 clean, 80 question leaked, 20 question and answer leaked, 30 without evidence; the target
    scores the leaked ones much higher, the reference models a little higher (they are a little easier)."""
    rng = np.random.default_rng(seed)
    split = split_of(300, 80, 20, 30)
    target = np.concatenate([bernoulli(rng, 0.5, 300), bernoulli(rng, 0.85, 100), bernoulli(rng, 0.5, 30)])
    refs = np.vstack([np.concatenate([bernoulli(rng, 0.4, 300), bernoulli(rng, 0.5, 100), bernoulli(rng, 0.4, 30)])
                      for _ in range(3)]) if with_refs else None
    rec = {"task": task, "model": model, "metric": "exact_match", "filter": "strict-match",
           **split_numbers(target, split, refs, FAST)}
    if with_refs:
        rec["reference_models"] = REFS[:3]
    return rec


def constat_record(target_ref_right: int, seed: int = 0) -> dict:
    """ConStat on 200 benchmark and 200 reference-benchmark items: four reference models on a line, and a target
    whose benchmark score is 15 points above the line at its reference score (`target_ref_right` of 200)."""
    rng = np.random.default_rng(seed)
    ref_scores = {"ref-a": 0.3, "ref-b": 0.45, "ref-c": 0.6, "ref-d": 0.75}
    bench = {m: bernoulli(rng, s - 0.1, 200) for m, s in ref_scores.items()}
    reference = {m: bernoulli(rng, s, 200) for m, s in ref_scores.items()}
    x = target_ref_right / 200
    reference["target"] = np.array([1.0] * target_ref_right + [0.0] * (200 - target_ref_right))
    bench["target"] = bernoulli(rng, min(x - 0.1 + 0.15, 0.98), 200)
    c = constat(bench, reference, "target", REFS, n_boot=200, seed=0)
    return {"task": "mmlu", "model": "target", "metric": "acc", "n": 200, "full_score": float(bench["target"].mean()),
            "constat_inflation": c["inflation"], "constat_ci": c["ci"], "constat_p": c["p_value"],
            "constat": {**c, "reference_task": "mmlu_rephrased"}}


EXAMPLE = {  # the numbers of the brief's example sentence, by hand
    "task": "gsm8k", "model": "model-x", "metric": "exact_match", "n": 1319, "n_unmatched": 0, "full_score": 0.612,
    "full_ci": [0.585, 0.638], "clean_score": 0.485, "clean_ci": [0.441, 0.529], "full_minus_clean": 0.127,
    "full_minus_clean_ci": [0.09, 0.16], "relative_change": 0.262,
    "splits": [{"split": "clean", "n": 1012, "score": 0.485, "ci_low": 0.441, "ci_high": 0.529, "method": "wilson"},
               {"split": "input_leaked", "n": 307, "score": 0.658, "ci_low": 0.6, "ci_high": 0.71,
                "method": "wilson"}],
    "gap": 0.173, "gap_ci": [0.110, 0.235], "p_value": 0.002, "p_method": "exact (hypergeometric)", "n_leaked": 307,
    "n_clean": 1012, "gap_reason": None, "did": 0.098, "did_ci": [0.031, 0.164], "reference_gap": 0.075,
    "reference_gaps": [0.07, 0.08], "reference_models": ["ref-a", "ref-b"]}


@pytest.fixture(scope="module")
def report() -> dict:
    no_leak = {"task": "arc", "model": "model-x", "metric": "acc",
               **split_numbers(bernoulli(np.random.default_rng(3), 0.6, 120), split_of(120, 0, 0, 0), None, FAST)}
    return {"tasks": [splits_record(), splits_record(EVIL, "model-y", with_refs=False, seed=1), constat_record(120),
                      constat_record(190), no_leak],
            "method": ["constat", "splits"],
            "matching": {"gsm8k": [{"source": "overlap:input", "role": "input", "join": "text", "matched": 370,
                                    "unmatched": 30, "matched_by_id": 12, "matched_by_text": 370}]},
            "counts": {"results_items": 2000, "results_quarantined": 5, "files": []},
            "thresholds": {"input_share": 0.0, "answer_share": 0.2, "detector_fpr": 0.05, "join": "auto"},
            "evidence": [{"name": "overlap:input", "job": "overlap", "role": "input", "path": "runs/overlap",
                          "rule": "share of the question's n-grams found in the corpus > 0"}],
            "settings": {"bootstrap": 200, "permutations": 999, "constat_bootstrap": 200, "seed": 0}}


def test_the_example_sentence_word_for_word():
    assert conclusion(EXAMPLE) == (
        "gsm8k (model-x): 61.2% overall, 48.5% [44.1, 52.9] on the 1,012 clean items; the 307 items whose question "
        "leaked score 17.3 points higher [11.0, 23.5] (p = 0.002), of which 9.8 [3.1, 16.4] remain after the "
        "reference models' gap.")
    lower = conclusion({**EXAMPLE, "gap": -0.05, "gap_ci": [-0.1, 0.01], "did": -0.12, "did_ci": [-0.2, -0.04]})
    beyond = conclusion({**EXAMPLE, "did": 0.2, "did_ci": [0.1, 0.3]})  # the references' gap was negative
    assert "(p = 0.002), difference-in-differences against the reference models +20.0 [+10.0, +30.0]." in beyond
    assert ("score 5.0 points lower [-1.0, 10.0] (p = 0.002), difference-in-differences against the reference "
            "models -12.0 [-20.0, -4.0].") in lower


def test_splits_with_reference_models_from_the_real_statistics(report):
    rec = report["tasks"][0]
    assert rec["gap"] > 0.2 and rec["did"] is not None and is_proportion(rec)
    text = conclusion(rec, 999)
    lo, hi = rec["clean_ci"]
    assert text.startswith(f"gsm8k (model-x): {100 * rec['full_score']:.1f}% overall, {100 * rec['clean_score']:.1f}% "
                           f"[{100 * lo:.1f}, {100 * hi:.1f}] on the 300 clean items; the 100 items whose question "
                           f"leaked score {100 * rec['gap']:.1f} points higher")
    assert "(p < 0.001)" in text  # the exact test has no floor: a strong gap gives a tiny p
    assert f"of which {100 * rec['did']:.1f} [" in text and "remain after the reference models' gap" in text
    assert text.endswith("; 30 items had no evidence and are left out of the split.")


def test_splits_without_reference_models_end_after_the_gap_and_warn(report):
    rec = report["tasks"][1]
    text = conclusion(rec, 999)
    assert "did" not in rec and "reference models" not in text
    assert re.search(r"score \d+\.\d points higher \[\d+\.\d, \d+\.\d\] \(p < 0\.001\); 30 items had no", text)
    said = warnings(report)
    assert any(w.startswith("No reference models") and "a gap alone does not tell leaked items from easier ones" in w
               for w in said)
    assert "5 of 2,005 result rows could not be read and are left out." in said


def test_constat_inside_the_range_and_above_it(report):
    inside, above = report["tasks"][2], report["tasks"][3]
    assert not inside["constat"]["extrapolated"] and above["constat"]["extrapolated_side"] == "above"
    text = conclusion(inside)
    infl, (lo, hi) = inside["constat_inflation"], inside["constat_ci"]
    assert infl > 0.05
    assert text.startswith(f"mmlu (target): {100 * inside['full_score']:.1f}% overall on 200 items; ConStat: "
                           f"{100 * infl:.1f} points above what the reference models predict "
                           f"[{100 * lo:.1f}, {100 * hi:.1f}], p ")
    assert "unreliable" not in text and "split" not in text
    assert "(unreliable: the target's reference-benchmark score is above every reference model's" in conclusion(above)
    assert any(w.startswith("mmlu (target): ConStat: the target's reference-benchmark score is above every")
               for w in warnings(report))
    # ConStat's p at its floor 1/(n_boot + 1) is not overstated
    assert "p ≤ 0.005" in conclusion({**inside, "constat_p": 1 / 201})
    failed = {"task": "t", "model": "m", "metric": "acc", "n": 5, "full_score": 0.4, "constat_reason": "no task."}
    assert conclusion(failed) == "t (m): 40.0% overall on 5 items; ConStat not run: no task."


def test_no_leaked_item(report):
    rec = report["tasks"][4]
    assert rec["gap"] is None and rec["n_leaked"] == 0
    assert conclusion(rec).endswith("on the 120 clean items; no item leaked by the evidence (0 of 120 matched items).")


def test_items_without_evidence_and_every_item_leaked():
    many = {**EXAMPLE, "n_unmatched": 400}
    assert conclusion(many).endswith("; 400 items had no evidence and are left out of the split.")
    said = warnings({"tasks": [many, {**many, "model": "other"}]})
    assert said[0].startswith("gsm8k: 400 of 1,719 items had no evidence") and len(said) == 1  # once per task
    assert warnings({"tasks": [{**EXAMPLE, "n_unmatched": 10}]}) == []  # under 10%: said in the sentence only
    leaked = {**EXAMPLE, "clean_score": None, "clean_ci": None, "gap": None, "gap_ci": None, "p_value": None,
              "n_clean": 0, "n_leaked": 1319, "did": None, "gap_reason": "no clean items: there is no gap to measure"}
    assert conclusion(leaked) == ("gsm8k (model-x): 61.2% overall on 1,319 items; every matched item leaked by the "
                                  "evidence (1,319 of 1,319): there is no clean score to compare with.")


def test_a_real_valued_metric_in_its_own_units():
    rng = np.random.default_rng(5)
    split = split_of(150, 50, 0, 0)
    bleu = np.concatenate([rng.normal(20, 5, 150), rng.normal(30, 5, 50)])
    rec = {"task": "wmt", "model": "m", "metric": "bleu", **split_numbers(bleu, split, None, FAST)}
    assert not is_proportion(rec) and rec["p_method"] == "permutation"
    text = conclusion(rec, 999)
    assert "%" not in text and "points" not in text
    assert f"{rec['full_score']:.3f} overall, {rec['clean_score']:.3f} [" in text
    assert f"score {rec['gap']:.3f} higher [" in text
    assert "(p ≤ 0.001)" in text  # the permutation p at its floor 1/(999 + 1)
    f1 = {"task": "squad", "model": "m", "metric": "f1",  # in [0, 1] but not 0/1 and not an accuracy: plain
          **split_numbers(np.clip(bleu / 40, 0, 1), split, None, FAST)}
    assert not is_proportion(f1) and "%" not in conclusion(f1)
    assert is_proportion({**f1, "metric": "acc_norm"})
    assert plot_task(rec).startswith(b"\x89PNG")


def test_every_record_has_a_png(report):
    for rec in report["tasks"]:
        png = plot_task(rec)
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
    both = {**report["tasks"][0], **{k: v for k, v in report["tasks"][2].items() if k.startswith("constat")}}
    assert "ConStat: " in conclusion(both) and plot_task(both).startswith(b"\x89PNG")  # two panels
    assert plot_task({**report["tasks"][0], "task": "a $x^2$ task"}).startswith(b"\x89PNG")  # literal, not mathtext


def test_markdown_leads_with_the_sentences(report):
    md = report_markdown(report)
    first = conclusion(report["tasks"][0], 999)
    assert md.index(f"**{first}**") < md.index("> **Warning:**") < md.index("## ")
    for rec in report["tasks"]:
        assert conclusion(rec, 999) in md
    assert "| clean (no evidence of a leak) | 300 |" in md and "| no evidence (left out) | 30 |" in md
    assert "| leaked minus clean (the gap) | +" in md and "| difference-in-differences (gap minus theirs) |" in md
    assert "| gsm8k | overlap:input | input | text | 370 | 30 | 12 | 370 |" in md
    assert "## Thresholds and rules" in md and "at most 5% of items the model cannot have seen" in md
    assert "## What these numbers do not show" in md and "Verbatim overlap is not use" in md
    assert "the clean score is not what an uncontaminated model would score on the whole benchmark" in md


def test_the_page_opens_with_the_sentences_and_escapes_the_data(report, tmp_path):
    report = json.loads(json.dumps(report))  # as report.json holds it
    for k, rec in enumerate(report["tasks"]):
        rec["figure"] = f"task_{k:02d}.png"
        (tmp_path / rec["figure"]).write_bytes(plot_task(rec))
    (tmp_path / "report.json").write_text(json.dumps(report))
    (tmp_path / "items.parquet").write_bytes(b"")
    page = report_page(report, tmp_path)
    assert page.headline == conclusion(report["tasks"][0], 999)
    assert all(conclusion(r, 999) in page.summary for r in report["tasks"][1:])
    (tmp_path / "report.html").write_text(render(stamped(page)))
    doc = assert_self_contained(tmp_path, "data:image/png;base64,", "What these numbers do not show", "Read this first",
                                "How the evidence matched the items", "overlap:input")
    assert doc.count("data:image/png;base64,") == len(report["tasks"])
    assert "<b>x</b>" not in doc and "tiny &lt;b&gt;x&lt;/b&gt; (model-y): " in doc
    body = doc[doc.index("<body>"):]
    assert body.index("<h1") < body.index("Read this first") < body.index("<table")
    assert "<tr class=best><th scope=row>clean (no evidence of a leak)</th>" in doc
    files = [name for name, _ in page.files]
    assert files == ["report.json", "items.parquet", *(f"task_{k:02d}.png" for k in range(5)), "run.json"]
