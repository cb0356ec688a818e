"""`dataset-inference --method codec`'s report content: report.md, report.html's `Page` and deltas.png, from the
report dict report.json holds (jobs/parts/audit/codec.py writes them)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from scoring.reports.figures import png_bytes, pyplot
from scoring.reports.html import Code, Figure, Page, Section, Table, left_out, num, pct, pct_ci


def headline(r: dict) -> str:
    reading = {"high": f"above {0.8:g}: the authors' red flag for a set the model was trained on",
               "low": f"below {0.4:g}: little sign that the model was trained on the set",
               "between": "between the authors' readings of unseen and trained-on sets"}[r["reading"]]
    return (f"Contamination score {pct_ci(r['contamination_score'], r['contamination_ci'], 0)}: the share of "
            f"passages whose likelihood drops with other passages of the set in context ({reading}).")


def plot_deltas(r: dict) -> bytes:
    plt = pyplot()
    h = r["histogram"]
    edges = h["lo"] + h["width"] * np.arange(len(h["counts"]) + 1)
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    ax.stairs(h["counts"], edges, fill=True, color="#4477aa", alpha=0.7)
    ax.axvline(0.0, color="#cc6677", lw=1.5)
    ax.set_xlabel("delta = mean log p with in-set context - without (ends clipped at ±4)")
    ax.set_ylabel("passages")
    ax.set_title(f"CoDeC: {r['contamination_score']:.1%} of {r['samples']:,} passages below 0 "
                 f"(mean delta {r['mean_delta']:.3f})")
    fig.tight_layout()
    return png_bytes(fig)


def report_markdown(r: dict) -> str:
    s = r["settings"]
    return "\n".join([
        "# Tidemark dataset inference (CoDeC)", "", f"**{headline(r)}**", "",
        f"- suspect: `{r['inputs']['suspect']}` ({r['inputs']['passages']} passages); model `{r['model']}`",
        f"- contamination_score {r['contamination_score']:.4f} [{r['contamination_ci'][0]:.4f}, "
        f"{r['contamination_ci'][1]:.4f}] (Wilson 95%): {r['samples_negative']} of {r['samples']} passages with "
        f"delta < 0; {r['samples_skipped']} without a delta",
        f"- mean_delta {r['mean_delta']:.4f} [{r['mean_delta_ci'][0]:.4f}, {r['mean_delta_ci'][1]:.4f}] (normal 95%), "
        f"sd {r['delta_sd']:.4f}",
        f"- {s['shots']} context passages each, from a seeded pool of {s['pool_used']} (seed {s['seed']}), joined by "
        "blank lines",
        f"- scoring: {r['counts']['in']} passages in, {r['counts']['scored']} scored, {r['counts']['quarantined']} "
        "quarantined (`scoring/quarantine.parquet/`)", "",
        "## What the score means", "", r["meaning"], "",
        "Files: `rows.parquet` (each passage's delta and its context passages' ids), `deltas.png`.", ""])


def report_page(r: dict, out: Path) -> Page:
    s, c = r["settings"], r["counts"]
    sections = [
        Section("What the score means", [r["meaning"]]),
        Section("The score", [
            Table(["", "value", "95% interval"],
                  [["contamination score (share with delta < 0)", pct(r["contamination_score"]),
                    f"{pct(r['contamination_ci'][0])} to {pct(r['contamination_ci'][1])}"],
                   ["mean delta (nats per token)", num(r["mean_delta"], 4),
                    f"{num(r['mean_delta_ci'][0], 4)} to {num(r['mean_delta_ci'][1], 4)}"],
                   ["passages with a delta", r["samples"], ""], ["passages without one", r["samples_skipped"], ""]]),
            Figure(out / "deltas.png", "Each passage's delta: likelihood with in-set context minus without")]),
        Section("How it was computed", [
            f"Every passage was scored twice by the model: alone, and after {s['shots']} other passages of the same "
            f"set drawn from a seeded pool of {s['pool_used']} (each cut to {s['pool_text_chars']:,} characters), "
            "joined by blank lines. delta is the difference of the mean log-probabilities of the passage's own "
            "tokens. No held-out set is needed (Zawalski et al., ICLR 2026)."])]
    warnings = [left_out(c["quarantined"], c["in"], "passages", "could not be scored",
                         where="scoring/quarantine.parquet")] if c["quarantined"] else []
    facts = [("suspect set", Code(r["inputs"]["suspect"])), ("model", Code(str(r["model"]))),
             ("passages", f"{c['in']:,} in, {c['scored']:,} scored, {c['quarantined']:,} quarantined")]
    files = [("report.md", "this report's numbers as Markdown"), ("report.json", "the score, its interval, settings"),
             ("rows.parquet", "each passage's delta and the ids of its context passages"),
             ("scoring", "the token statistics and scores of both views, and the quarantine")]
    return Page(kind="dataset inference (CoDeC)", headline=headline(r), sections=sections, warnings=warnings,
                facts=facts, files=files)
