"""A versioned release's layout and manifest: DIR/data/length<N>.parquet, DIR/excluded/, DIR/manifest.json.

Byte-identical data files for the same config and inputs: rows are sorted by id, the Arrow schema is fixed (no
inferred types, no pandas metadata), one file per configured bucket (`data/length<N>.parquet`, WikiMIA's naming,
written even when empty so that the file set depends only on the config), and nothing time-dependent is written.
excluded/ is one file (excluded.parquet) or, past a million exclusions, parts by hash of id
(curation/release/output.py writes both). The manifest is written last: a directory with a manifest.json is a
complete release.
"""
from __future__ import annotations

import hashlib
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Iterable, Mapping

import pyarrow as pa


BENCHMARK_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("input", pa.string()),
    ("label", pa.int64()),  # 1 = member
    ("bucket", pa.int64()),  # words the input was truncated to
    ("source", pa.string()),
    ("created_at", pa.timestamp("us", tz="UTC")),
    ("url", pa.string()),
])
PARQUET_OPTIONS = {"compression": "zstd", "use_dictionary": True, "write_statistics": True}
# What changed in the layout, for readers of older and newer releases (the data files' bytes did not change).
RELEASE_FORMAT = {
    "version": 2,
    "notes": [
        "2: excluded/ holds one file, excluded.parquet, up to a million exclusions, else part-NNNNN-of-MMMMM.parquet "
        "files by hash of id; read excluded/ as a directory. Exclusion ties on (id, stage, reason) are ordered by "
        "detail. The shift audit and the debiased mode fit on at most shift_audit.max_rows / debias.max_rows rows "
        "(a seeded hash of the row id picks them; recorded under shift_audit.sample / debias.capped).",
        "1: data/length<N>.parquet per bucket, excluded/excluded.parquet, manifest.json, _SUCCESS.",
    ],
}


def tool_version() -> str:
    try:
        return version("tidemark")
    except PackageNotFoundError:  # a source checkout that was never installed
        return "0+unknown"


def data_file_name(bucket: int) -> str:
    return f"length{bucket}.parquet"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def build_manifest(*, cfg: Mapping[str, Any], overrides: Iterable[str], source_snapshot: Mapping[str, Any],
                   counts: Mapping[str, Any], files: Mapping[str, Any], shift_audit: Any,
                   runner: str, cutoff_from: Mapping[str, Any] | None = None) -> dict:
    """The release's manifest. `cutoff_from`, where the cutoffs came from a measured training cutoff
    (`build-benchmark --cutoff-from`), is recorded as `cutoff_from` (absent otherwise)."""
    cut = cfg["cutoffs"]
    measured = {"cutoff_from": dict(cutoff_from)} if cutoff_from is not None else {}
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
        **measured,
        "source": dict(source_snapshot),
        "buckets": {"lengths": list(cfg["buckets"]), "mode": cfg["bucket_mode"], "unit": "whitespace words"},
        "counts": dict(counts),
        "columns": list(BENCHMARK_SCHEMA.names),
        "files": dict(files),
        "runner": runner,
        "shift_audit": shift_audit,  # the blind-baseline audit of the release rows (curation/shift/audit.py)
        "release_format": RELEASE_FORMAT,
    }


def write_manifest(out: Path, manifest: Mapping[str, Any]) -> Path:
    path = out / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False, default=str) + "\n")
    return path
