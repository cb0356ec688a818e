"""The shift audit's report files: JSON-safe values and the files `write_report` puts in a directory
(shift_audit.json, .md, .png); the Markdown and the plot are scoring/reports/shift_audit_report.py's."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from curation.shift.audit import CLASSIFIERS, FLAG_AUC

# --------------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------------
def jsonable(x):
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return None if not math.isfinite(float(x)) else float(x)  # NaN is not JSON
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    return x


def write_report(result: dict, out_dir: str | Path) -> None:
    """Write DIR/shift_audit.json, DIR/shift_audit.md and DIR/shift_audit.png (their content:
    scoring/reports/shift_audit_report.py)."""
    from scoring.reports.shift_audit_report import plot_png, render_markdown

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    clean = jsonable(result)
    (out / "shift_audit.json").write_text(json.dumps(clean, indent=2, ensure_ascii=False) + "\n")
    (out / "shift_audit.md").write_text(render_markdown(result, CLASSIFIERS, FLAG_AUC))
    (out / "shift_audit.png").write_bytes(plot_png(clean, FLAG_AUC))
