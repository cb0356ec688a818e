"""From a token-stats table to a score table, metrics, ROC plots and a report. No model, no Ray: `evaluate`
and `rescore` share every line of it, which is why rescoring reproduces evaluation exactly.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scoring.detectors import Method
from scoring.detectors.base import distribution_gate
from scoring.detectors.dc_pdd import TOKEN_FREQ
from scoring.stats.metrics import apply_threshold, calibrate_threshold, summarize
from scoring.lm.tokenstats import views_by_name
from scoring.lm.views import ORIGINAL

ALL = "all"


def compute_scores(token_stats: pa.Table, rows: Sequence[Mapping], methods: Sequence[Method],
                   resources: Mapping[str, object] | None = None) -> pa.Table:
    """One row per evaluated example (`rows`: id, label, bucket, in_eval), one float column per method."""
    ids = [str(r["id"]) for r in rows]
    distribution_gate(methods, token_sources(token_stats))
    views: dict[str, object] = dict(views_by_name(token_stats, ids))
    views.update(resources or {})
    if ORIGINAL not in views:
        raise ValueError("token stats have no 'original' view")
    cols: dict[str, object] = {
        "id": ids,
        "label": [int(r["label"]) for r in rows],
        "bucket": [None if r.get("bucket") is None else str(r["bucket"]) for r in rows],
        "in_eval": [bool(r.get("in_eval", True)) for r in rows],
    }
    for m in methods:
        missing = [v for v in m.needs if v not in views]
        if missing:
            raise ValueError(f"{m.column} needs {missing}, which this token-stats table does not hold")
        cols[m.column] = m(views[ORIGINAL], views).astype(np.float64)
    return pa.table(cols)


def token_sources(token_stats: pa.Table) -> dict[str, set]:
    """Each view's `lp_source` values (older tables, without the column, come from the weights)."""
    if "lp_source" not in token_stats.column_names:
        return {}
    sources: dict[str, set] = {}
    for r in token_stats.select(["view", "lp_source"]).group_by(["view", "lp_source"]).aggregate([]).to_pylist():
        sources.setdefault(r["view"], set()).add(r["lp_source"])
    return sources


def _groups(scores: pa.Table) -> list[tuple[str, np.ndarray]]:
    in_eval = np.asarray(scores.column("in_eval").to_numpy(zero_copy_only=False), dtype=bool)
    buckets = scores.column("bucket")
    out = [(ALL, in_eval)]
    # Arrow masks, not a Python string per row: the driver reads score columns of millions of rows.
    for b in sorted((b for b in pc.unique(buckets).to_pylist() if b), key=lambda x: (len(x), x)):
        out.append((b, in_eval & np.asarray(pc.fill_null(pc.equal(buckets, b), False).to_numpy(), dtype=bool)))
    return out


def calibration_split(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A seeded, label-stratified boolean mask of the calibration part."""
    rng = np.random.default_rng(seed)
    mask = np.zeros(labels.size, dtype=bool)
    for cls in (0, 1):
        idx = np.flatnonzero(labels == cls)
        rng.shuffle(idx)
        mask[idx[: int(round(fraction * idx.size))]] = True
    return mask


def compute_metrics(scores: pa.Table, methods: Sequence[Method], *, seed: int = 0, n_bootstrap: int = 1000,
                    calibrate: str = "accuracy", calib_fraction: float = 0.3,
                    counts: Mapping[str, int] | None = None) -> list[dict]:
    """metrics.json: one record per method × bucket (and "all"). Each record also carries a threshold calibrated
    on a stratified calibration part of that bucket and its accuracy/F1/TPR/FPR on the rest."""
    labels_all = scores.column("label").to_numpy().astype(np.int64)
    records = []
    for m in methods:
        s_all = scores.column(m.column).to_numpy().astype(np.float64)
        for bucket, mask in _groups(scores):
            y, s = labels_all[mask], s_all[mask]
            rec = {"method": m.name, "params": dict(m.params), "column": m.column, "bucket": bucket,
                   **summarize(y, s, n_bootstrap=n_bootstrap, seed=seed)}
            finite = np.isfinite(s)
            rec["n_nan"] = int((~finite).sum())
            y, s = y[finite], s[finite]
            calib = calibration_split(y, calib_fraction, seed)
            if calibrate and 0 < y[calib].sum() < calib.sum() and (~calib).sum():
                th = calibrate_threshold(y[calib], s[calib], objective=calibrate)
                rec["calibrated"] = {"calib_n": int(calib.sum()), **apply_threshold(th, y[~calib], s[~calib])}
            if counts:
                rec.update({f"rows_{k}": int(v) for k, v in counts.items()})
            records.append(rec)
    return records


def plot_rocs(scores: pa.Table, methods: Sequence[Method], out_dir: Path) -> list[Path]:
    """roc_<bucket>.png: one ROC curve per method, log-free axes with the chance diagonal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import auc, roc_curve

    labels = scores.column("label").to_numpy().astype(np.int64)
    paths = []
    for bucket, mask in _groups(scores):
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
        path = out_dir / f"roc_{bucket}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def plot_score_histograms(scores: pa.Table, methods: Sequence[Method], out_dir: Path) -> Path | None:
    """scores_hist.png: per detector, the scores of members and of non-members (evaluated rows, all buckets), so a
    reader sees how far apart the two classes are, not only the AUC. From the score columns already in memory."""
    labels = scores.column("label").to_numpy().astype(np.int64)
    mask = _groups(scores)[0][1]
    panels = []
    for m in methods:
        s = scores.column(m.column).to_numpy().astype(np.float64)[mask]
        y = labels[mask][np.isfinite(s)]
        s = s[np.isfinite(s)]
        if 0 < y.sum() < y.size:
            panels.append((m.column, s[y == 1], s[y == 0]))
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    path = out_dir / "scores_hist.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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


def write_outputs(out_dir: Path, scores: pa.Table, records: list[dict], methods: Sequence[Method],
                  run_info: Mapping, blind: Mapping[str, float] | None = None, write_scores: bool = True) -> Path:
    from curation.io.atomic import atomic_write_parquet, atomic_write_text  # no torn files, even on a crash

    out_dir.mkdir(parents=True, exist_ok=True)
    if write_scores:  # evaluate's workers wrote scores.parquet/ as part files already
        atomic_write_parquet(scores, out_dir / "scores.parquet")
    atomic_write_text(out_dir / "metrics.json", json.dumps(records, indent=2, default=float))
    atomic_write_text(out_dir / "run.json", json.dumps(run_info, indent=2, default=str))
    plots = plot_rocs(scores, methods, out_dir)
    compare = run_info.get("compare_to")
    if compare:
        from scoring.stats.comparison import plot_comparison

        compare["plot"] = plot_comparison(records, out_dir, "this benchmark") is not None
    counts = run_info.get("counts", {})
    md = [
        f"# Tidemark evaluation: {run_info.get('benchmark', '')}",
        "",
        f"- model: `{run_info.get('model', '')}`" + (f", reference: `{run_info['ref_model']}`" if run_info.get("ref_model") else ""),
        f"- rows in {counts.get('in', '?')} = scored {counts.get('scored', '?')} + quarantined "
        f"{counts.get('quarantined', '?')}" + (f"; {counts['recall_prefix']} rows used as the ReCaLL prefix are "
                                              "excluded from evaluation" if counts.get("recall_prefix") else ""),
        "- AUC with a bootstrap 95% CI (1000 resamples, seeded). Larger score = more likely member, for every method.",
        *_neighbour_lines(run_info.get("neighbours")),
        "",
        report_table(records, blind),
        "",
        "ROC plots: " + ", ".join(f"`{p.name}`" for p in plots),
        "",
    ]
    if compare:
        from scoring.stats.comparison import comparison_lines

        md += comparison_lines(records, compare)
    path = out_dir / "report.md"
    atomic_write_text(path, "\n".join(md))
    from scoring.reports.evaluation_page import evaluation_page
    from scoring.reports.html import write_page

    hist = plot_score_histograms(scores, methods, out_dir)
    write_page(out_dir, evaluation_page(out_dir, records, run_info, blind, plots, hist))
    return path


def save_token_freq(counts: np.ndarray, path: Path) -> None:
    import pyarrow.parquet as pq

    nz = np.flatnonzero(counts)
    table = pa.table({"token_id": nz.astype(np.int64), "count": counts[nz].astype(np.int64)})
    pq.write_table(table.replace_schema_metadata({"vocab_size": str(counts.size)}), path)


def load_token_freq(path: Path) -> dict[str, np.ndarray]:
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    size = int((t.schema.metadata or {}).get(b"vocab_size", b"0")) or int(max(t.column("token_id").to_pylist()) + 1)
    counts = np.zeros(size, dtype=np.int64)
    counts[np.asarray(t.column("token_id").to_pylist(), dtype=np.int64)] = t.column("count").to_pylist()
    return {TOKEN_FREQ: counts}
