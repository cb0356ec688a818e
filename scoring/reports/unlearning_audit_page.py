"""`unlearning-audit`'s report content: report.md, report.html's `Page` and the ratios_hist.png bytes, from the
report dict that report.json holds, with the run's settings under `config` (jobs/commands/unlearning_audit.py
writes them)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from scoring.reports.figures import png_bytes, pyplot
from scoring.reports.html import Code, Figure, Page, Section, Table, left_out, num, pct_ci


def report_markdown(report: dict) -> str:
    """report.md."""
    c, cfg = report["counts"], report["config"]
    lo, hi = report["flagged_share_ci"]
    md = [f"# Tidemark unlearning audit: {report['corpus']}", "",
          f"- original `{report['original']}`, unlearned `{report['unlearned']}`",
          f"- {report['rule']}: the unlearned model still finds the chunk about as likely → unlearning likely failed",
          f"- documents in {c['documents_in']} = scored {c['documents_scored']} + quarantined "
          f"{c['documents_quarantined']}; chunks ({cfg['chunk_words']} words) planned {c['chunks_planned']} = scored "
          f"{c['chunks_scored']} + quarantined {c['chunks_quarantined']}", "",
          f"**Flagged: {100 * report['flagged_share']:.1f}%** [{100 * lo:.1f}%, {100 * hi:.1f}%] "
          f"({report['n_flagged']} of {c['chunks_scored']} chunks; {report['ci_method']} 95% CI). "
          f"Ratio quantiles 10/50/90%: " + ", ".join(f"{v:.3f}" for v in report["ratio_quantiles"].values()), "",
          "## Documents", "", "| document | chunks | flagged | share [95% CI] |", "|---|---|---|---|"]
    for d in sorted(report["documents"], key=lambda d: -d["share"]):
        md.append(f"| `{d['id']}` | {d['chunks']} | {d['flagged']} | {100 * d['share']:.1f}% "
                  f"[{100 * d['share_ci'][0]:.1f}%, {100 * d['share_ci'][1]:.1f}%] |")
    flagged, max_listed = report["flagged_chunks"], cfg["max_listed"]
    md += ["", f"## Flagged chunks ({len(flagged)}" + (f", first {max_listed} listed; all in chunks.parquet"
                                                      if len(flagged) > max_listed else "") + ")", "",
           "| document | chunk | words | Min-K% original | Min-K% unlearned | ratio | excerpt |",
           "|---|---|---|---|---|---|---|"]
    for s in flagged[:max_listed]:
        md.append(f"| `{s['doc_id']}` | {s['index']} | {s['start_word']}–{s['start_word'] + s['n_words']} | "
                  f"{s['min_k_original']:.3f} | {s['min_k_unlearned']:.3f} | {s['ratio']:.3f} | {s['excerpt']} … |")
    md += ["", "Plot: `ratios_hist.png`", ""]
    return "\n".join(md)


def report_page(report: dict, out: Path) -> Page:
    """report.html's content (scoring/reports/html.py): the share of the forget set unlearning left in place first."""
    c, cfg = report["counts"], report["config"]
    max_listed = cfg["max_listed"]
    head = (f"Unlearning likely failed on an estimated {pct_ci(report['flagged_share'], report['flagged_share_ci'], 0)}"
            " of the forget set: the unlearned model still finds those passages about as likely as the original did.")
    summary = (f"{report['n_flagged']:,} of {c['chunks_scored']:,} chunks of {cfg['chunk_words']} words were flagged "
               f"({report['ci_method']} 95% interval). Rule: {report['rule']}.")
    docs = sorted(report["documents"], key=lambda d: -d["share"])
    flagged = report["flagged_chunks"]
    listed = f"first {max_listed} of {len(flagged):,}; all in chunks.parquet" if len(flagged) > max_listed \
        else f"{len(flagged):,}"
    sections = [
        Section("Documents", [Table(["document", "chunks", "flagged", "share flagged [95% CI]"],
                                    [[Code(str(d["id"])), d["chunks"], d["flagged"], pct_ci(d["share"], d["share_ci"])]
                                     for d in docs])]),
        Section("Score ratios", [
            "Ratio = Min-K% score under the unlearned model / under the original. Near 1, unlearning changed "
            "nothing for that chunk; " + "quantiles 10/50/90%: "
            + ", ".join(num(v) for v in report["ratio_quantiles"].values()) + ".",
            Figure(out / "ratios_hist.png", "Chunks' score ratios; the flagged band lies between the dashed lines")]),
        Section(f"Flagged chunks ({listed})", [Table(
            ["document", "chunk", "words", "Min-K% original", "Min-K% unlearned", "ratio", "text"],
            [[Code(str(s["doc_id"])), s["index"], f"{s['start_word']}–{s['start_word'] + s['n_words']}",
              num(s["min_k_original"]), num(s["min_k_unlearned"]), num(s["ratio"]), s["excerpt"] + " …"]
             for s in flagged[:max_listed]])]),
    ]
    facts = [("forget set", Code(report["corpus"])), ("original model", Code(report["original"])),
             ("unlearned model", Code(report["unlearned"])),
             ("documents", f"{c['documents_in']:,} in, {c['documents_scored']:,} scored, "
                           f"{c['documents_quarantined']:,} quarantined"),
             ("chunks", f"{c['chunks_planned']:,} planned, {c['chunks_scored']:,} scored, "
                        f"{c['chunks_quarantined']:,} quarantined")]
    warnings = [left_out(c[f"{unit}_quarantined"], c[f"{unit}_{whole}"], unit)
                for unit, whole in (("documents", "in"), ("chunks", "planned")) if c[f"{unit}_quarantined"]]
    files = [("report.md", "this report's numbers as Markdown"), ("report.json", "every number here"),
             ("chunks.parquet", "every scored chunk: both scores, the ratio, flagged, its text"),
             ("quarantine.parquet", "documents and chunks that could not be used, each with its reason")]
    return Page(kind="unlearning audit", headline=head, summary=summary, facts=facts, sections=sections,
                warnings=warnings, files=files)


def plot_ratios(ratios: np.ndarray, tolerance: float) -> bytes:
    """ratios_hist.png's bytes: the chunks' score ratios, with the flagged band (1/τ, τ) between dashed lines."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4))
    # Bins over the data and the band together: ratios bunched near 1 would otherwise make bars too thin to see.
    lo, hi = min(float(np.min(ratios)), 1 / tolerance), max(float(np.max(ratios)), tolerance)
    ax.hist(ratios, bins=np.linspace(lo - 0.02 * (hi - lo), hi + 0.02 * (hi - lo), 41), color="#4477aa",
            edgecolor="white")
    for x in (1 / tolerance, tolerance):
        ax.axvline(x, color="#cc3311", ls="--", lw=1)
    ax.set(xlabel="Min-K% ratio unlearned / original", ylabel="chunks",
           title=f"Flagged band (1/{tolerance:g}, {tolerance:g}) between the dashed lines")
    fig.tight_layout()
    return png_bytes(fig)
