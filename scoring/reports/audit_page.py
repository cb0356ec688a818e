"""`audit`'s report.html content (scoring/reports/html.py renders it): what share of the audited set the model saw
in training, with its interval, how the detector was calibrated, and the evidence, from the report dict that
report.json holds (jobs/commands/audit.py); and the bytes of the page's two plots, scores_hist.png and
rates_hist.png. report.md is scoring/reports/audit_report.py's."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from scoring.reports.audit_report import excerpt, overlap_cell
from scoring.reports.figures import png_bytes, pyplot
from scoring.reports.html import (Code, Figure, Page, Section, Table, left_out, num, output_files, pct, pct_ci,
                                 pct_interval)

MAX_DOCUMENTS = 50  # rows in the page's document table (report.json and documents.parquet have every one)
MAX_EVIDENCE = 20  # documents whose top snippets are quoted

FILES = (("report.md", "this report's numbers as Markdown"),
         ("report.json", "every number here, the calibration and the listed documents with their top snippets"),
         ("documents.parquet", "every audited document: snippets, flagged, rate with its CI, max score"),
         ("snippets.parquet", "every snippet: document, position, score, flagged"),
         ("quarantine.parquet", "documents and snippets that could not be used, each with its reason"),
         ("scoring", "the scorer's parts (scores, token statistics) for a resumed or re-examined run"))


def headline(report: Mapping) -> tuple[str, str]:
    corpus, corr = report["corpus"], report["corpus"]["fpr_corrected"]
    bench = report["mode"] == "benchmark"
    what = "of the audited benchmark's examples were" if bench else "of the audited set was"
    unit = "examples" if bench else f"snippets from {corpus['n_documents']:,} documents"
    flagged = (f"{pct(corr['observed_rate'])} of {corpus['n_snippets']:,} {unit} were flagged by "
               f"{report['detector']} under {report['model']}")
    if not math.isfinite(corr["estimate"]):
        return ("No estimate is possible: on the calibration data the detector does not flag known members more "
                "often than known non-members.", flagged + ".")
    text = f"An estimated {pct_ci(corr['estimate'], corr['ci'], 0)} {what} seen in training."
    more = (f"{flagged}; the detector flags {pct(corr['tpr'])} of known members and {pct(corr['fpr'])} of known "
            "non-members, and the estimate removes the false positives that rate implies. The interval is a 95% "
            "interval for this corpus")
    if corr.get("ci_population"):
        more += f"; read as a sample of a larger population it is {pct_ci(corr['estimate'], corr['ci_population'], 0)}"
    return text, more + "."


def _units(report: Mapping) -> tuple[str, str]:
    """What the audit counts in: (documents, snippets), or (examples, examples) for a benchmark (one row, one
    snippet)."""
    return ("examples", "examples") if report["mode"] == "benchmark" else ("documents", "snippets")


def _estimates(report: Mapping) -> Table:
    corpus, corr = report["corpus"], report["corpus"]["fpr_corrected"]
    docs, pieces = _units(report)
    rows = [["share seen in training (false-positive corrected)", pct(corr["estimate"]), pct_interval(corr["ci"]),
             "this corpus (delta method, Student t)"]]
    if corr.get("ci_population"):
        rows.append(["the same, as a sample of a larger population", pct(corr["estimate"]),
                     pct_interval(corr["ci_population"]), f"cluster bootstrap over {docs}"])
    rows.append([f"{pieces} flagged (uncorrected)", pct(corpus["flagged_share"]),
                 pct_interval(corpus["flagged_share_ci"]), corpus.get("flagged_share_ci_method", "")])
    if "mean_rate" in corpus:
        rows += [["mean per-document contamination rate", pct(corpus["mean_rate"]),
                  pct_interval(corpus["mean_rate_ci"]), "bootstrap over documents"],
                 ["median per-document rate", pct(corpus["median_rate"]), "", ""],
                 ["documents with over 50% of snippets flagged", pct(corpus["share_of_documents_over_50pct"]), "", ""]]
    ov = corpus.get("ngram_overlap")
    if ov:
        rows.append([f"{docs} sharing a verbatim {ov['n']}-gram with the reference corpus",
                     f"{ov['documents_with_any_match']:,} of {corpus['n_documents']:,}", "",
                     f"mean share of n-grams matched {pct(ov['mean_share'])}"
                     + (f"; {sum(ov['reference_quarantined'].values()):,} reference records unreadable"
                        if ov.get("reference_quarantined") else "")])
    return Table(["quantity", "estimate", "95% interval", "how"], rows)


def _documents(report: Mapping, out_dir: Path) -> list:
    docs = sorted(report["documents"], key=lambda d: -d["rate"] if math.isfinite(d["rate"]) else math.inf)
    rows = [[Code(str(d["id"])), d["n_snippets"], d["n_flagged"], pct_ci(d["rate"], d["rate_ci"]), overlap_cell(d)]
            for d in docs[:MAX_DOCUMENTS]]
    shown = f"the {len(rows)} with the highest rates of {len(docs):,} listed" if len(docs) > len(rows) else "all"
    return [Table(["document", "snippets", "flagged", "rate [95% CI]", "verbatim n-gram overlap"], rows,
                  f"Per-document contamination rate = share of its snippets flagged ({shown})."),
            Figure(out_dir / "rates_hist.png", "Per-document contamination rates, with the corpus mean")]


def _evidence(report: Mapping) -> Table:
    def key(d):
        return -d["max_score"] if math.isfinite(d["max_score"]) else math.inf

    rows = []
    for d in sorted(report["documents"], key=key)[:MAX_EVIDENCE]:
        for s in d["top_snippets"]:
            rows.append([Code(str(d["id"])), num(s["score"], 4), "yes" if s["flagged"] else "no", s["start_word"],
                         excerpt(s["text"])])
    return Table(["document", "score", "flagged", "from word", "text"], rows,
                 f"The highest-scoring snippets of the {min(len(report['documents']), MAX_EVIDENCE)} documents "
                 "with the highest scores (a higher score means more likely seen in training).")


def audit_page(report: Mapping, out_dir: Path) -> Page:
    cal, tgt = report["calibration"], report["counts"]["target"]
    corr = report["corpus"]["fpr_corrected"]
    out_dir = Path(out_dir)
    head, summary = headline(report)
    docs, pieces = _units(report)
    facts = [("audited", Code(str(report["target"]))), ("model", Code(str(report["model"]))),
             ("detector", Code(report["detector"])),
             (docs, f"{tgt['documents_in']:,} in, {tgt['documents_scored']:,} scored, "
                    f"{tgt['documents_quarantined']:,} quarantined")]
    if pieces == "snippets":
        facts.append(("snippets", f"{tgt['snippets_planned']:,} planned, {tgt['snippets_scored']:,} scored, "
                                  f"{tgt['snippets_quarantined']:,} quarantined"))
    facts.append(("calibration", cal["source"]))
    calibration = Section("How the detector was calibrated", [
        f"The detector's threshold ({num(cal['threshold'], 4)}, chosen by {cal['objective']}"
        + (f" at a target false-positive rate of {pct(cal['target_fpr'])}" if cal.get("target_fpr") else "")
        + ") was set on snippets known to be in the training data and snippets known not to be. A snippet scoring "
        "at or above it is flagged.",
        Table(["calibration snippets", "count", "flagged at the threshold"],
              [["known members", cal["n_members"], pct(cal["tpr"])],
               ["known non-members", cal["n_non_members"], pct(cal["fpr"])]],
              f"Calibration AUC {num(cal['auc'])}; accuracy at the threshold {pct(cal['accuracy'])}."),
        Figure(out_dir / "scores_hist.png", "Scores of the known members, known non-members and the audited set")])
    sections = [Section("Estimates", [_estimates(report)]), calibration]
    if report["mode"] != "benchmark":
        sections.append(Section("Documents", _documents(report, out_dir)))
    sections.append(Section("Evidence", [_evidence(report)]))
    warnings = list(report.get("warnings", [])) + ([corr["note"]] if corr.get("note") else [])
    if tgt["documents_quarantined"]:  # the estimate speaks only for what was scored
        warnings.append(left_out(tgt["documents_quarantined"], tgt["documents_in"], f"audited {docs}",
                                 then="are in no estimate here"))
    if tgt["snippets_quarantined"] and pieces == "snippets":
        warnings.append(left_out(tgt["snippets_quarantined"], tgt["snippets_planned"], "snippets",
                                 "could not be scored", where=None))
    return Page(kind="corpus audit" if report["mode"] != "benchmark" else "benchmark audit", headline=head,
                summary=summary, facts=facts, sections=sections, warnings=warnings,
                files=output_files(out_dir, FILES))


def plot_rates(rates: Sequence[float], mean: float) -> bytes:
    """rates_hist.png's bytes: histogram of per-document contamination rates, with the corpus mean."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.hist(rates, bins=np.linspace(0, 1, 21), color="#4477aa", edgecolor="white")
    ax.axvline(mean, color="#cc3311", ls="--", label=f"mean {100 * mean:.1f}%")
    ax.set(xlabel="contamination rate (share of snippets flagged)", ylabel="documents",
           title=f"Per-document contamination rates (n={len(rates)})")
    ax.legend()
    fig.tight_layout()
    return png_bytes(fig)


def plot_scores(target: Sequence[float], members: Sequence[float], non_members: Sequence[float], threshold: float,
                detector: str) -> bytes:
    """scores_hist.png's bytes: score distributions of the calibration members, non-members and the target, with the threshold."""
    plt = pyplot()

    groups = [("calibration non-members", non_members, "#4477aa"), ("calibration members", members, "#cc3311"),
              ("target", target, "#228833")]
    vals = np.concatenate([np.asarray(g[1], dtype=float) for g in groups])
    vals = vals[np.isfinite(vals)]
    bins = np.linspace(vals.min(), vals.max(), 41) if vals.size else 10
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, v, col in groups:
        v = np.asarray(v, dtype=float)
        v = v[np.isfinite(v)]
        if v.size:
            ax.hist(v, bins=bins, density=True, histtype="step", lw=1.6, color=col, label=f"{name} (n={v.size})")
    ax.axvline(threshold, color="black", ls="--", lw=1, label=f"threshold {threshold:.3g}")
    ax.set(xlabel=f"{detector} score (larger = more likely member)", ylabel="density", title="Snippet scores")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return png_bytes(fig)
