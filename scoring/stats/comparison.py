"""One evaluation beside another: `evaluate --compare-to ORIGINAL` puts, next to each AUC of (say) a paraphrased
benchmark, the AUC of the same detector and bucket on the original, with the difference and a bar chart. The
original's numbers come from its own evaluation's metrics.json; nothing here scores anything."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np


def attach_original(records: Sequence[dict], original: Sequence[dict]) -> list[dict]:
    """Each record gains `original_auc`, `original_auc_ci` and `auc_change` (this − original) where the original
    evaluated the same column in the same bucket (None where it did not)."""
    by = {(r["column"], r["bucket"]): r for r in original}
    out = []
    for r in records:
        o = by.get((r["column"], r["bucket"]))
        extra = {"original_auc": None, "original_auc_ci": None, "auc_change": None}
        if o is not None:
            extra = {"original_auc": o["auc"], "original_auc_ci": o.get("auc_ci"),
                     "auc_change": r["auc"] - o["auc"] if np.isfinite(r["auc"]) and np.isfinite(o["auc"]) else None}
        out.append({**r, **extra})
    return out


def comparison_table(records: Sequence[dict], bucket: str = "all") -> str:
    """Markdown: detector × (AUC here, AUC on the original, change), for one bucket."""
    lines = ["| method | AUC | AUC on the original | change |", "|---|---|---|---|"]
    for r in records:
        if r["bucket"] != bucket:
            continue
        here = "n/a" if not np.isfinite(r["auc"]) else f"{r['auc']:.3f}"
        orig = "n/a" if r.get("original_auc") is None or not np.isfinite(r["original_auc"]) else f"{r['original_auc']:.3f}"
        change = "" if r.get("auc_change") is None else f"{r['auc_change']:+.3f}"
        lines.append(f"| {r['column']} | {here} | {orig} | {change} |")
    return "\n".join(lines)


def plot_comparison(records: Sequence[dict], label: str = "this benchmark", bucket: str = "all") -> bytes | None:
    """compare_auc.png's bytes: paired bars per detector, the original's AUC and this one's, with the 0.5 chance line."""
    rows = [r for r in records if r["bucket"] == bucket and r.get("original_auc") is not None]
    if not rows:
        return None
    from scoring.reports.figures import png_bytes, pyplot

    plt = pyplot()
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(5.5, 0.7 * len(rows) + 2), 4))
    ax.bar(x - 0.2, [r["original_auc"] for r in rows], 0.4, label="original", color="#8da0cb")
    ax.bar(x + 0.2, [r["auc"] for r in rows], 0.4, label=label, color="#fc8d62")
    ax.axhline(0.5, ls="--", c="grey", lw=0.8)
    ax.set_xticks(x, [r["method"] for r in rows], rotation=40, ha="right", fontsize=8)
    ax.set(ylabel="ROC-AUC", ylim=(0, 1), title=f"AUC, original vs {label} (bucket {bucket})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return png_bytes(fig)


def original_metrics(location, what: str) -> list[dict]:
    """The metrics.json of an earlier evaluation (a local directory or s3:// prefix, `curation.io.outputs.Location`)."""
    if not location.exists("metrics.json"):
        raise FileNotFoundError(f"{what} has no metrics.json")
    return list(location.read_json("metrics.json"))


def comparison_lines(records: Sequence[dict], info: Mapping | None) -> list[str]:
    """report.md's section for a comparison (empty without one)."""
    if not info:
        return []
    return ["", f"## Against the original ({info['original']})", "",
            "Each detector's AUC here beside its AUC on the original benchmark (same model and settings); "
            "change = here − original.", "", comparison_table(records), "",
            *(["![AUC original vs this](compare_auc.png)", ""] if info.get("plot") else [])]
