"""Writing a versioned release: DIR/data/*.parquet, DIR/excluded/excluded.parquet, DIR/manifest.json.

Byte-identical data files for the same config and inputs: rows are sorted by id, the Arrow schema is fixed (no
inferred types, no pandas metadata), one file per configured bucket (`data/length<N>.parquet`, WikiMIA's naming,
written even when empty so that the file set depends only on the config), and nothing time-dependent is written.
The manifest is written last: a directory with a manifest.json is a complete release.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from curation.document import QUARANTINE_COLUMNS

BENCHMARK_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("input", pa.string()),
    ("label", pa.int64()),  # 1 = member
    ("bucket", pa.int64()),  # words the input was truncated to
    ("source", pa.string()),
    ("created_at", pa.timestamp("us", tz="UTC")),
    ("url", pa.string()),
])
QUARANTINE_SCHEMA = pa.schema([(name, pa.string()) for name in QUARANTINE_COLUMNS])
PARQUET_OPTIONS = {"compression": "zstd", "use_dictionary": True, "write_statistics": True}


def tool_version() -> str:
    try:
        return version("tidemark")
    except PackageNotFoundError:  # a source checkout that was never installed
        return "0+unknown"


def data_file_name(bucket: int) -> str:
    return f"length{bucket}.parquet"


def prepare_out_dir(out: Path, overwrite: bool) -> None:
    """Refuse to mix two builds in one directory; with `overwrite`, clear what an earlier build wrote."""
    if (out / "manifest.json").exists() or (out / "data").exists():
        if not overwrite:
            raise FileExistsError(f"{out} already holds a release; pass --overwrite or choose another --out")
        for name in ("data", "excluded"):
            shutil.rmtree(out / name, ignore_errors=True)
        (out / "manifest.json").unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)


def write_table(rows: list[Mapping[str, Any]], schema: pa.Schema, path: Path) -> dict:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist([{k: r[k] for k in schema.names} for r in rows], schema=schema)
    pq.write_table(table, path, **PARQUET_OPTIONS)
    return {"rows": table.num_rows, "sha256": sha256_file(path)}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_release_files(out: Path, rows: list[dict], excluded: list[dict], buckets: Iterable[int]) -> dict:
    """Data files per bucket and the exclusion file; returns {relative path: {rows, sha256}} for the manifest."""
    files = {}
    for bucket in sorted(buckets):
        part = sorted((r for r in rows if r["bucket"] == bucket), key=lambda r: r["id"])
        name = f"data/{data_file_name(bucket)}"
        files[name] = write_table(part, BENCHMARK_SCHEMA, out / name)
    excluded = sorted(excluded, key=lambda e: (e["id"], e["stage"], e["reason"]))
    files["excluded/excluded.parquet"] = write_table(excluded, QUARANTINE_SCHEMA, out / "excluded/excluded.parquet")
    return files


def build_manifest(*, cfg: Mapping[str, Any], overrides: Iterable[str], source_snapshot: Mapping[str, Any],
                   counts: Mapping[str, Any], files: Mapping[str, Any], shift_audit: Any,
                   runner: str) -> dict:
    cut = cfg["cutoffs"]
    return {
        "name": cfg["name"],
        "tool": {"name": "tidemark", "version": tool_version()},
        "config": dict(cfg),
        "overrides": list(overrides),
        "cutoffs": {
            "member_before": cut["member_before"],
            "nonmember_after": cut["nonmember_after"],
            "nonmember_before": cut.get("nonmember_before"),
            "monthly_nonmembers": bool(cut.get("monthly_nonmembers")),
            "member_rule": "created_at < member_before and meta.activity_at (where the source has it) < "
                           "member_before",
            "nonmember_rule": "nonmember_after <= created_at (< nonmember_before when set)",
        },
        "source": dict(source_snapshot),
        "buckets": {"lengths": list(cfg["buckets"]), "mode": cfg["bucket_mode"], "unit": "whitespace words"},
        "counts": dict(counts),
        "columns": list(BENCHMARK_SCHEMA.names),
        "files": dict(files),
        "runner": runner,
        "shift_audit": shift_audit,  # reserved: filled by the shift audit (jobs/build_benchmark.py::_shift_audit)
    }


def write_manifest(out: Path, manifest: Mapping[str, Any]) -> Path:
    path = out / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False, default=str) + "\n")
    return path
