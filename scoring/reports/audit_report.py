"""`audit`'s report.md, from the report dict that report.json holds (jobs/commands/audit.py writes it), and the
cells the Markdown and the page (scoring/reports/audit_page.py) share: a snippet's excerpt, a document's n-gram
overlap."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np


def _pct(x: float) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{100 * x:.1f}%"


def _ci(ci: Sequence[float]) -> str:
    return f"[{_pct(ci[0])}, {_pct(ci[1])}]"


def excerpt(text: str, n: int = 240) -> str:
    text = " ".join(text.split())
    return (text[:n] + " …") if len(text) > n else text


def report_markdown(report: Mapping, max_docs: int = 50) -> str:
    c, cal, corpus = report["counts"], report["calibration"], report["corpus"]
    corr = corpus["fpr_corrected"]
    tgt = c["target"]
    bench = report["mode"] == "benchmark"
    md = [f"# Tidemark audit: {report['target']}", "",
          f"- model `{report['model']}`, detector `{report['detector']}`",
          f"- calibration ({cal['source']}): {cal['n_members']} member and {cal['n_non_members']} non-member "
          f"snippets; threshold {cal['threshold']:.4g} by {cal['objective']}"
          + (f" (target FPR {cal['target_fpr']:g})" if cal["objective"] == "fpr" else "")
          + f"; at it TPR {_pct(cal['tpr'])}, FPR {_pct(cal['fpr'])}, accuracy {_pct(cal['accuracy'])}, "
            f"calibration AUC {cal['auc']:.3f}",
          f"- target documents in {tgt['documents_in']} = scored {tgt['documents_scored']} + quarantined "
          f"{tgt['documents_quarantined']}; snippets planned {tgt['snippets_planned']} = scored "
          f"{tgt['snippets_scored']} + quarantined {tgt['snippets_quarantined']}", ""]
    if bench:
        md += [f"**Examples flagged: {_pct(corpus['flagged_share'])}** {_ci(corpus['flagged_share_ci'])} "
               f"({corpus['flagged_share_ci_method']} 95% CI, {corpus['n_snippets']} examples)", ""]
    else:
        md += [f"**Mean contamination rate: {_pct(corpus['mean_rate'])}** {_ci(corpus['mean_rate_ci'])} "
               f"(bootstrap over documents); median {_pct(corpus['median_rate'])}; documents over 50%: "
               f"{_pct(corpus['share_of_documents_over_50pct'])}",
               f"Snippets flagged: {_pct(corpus['flagged_share'])} {_ci(corpus['flagged_share_ci'])}", ""]
    md += [f"**FPR-corrected contamination share: {_pct(corr['estimate'])}** {_ci(corr['ci'])} = (r − f)/(t − f) with "
           f"r = {corr['observed_rate']:.3f} flagged, t = {corr['tpr']:.3f}, f = {corr['fpr']:.3f} (95% CI for "
           f"{corr['ci_method']})."
           + (f" Read as a sample of a larger population: {_ci(corr['ci_population'])} (cluster bootstrap)."
              if corr.get("ci_population") else "") + (f" {corr['note']}" if corr.get("note") else ""), ""]
    if report.get("warnings"):
        md += ["**Warnings**", *[f"- {w}" for w in report["warnings"]], ""]
    docs = report["documents"]
    if bench:
        ranked = sorted(docs, key=lambda d: -(d["max_score"] if np.isfinite(d["max_score"]) else -np.inf))
        md += [f"## Evidence: the {min(len(ranked), max_docs)} highest-scoring examples", "",
               "| example | score | flagged | 13-gram overlap | text |", "|---|---|---|---|---|"]
        for d in ranked[:max_docs]:
            top = d["top_snippets"][0]
            md.append(f"| `{d['id']}` | {top['score']:.4g} | {'yes' if top['flagged'] else 'no'} | "
                      f"{overlap_cell(d)} | {excerpt(top['text'], 160)} |")
    else:
        md += ["## Documents", "", "| document | snippets | flagged | rate [95% CI] | 13-gram overlap |",
               "|---|---|---|---|---|"]
        ranked = sorted(docs, key=lambda d: -d["rate"])
        for d in ranked[:max_docs]:
            md.append(f"| `{d['id']}` | {d['n_snippets']} | {d['n_flagged']} | {_pct(d['rate'])} {_ci(d['rate_ci'])} | "
                      f"{overlap_cell(d)} |")
        md += ["", "## Evidence: top-scoring snippets", ""]
        for d in ranked[:max_docs]:
            md.append(f"- `{d['id']}` ({_pct(d['rate'])}):")
            for s in d["top_snippets"]:
                md.append(f"  - score {s['score']:.4g}{' (flagged)' if s['flagged'] else ''}, word {s['start_word']}: "
                          f"{excerpt(s['text'])}")
            for ex in (d.get("ngram_overlap") or {}).get("examples", []):
                md.append(f"  - verbatim 13-gram in reference: “{ex}”")
    if len(docs) > max_docs:
        md.append(f"\n({len(docs) - max_docs} more in report.json)")
    md += ["", "Plots: " + ", ".join(f"`{p}`" for p in report.get("plots", [])), ""]
    return "\n".join(md)


def overlap_cell(d: Mapping) -> str:
    ov = d.get("ngram_overlap")
    if not ov:
        return "–"
    return f"{_pct(ov['share'])} ({ov['n_matched']}/{ov['n_ngrams']})"
