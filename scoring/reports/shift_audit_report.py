"""The shift audit's shift_audit.md and shift_audit.png, as a string and PNG bytes (curation/shift/report.py writes
them). The audit's classifier names and flag threshold come in as arguments: scoring/ does not import curation/."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def _f(x, nd: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _row(name: str, r: dict, classifiers: Sequence[str]) -> str:
    lo, hi = (r.get("auc_ci") or [None, None])[:2]
    cls = r.get("classifiers", {})
    return (f"| {name} | {r['n']} | {r.get('n_member', '–')} | **{_f(r['auc'])}** | [{_f(lo)}, {_f(hi)}] | "
            f"{_f(r['tpr_at_1_fpr'])} | {_f(r['tpr_at_5_fpr'])} | {r.get('classifier', '–')} | "
            + " | ".join(_f(cls.get(c)) for c in classifiers if c in cls) + " |")


def markdown_table(result: dict, classifiers: Sequence[str]) -> str:
    """Per-bucket and overall blind AUCs as a markdown table (also pasted into docs); `classifiers`: the audit's
    classifier names in column order (curation/shift/audit.CLASSIFIERS)."""
    names = [c for c in classifiers if c in result["overall"].get("classifiers", {})]
    head = ("| bucket | n | members | blind AUC | 95% CI | TPR@1%FPR | TPR@5%FPR | best | "
            + " | ".join(f"{c} AUC" for c in names) + " |")
    lines = [head, "|" + "---|" * (8 + len(names))]
    for k, r in result.get("buckets", {}).items():
        lines.append(_row(k, r, classifiers))
    lines.append(_row("overall", result["overall"], classifiers))
    return "\n".join(lines)


def render_markdown(result: dict, classifiers: Sequence[str], flag_auc: float) -> str:
    """shift_audit.md: the verdict, the AUC table, how the blind AUC was measured, the most separating features."""
    o = result["overall"]
    verdict = (f"**Flagged**: a classifier that never sees the model separates members from non-members with "
               f"AUC {_f(o['auc'])} (> {result.get('flag_auc', flag_auc):.2f}). A detector's AUC on this "
               f"benchmark measures distribution shift as much as membership; compare it with the blind AUC."
               if result.get("flagged") else
               f"No strong blind separability: best blind AUC {_f(o['auc'])} "
               f"(≤ {result.get('flag_auc', flag_auc):.2f}).")
    cfg = result.get("config", {})
    parts = ["# Blind-baseline shift audit", "", verdict, "", markdown_table(result, classifiers), "",
             f"Blind AUC = the best of {', '.join(cfg.get('classifiers', classifiers))} (out-of-fold, "
             f"{cfg.get('n_folds', '?')}-fold "
             f"{cfg.get('cv', '')}, grouping: {cfg.get('grouping', '?')}); CI = percentile bootstrap "
             f"({cfg.get('n_bootstrap', '?')} resamples). Cutoff year: {cfg.get('cutoff_year')}."]
    if "documents" in result:
        parts += ["", "## Document level (mean window score per document)", "",
                  markdown_table(result["documents"], classifiers)]
    feats = result.get("top_features") or []
    if feats:
        parts += ["", "## Most separating features", "",
                  "| feature | kind | points to | weight | member docs | non-member docs |",
                  "|---|---|---|---|---|---|"]
        for f in feats:
            parts.append(f"| `{f['feature']}` | {f['kind']} | {f['direction']} | {f['weight']:.2f} | "
                         f"{f['member_docs']} | {f['nonmember_docs']} |")
    return "\n".join(parts) + "\n"


def plot_png(result: dict, flag_auc: float) -> bytes:
    """shift_audit.png's bytes: the blind AUC per bucket (and overall) with CI whiskers."""
    from scoring.reports.figures import png_bytes, pyplot

    plt = pyplot()
    items = list(result.get("buckets", {}).items()) + [("overall", result["overall"])]
    names = [k for k, _ in items]
    aucs = np.array([np.nan if r["auc"] is None else r["auc"] for _, r in items], dtype=float)
    ci = np.array([[np.nan if v is None else v for v in (r.get("auc_ci") or [np.nan, np.nan])] for _, r in items],
                  dtype=float)
    err = np.vstack([aucs - ci[:, 0], ci[:, 1] - aucs])
    err = np.where(np.isfinite(err), np.clip(err, 0, None), 0)
    fig, ax = plt.subplots(figsize=(1.2 * len(names) + 2, 3.2))
    ax.bar(names, aucs, yerr=err, capsize=4, color="#4c72b0")
    ax.axhline(0.5, color="grey", ls=":", lw=1, label="chance")
    ax.axhline(result.get("flag_auc", flag_auc), color="#c44e52", ls="--", lw=1, label="flag")
    ax.set_ylim(0, 1)
    ax.set_ylabel("blind AUC")
    ax.set_xlabel("bucket")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return png_bytes(fig, dpi=120)
