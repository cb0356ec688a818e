"""`evaluate`'s report.md and plots, from the score table and the metrics: content only (strings and PNG bytes).
jobs/kit/evaluation_files.py writes them beside scores.parquet and metrics.json."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from scoring.detectors import Method
from scoring.reports.figures import png_bytes, pyplot
from scoring.reports.generation_sections import generation_markdown, set_test_markdown, trace_sentence
from scoring.stats.comparison import comparison_lines
from scoring.stats.evaluation import bucket_groups


def plot_rocs(scores: pa.Table, methods: Sequence[Method]) -> list[tuple[str, bytes]]:
    """(roc_<bucket>.png, PNG bytes) per bucket: one ROC curve per method, log-free axes with the chance diagonal."""
    from sklearn.metrics import auc, roc_curve

    plt = pyplot()

    labels = scores.column("label").to_numpy().astype(np.int64)
    plots = []
    for bucket, mask in bucket_groups(scores):
        y = labels[mask]
        if not (0 < y.sum() < y.size):
            continue
        fig, ax = plt.subplots(figsize=(5.5, 5))
        for m in methods:
            s = scores.column(m.column).to_numpy().astype(np.float64)[mask]
            ok = np.isfinite(s)
            if not (0 < y[ok].sum() < ok.sum()):
                continue
            fpr, tpr, _ = roc_curve(y[ok], s[ok])
            ax.plot(fpr, tpr, lw=1.3, label=f"{m.name} ({auc(fpr, tpr):.3f})")
        ax.plot([0, 1], [0, 1], ls="--", c="grey", lw=0.8)
        ax.set(xlabel="false positive rate", ylabel="true positive rate",
               title=f"ROC, bucket {bucket} (n={int(mask.sum())})")
        ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        plots.append((f"roc_{bucket}.png", png_bytes(fig)))
    return plots


def plot_score_histograms(scores: pa.Table, methods: Sequence[Method]) -> bytes | None:
    """scores_hist.png's bytes: per detector, the scores of members and of non-members (evaluated rows, all buckets), so a
    reader sees how far apart the two classes are, not only the AUC. From the score columns already in memory."""
    labels = scores.column("label").to_numpy().astype(np.int64)
    mask = bucket_groups(scores)[0][1]
    panels = []
    for m in methods:
        s = scores.column(m.column).to_numpy().astype(np.float64)[mask]
        y = labels[mask][np.isfinite(s)]
        s = s[np.isfinite(s)]
        if 0 < y.sum() < y.size:
            panels.append((m.column, s[y == 1], s[y == 0]))
    if not panels:
        return None
    plt = pyplot()

    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.5 * rows), squeeze=False)
    for ax, (name, members, non_members) in zip(axes.flat, panels):
        both = np.concatenate([members, non_members])
        lo, hi = np.quantile(both, [0.005, 0.995])  # a few extreme scores would squash every other bar: they go
        bins = np.linspace(lo, hi, 31) if hi > lo else 10  # into the end bins instead
        ax.hist(np.clip(non_members, lo, hi), bins=bins, alpha=0.55, density=True, color="#4477aa", label="non-members")
        ax.hist(np.clip(members, lo, hi), bins=bins, alpha=0.55, density=True, color="#cc6677", label="members")
        ax.set_title(name if len(name) <= 38 else name[:36] + "…", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_yticks([])
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("Scores of members and non-members (larger = more likely member; the extreme 1% in the end bins)",
                 fontsize=9)
    fig.tight_layout()
    return png_bytes(fig)


def _fmt_auc(rec: dict) -> str:
    auc, (lo, hi) = rec["auc"], rec["auc_ci"]
    return "n/a" if not np.isfinite(auc) else f"{auc:.3f} [{lo:.2f}, {hi:.2f}]"


def _neighbour_lines(info: Mapping | None) -> list[str]:
    if not info:
        return []
    cols = "; ".join(f"`{c}`: n={p['n']}, dropout={p['dropout']:g}, seed={p['seed']}" for c, p in info["columns"].items())
    return [f"- neighbour: masked LM `{info['mlm']}` ({cols}); score = mean loss of the neighbours − the passage's "
            f"loss; every neighbour with its loss is in `{info['file']}`"]


def report_table(records: Sequence[dict], blind: Mapping[str, float] | None = None) -> str:
    """Markdown table: methods × buckets, AUC with its bootstrap 95% CI; a blind-baseline row when known."""
    buckets = list(dict.fromkeys(r["bucket"] for r in records))
    by = {(r["column"], r["bucket"]): r for r in records}
    columns = list(dict.fromkeys(r["column"] for r in records))
    lines = ["| method | " + " | ".join(f"AUC {b}" for b in buckets) + " |",
             "|---|" + "---|" * len(buckets)]
    for c in columns:
        lines.append(f"| {c} | " + " | ".join(_fmt_auc(by[(c, b)]) if (c, b) in by else "" for b in buckets) + " |")
    if blind:
        lines.append("| *blind baseline (no model)* | " + " | ".join(
            f"{blind[b]:.3f}" if b in blind and np.isfinite(blind[b]) else "n/a" for b in buckets) + " |")
    return "\n".join(lines)


def labelled_prefix_lines(ids) -> list[str]:
    """Con-ReCall reads labels: the report says how many, and that they are out of every metric."""
    if not ids:
        return []
    return [f"- con_recall uses {len(ids.get('member', []))} labelled members and {len(ids.get('nonmember', []))} "
            "labelled non-members as its prefixes (a method that consumes labels); those rows are scored but left "
            "out of every metric, and run.json lists them (con_recall_prefix_ids)"]


def report_markdown(records: Sequence[dict], run_info: Mapping, blind: Mapping[str, float] | None,
                    plot_names: Sequence[str]) -> str:
    """report.md: what was evaluated, the rows' accounting, the AUC table, the plots' names, a comparison section."""
    counts = run_info.get("counts", {})
    compare = run_info.get("compare_to")
    md = [
        f"# Tidemark evaluation: {run_info.get('benchmark', '')}",
        "",
        f"- model: `{run_info.get('model', '')}`" + (f", reference: `{run_info['ref_model']}`" if run_info.get("ref_model") else ""),
        f"- rows in {counts.get('in', '?')} = scored {counts.get('scored', '?')} + quarantined "
        f"{counts.get('quarantined', '?')}" + (f"; {counts['recall_prefix']} rows used as the ReCaLL prefix are "
                                              "excluded from evaluation" if counts.get("recall_prefix") else ""),
        *labelled_prefix_lines(run_info.get("con_recall_prefix_ids")),
        "- AUC with a bootstrap 95% CI (1000 resamples, seeded). Larger score = more likely member, for every method.",
        *_neighbour_lines(run_info.get("neighbours")),
        "",
        report_table(records, blind),
        "",
        "ROC plots: " + ", ".join(f"`{p}`" for p in plot_names),
        "",
    ]
    if compare:
        md += comparison_lines(records, compare)
    md += set_test_markdown(run_info.get("set_test"))
    md += generation_markdown(run_info.get("generation"), run_info.get("examples"))
    if run_info.get("trace"):
        md += ["## Traced to the corpus", "", trace_sentence(run_info["trace"]), ""]
    return "\n".join(md)
