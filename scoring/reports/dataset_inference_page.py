"""`dataset-inference`'s report content: the conclusion sentence, report.md, report.html's `Page` and the
test_scores.png bytes, from the report dict that report.json holds (jobs/commands/dataset_inference.py writes them)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from scoring.reports.figures import png_bytes, pyplot
from scoring.reports.html import Code, Figure, Page, Section, Table, left_out, num


def conclusion(p: float) -> str:
    """The test's answer in words, led by "p = …" (report.json's `conclusion`)."""
    if p < 0.01:
        return f"p = {p:.2g}: the model scores the suspect set as training data (significant at 1%)"
    if p < 0.05:
        return f"p = {p:.2g}: weak evidence that the suspect set was trained on (significant at 5%, not at 1%)"
    return f"p = {p:.2g}: no evidence that the suspect set was trained on (which is not evidence that it was not)"


def plot_test_scores(res: dict) -> bytes:
    """test_scores.png's bytes: the held-out halves' scores under the learned model, suspect against validation."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    s, v = np.asarray(res["test_scores"]["suspect"]), np.asarray(res["test_scores"]["validation"])
    bins = np.histogram_bin_edges(np.concatenate([s, v]), bins=30)
    ax.hist(v, bins=bins, alpha=0.6, label=f"validation (n={len(v)})", color="#4477aa")
    ax.hist(s, bins=bins, alpha=0.6, label=f"suspect (n={len(s)})", color="#cc6677")
    ax.set_xlabel("linear model's score on the held-out halves (higher = more member-like)")
    ax.set_ylabel("passages")
    ax.set_title(f"Dataset inference: one-sided Welch t = {res['t']:.2f}, p = {res['p_value']:.2g}")
    ax.legend()
    fig.tight_layout()
    return png_bytes(fig)


def report_markdown(r: dict) -> str:
    """report.md."""
    sz = r["sizes"]
    lines = ["# Tidemark dataset inference", "", *([f"> **Warning:** {r['shift_warning']}", ""]
                                                  if r.get("shift_warning") else []), f"**{r['conclusion']}.**", "",
             f"- suspect: `{r['inputs']['suspect']}` ({r['inputs']['suspect_passages']} passages); validation: "
             f"`{r['inputs']['validation']}` ({r['inputs']['validation_passages']} passages); model `{r['model']}`",
             f"- learned on {sz['suspect_learn']} + {sz['validation_learn']} passages, tested on "
             f"{sz['suspect_test']} + {sz['validation_test']}: t = {r['t']:.3f}, df = {r['df']:.1f}, "
             f"p = {r['p_value']:.3g} (one-sided Welch)",
             shift_line(r.get("shift_check") or {}),
             f"- scoring: {r['scoring']['rows_in']} passages in, {r['scoring']['scored']} scored, "
             f"{r['scoring']['quarantined']} quarantined (`scoring/quarantine.parquet/`); documents or rows "
             f"quarantined while reading: {r['inputs']['documents_quarantined']['suspect']} suspect, "
             f"{r['inputs']['documents_quarantined']['validation']} validation (`_staging/quarantine/`)", "",
             "## What the p-value means", "", r["meaning"], "",
             "## Detector weights (standardised features; + means more member-like for the suspect set)", "",
             "| detector | weight |", "|---|---|"]
    for name, w in sorted(r["weights"].items(), key=lambda kv: -abs(kv[1])):
        lines.append(f"| {name} | {w:+.4f} |")
    lines += ["", "Plot: `test_scores.png` (the held-out halves' scores).", ""]
    return "\n".join(lines)


def shift_line(check: dict) -> str:
    """The shift guard's result in one line (report.md; report.html's facts)."""
    if not check.get("checked"):
        return f"- shift check: not run ({check.get('why', 'no result')})"
    lo, hi = check["auc_ci"]
    return (f"- shift check: a text-only classifier ({check['classifier']}) tells the sets apart at AUC "
            f"{check['blind_auc']:.3f} [{lo:.2f}, {hi:.2f}]; refused above {check['threshold']} unless --allow-shift"
            + (" (given)" if check.get("shifted") and check.get("allowed") else ""))


def report_page(r: dict, out: Path) -> Page:
    """report.html's content (scoring/reports/html.py): the test's answer first, then what it rests on."""
    sz, inputs = r["sizes"], r["inputs"]
    verdict = r["conclusion"].split(": ", 1)[-1]  # conclusion()'s words without its leading "p = …"
    head = f"{verdict[0].upper()}{verdict[1:]}: p = {r['p_value']:.2g} (one-sided Welch t-test)."
    summary = (f"Tested on held-out halves of {sz['suspect_test']:,} suspect and {sz['validation_test']:,} validation "
               f"passages, with a linear model of {len(r['features_used'])} detectors' scores learned on the other "
               "halves; the validation set is what the suspect set is compared with, so it must be the same kind of "
               "text.")
    weights = sorted(r["weights"].items(), key=lambda kv: -abs(kv[1]))
    sections = [
        Section("What the p-value means", [r["meaning"]]),
        Section("The test", [
            Table(["", "suspect", "validation"],
                  [["passages read", inputs["suspect_passages"], inputs["validation_passages"]],
                   ["passages that learned the linear model", sz["suspect_learn"], sz["validation_learn"]],
                   ["passages tested", sz["suspect_test"], sz["validation_test"]],
                   ["mean score of the tested passages", num(r["test_means"]["suspect"], 4),
                    num(r["test_means"]["validation"], 4)],
                   ["documents or rows unreadable", inputs["documents_quarantined"]["suspect"],
                    inputs["documents_quarantined"]["validation"]]],
                  f"t = {r['t']:.3f}, degrees of freedom {r['df']:.1f}, p = {r['p_value']:.3g}."),
            Figure(out / "test_scores.png", "The held-out passages' scores under the learned model")]),
        Section("Which detectors carry the signal", [
            "Weights of the linear model on standardised detector scores: a positive weight means a higher score "
            "makes a passage look more like the suspect set.",
            Table(["detector", "weight"], [[Code(n), f"{w:+.4f}"] for n, w in weights])]),
    ]
    sc = r["scoring"]
    warnings = [r["shift_warning"]] if r.get("shift_warning") else []
    if sc["quarantined"]:
        warnings.append(left_out(sc["quarantined"], sc["rows_in"], "passages", "could not be scored",
                                 where="scoring/quarantine.parquet"))
    unread = inputs["documents_quarantined"]
    if unread["suspect"] or unread["validation"]:
        warnings.append(f"{unread['suspect']:,} suspect and {unread['validation']:,} validation documents or rows "
                        "could not be read (too short, empty or not UTF-8) and are not in the test "
                        "(_staging/quarantine/).")
    facts = [("suspect set", Code(inputs["suspect"])), ("validation set", Code(inputs["validation"])),
             ("model", Code(str(r["model"]))),
             ("passages", f"{sc['rows_in']:,} in, {sc['scored']:,} scored, {sc['quarantined']:,} quarantined; "
                          f"{inputs['recall_prefix_passages']} validation passages used as ReCaLL's prefix, "
                          "not tested"),
             ("shift check", shift_line(r.get("shift_check") or {}).removeprefix("- shift check: "))]
    files = [("report.md", "this report's numbers as Markdown"),
             ("report.json", "p, t, the weights, sizes and counts"),
             ("scoring", "every passage's detector scores (scores.parquet/) and the quarantine")]
    return Page(kind="dataset inference", headline=head, summary=summary, facts=facts, sections=sections,
                warnings=warnings, files=files)
