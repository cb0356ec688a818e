"""`canary test`'s report content: report.md, report.html's `Page` and scores.png, from the report dict that
report.json holds (jobs/parts/audit/canary.py writes them)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from scoring.reports.figures import png_bytes, pyplot
from scoring.reports.html import Code, Figure, Page, Section, Table, num

MAX_PANELS = 6  # sets drawn in scores.png; every set is in the tables


def plot_scores(scores, res: dict) -> bytes:
    """scores.png's bytes: per set, the planted and the held-out canaries' scores (histograms on shared bins, each
    canary as a tick below), with the set's p-value in the panel's title."""
    plt = pyplot()
    names = list(res["sets"])[:MAX_PANELS]
    fig, axes = plt.subplots(len(names), 1, figsize=(6.8, 2.5 * len(names) + 0.6), squeeze=False)
    cols = scores.to_pydict()
    set_of, role, score = np.asarray(cols["set"]), np.asarray(cols["role"]), np.asarray(cols["score"], dtype=float)
    for ax, name in zip(axes[:, 0], names):
        mine = set_of == name
        p, h = score[mine & (role == "plant")], score[mine & (role == "holdout")]
        bins = np.histogram_bin_edges(np.concatenate([p, h]), bins=min(30, max(5, mine.sum() // 4)))
        ax.hist(h, bins=bins, alpha=0.55, color="#4477aa", label=f"held out, never published (n={h.size})")
        ax.hist(p, bins=bins, alpha=0.55, color="#cc6677", label=f"planted, published (n={p.size})")
        top = ax.get_ylim()[1]
        ax.plot(h, np.full(h.size, -0.04 * top), "|", color="#4477aa", ms=8)
        ax.plot(p, np.full(p.size, -0.09 * top), "|", color="#cc6677", ms=8)
        ax.set_ylim(-0.13 * top, top)
        r = res["sets"][name]
        ax.set_title(f"{name}: p = {r['p_value']:.2g}, AUC = {r['auc']:.3f}", fontsize=10)
        ax.set_ylabel("canaries")
        ax.legend(fontsize=8, loc="upper left")
    axes[-1, 0].set_xlabel("detector score (higher = more member-like)")
    fig.tight_layout()
    return png_bytes(fig)


def _set_rows(r: dict) -> list[list]:
    return [[Code(name), s["n_plant"], s["n_holdout"], num(s["mean_plant"], 4), num(s["mean_holdout"], 4),
             num(s["auc"], 3), f"{s['u']:g}", f"{s['p_value']:.3g}", s["method"]] for name, s in r["sets"].items()]


SET_HEADER = ["set", "planted", "held out", "mean score planted", "mean score held out", "AUC", "U", "p",
              "p computed"]


def report_markdown(r: dict) -> str:
    """report.md."""
    c = r["counts"]
    lines = ["# Tidemark canary test", "", f"**{r['conclusion']}.**", "",
             f"- model `{r['model']}`, detector `{r['detector']}`; test: {r['test']}",
             f"- canaries: {c['in']} in, {c['scored']} scored, {c['quarantined']} could not be scored "
             "(`scoring/quarantine.parquet/`)"]
    if r["combination"]:
        k = r["combination"]
        lines.append(f"- {len(r['sets'])} sets combined by {k['method'].capitalize()}'s method: statistic {k['statistic']:.3f}, "
                     f"p = {k['p_value']:.3g}")
    lines += ["", "| " + " | ".join(SET_HEADER) + " |", "|" + "---|" * len(SET_HEADER)]
    for row in _set_rows(r):
        lines.append("| " + " | ".join(x.text if isinstance(x, Code) else str(x) for x in row) + " |")
    lines += ["", "## What the p-value means", "", r["meaning"], "",
              "## Commitments", "", "Each set's sha256 (from `canary make`'s manifest.json), checked before scoring:",
              ""]
    lines += [f"- `{name}`: `{s['canaries_sha256']}` ({s['path']})" for name, s in r["sets"].items()]
    lines += ["", "Plot: `scores.png` (the two roles' scores per set); every canary's score: `scores.parquet`.", ""]
    return "\n".join(lines)


def report_page(r: dict, out: Path) -> Page:
    """report.html's content: the answer and what it means first, then the sets, the scores and the commitments."""
    verdict = r["conclusion"].split(": ", 1)[-1]
    kind = "Fisher's combination of the sets' one-sided Mann-Whitney U tests" if r["combination"] else \
        "one-sided Mann-Whitney U test"
    head = f"{verdict[0].upper()}{verdict[1:]}: p = {r['p_value']:.2g} ({kind})."
    summary = ("A canary set's roles were assigned by a seeded coin before publication; the test asks whether the "
               "model ranks the published (planted) canaries above the private (held-out) ones, using one detector "
               f"chosen before the test ({r['detector']}). The p-value is the chance of a ranking at least this "
               "one-sided in a model that never saw the canaries.")
    c = r["counts"]
    warnings = []
    if c["quarantined"]:
        warnings.append(f"{c['quarantined']:,} of {c['in']:,} canaries could not be scored and are not in the test "
                        "(scoring/quarantine.parquet); which canaries were planted was random, so this loses power "
                        "but does not bias the test.")
    facts = [("model", Code(str(r["model"]))), ("detector", Code(r["detector"])),
             ("canaries", f"{c['in']:,} in {len(r['sets'])} set(s), {c['scored']:,} scored")]
    if r.get("served_model"):
        facts.append(("served at", Code(str(r["served_model"].get("api_base")))))
    sections = [
        Section("What the p-value means", [r["meaning"]]),
        Section("The test, per set", [
            Table(SET_HEADER, _set_rows(r),
                  "AUC is the share of (planted, held-out) pairs in which the planted canary scores higher (0.5: no "
                  "difference); U counts those pairs. Exact p-values are computed for small sets without ties.")
            ] + ([f"Combined by {r['combination']['method'].capitalize()}'s method over {len(r['sets'])} independent sets: "
                  f"statistic {r['combination']['statistic']:.3f}, p = {r['combination']['p_value']:.3g}."]
                 if r["combination"] else [])
            + [Figure(out / "scores.png", "Planted and held-out canaries' scores, per set")]),
        Section("Commitments checked", [
            "Each set's canaries.jsonl matched the sha256 its manifest committed to when the set was made; an edited "
            "set would have been refused before scoring.",
            Table(["set", "sha256", "made with", "directory"],
                  [[Code(n), Code(s["canaries_sha256"]),
                    f"{s['made_with'].get('generator')}, seed {s['made_with'].get('seed')}, "
                    f"{s['made_with'].get('words')} words", Code(s["path"])] for n, s in r["sets"].items()])]),
    ]
    files = [("scores.parquet", "every scored canary: set, id, role, score"), ("scores.png", "the plot above"),
             ("report.json", "p-values, statistics, counts, the model's identity"), ("report.md", "this report as "
             "Markdown"), ("scoring", "the scoring pool's parts and quarantine")]
    return Page(kind="canary test", headline=head, summary=summary, facts=facts, sections=sections,
                warnings=warnings, files=files)
