"""Atomic local file writes: readers see the old file or the whole new one, never a torn one, even if the writer
crashes half way. The bytes go to a hidden temporary file in the same directory, are fsynced, and are renamed over
the target (`os.replace`, atomic on POSIX). Plain Python; curation/io/outputs.py builds local and s3:// outputs on it.
"""
from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def parquet_bytes(table, **options: Any) -> bytes:
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf, **options)
    return buf.getvalue()


def atomic_write_parquet(table, path: str | os.PathLike, **options: Any) -> None:
    atomic_write_bytes(path, parquet_bytes(table, **options))
