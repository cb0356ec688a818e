"""Plots as PNG bytes. scoring/ draws and never writes: the job that asked for a plot puts the bytes in its output
(jobs/kit/files.py), so a plot lands in a local directory or an s3:// prefix alike."""
from __future__ import annotations

import io


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (no display on a cluster worker)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_bytes(fig, dpi: int = 110) -> bytes:
    """The figure as PNG bytes (what `fig.savefig(path, dpi=dpi)` would write), then closed."""
    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format="png")
    pyplot().close(fig)
    return buf.getvalue()
