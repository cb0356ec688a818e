"""What `evaluate` and `rescore` write into OUT: scores.parquet, metrics.json, run.json, the ROC plots, report.md,
report.html and DC-PDD's token counts. The content comes from scoring/ (pure); the writes are here, atomic, so a
crash leaves the old file or the whole new one."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from curation.io.atomic import atomic_write_bytes, atomic_write_parquet, atomic_write_text
from scoring.detectors import Method


def write_outputs(out_dir: Path, scores: pa.Table, records: list[dict], methods: Sequence[Method],
                  run_info: Mapping, blind: Mapping[str, float] | None = None, write_scores: bool = True) -> Path:
    """Every file of an evaluation; returns report.md's path."""
    from scoring.reports.evaluation_page import evaluation_page
    from scoring.reports.evaluation_report import plot_rocs, plot_score_histograms, report_markdown
    from jobs.kit.report_out import write_page
    from scoring.stats.comparison import plot_comparison

    out_dir.mkdir(parents=True, exist_ok=True)
    if write_scores:  # evaluate's workers wrote scores.parquet/ as part files already
        atomic_write_parquet(scores, out_dir / "scores.parquet")
    atomic_write_text(out_dir / "metrics.json", json.dumps(records, indent=2, default=float))
    atomic_write_text(out_dir / "run.json", json.dumps(run_info, indent=2, default=str))
    plots = []
    for name, png in plot_rocs(scores, methods):
        atomic_write_bytes(out_dir / name, png)
        plots.append(out_dir / name)
    compare = run_info.get("compare_to")
    if compare:
        png = plot_comparison(records, "this benchmark")
        if png is not None:
            atomic_write_bytes(out_dir / "compare_auc.png", png)
        compare["plot"] = png is not None
    path = out_dir / "report.md"
    atomic_write_text(path, report_markdown(records, run_info, blind, [p.name for p in plots]))
    hist_png = plot_score_histograms(scores, methods)
    hist = None
    if hist_png is not None:
        hist = out_dir / "scores_hist.png"
        atomic_write_bytes(hist, hist_png)
    write_page(out_dir, evaluation_page(out_dir, records, run_info, blind, plots, hist))
    return path


def save_token_freq(counts: np.ndarray, path: Path) -> None:
    """token_freq.parquet: the counts DC-PDD's reference frequencies came from, so `rescore` can reuse them."""
    import pyarrow.parquet as pq

    from scoring.stats.evaluation import token_freq_table

    pq.write_table(token_freq_table(counts), path)
