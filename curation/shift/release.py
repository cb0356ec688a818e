"""The shift audit on benchmarks and releases: reading a benchmark (jsonl, Parquet or a release directory) with its
buckets, the cutoff year from a release manifest, the audit a release build runs on a capped sample, and the blind
AUCs an evaluation shows beside its detectors (from the audit stored with a release)."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from curation.shift.audit import AUDIT_DEFAULTS, OVERALL, audit_rows
from curation.shift.report import jsonable

# --------------------------------------------------------------------------------------------------------------
# Loading benchmarks
# --------------------------------------------------------------------------------------------------------------
_BUCKET_FROM_NAME = re.compile(r"length[_-]?(\d+)", re.IGNORECASE)


def _read_table(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_benchmark(paths: str | Path | Sequence[str | Path]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows (`input`, `label`, optional `bucket`/`id`/…) and the release manifest ({} when there is none).

    Accepts jsonl / Parquet files, a release directory (DIR/data/*.parquet + manifest.json), or a directory of
    jsonl/Parquet files. When several files are read and rows carry no `bucket`, the bucket comes from the file
    name (`…length64…` -> 64, else the file stem), so WikiMIA's four files load as one bucketed benchmark."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    manifest: dict[str, Any] = {}
    for p in map(Path, paths):
        if p.is_dir():
            if (p / "manifest.json").is_file():
                manifest = json.loads((p / "manifest.json").read_text())
            data = p / "data" if (p / "data").is_dir() else p
            found = sorted(list(data.glob("*.parquet")) + list(data.glob("*.jsonl")))
            if not found:
                raise FileNotFoundError(f"no *.parquet or *.jsonl under {data}")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(p)
    rows: list[dict[str, Any]] = []
    for f in files:
        part = _read_table(f)
        m = _BUCKET_FROM_NAME.search(f.stem)
        fallback = int(m.group(1)) if m else (f.stem if len(files) > 1 else None)
        for r in part:
            if "input" not in r and "text" in r:
                r["input"] = r["text"]
            if "input" not in r or "label" not in r:
                raise ValueError(f"{f}: rows need `input` and `label` (got keys {sorted(r)})")
            if r.get("bucket") is None and fallback is not None:
                r["bucket"] = fallback
            r["_file"] = f.name
        rows += part
    return rows, manifest


def cutoff_year_from_manifest(manifest: dict[str, Any]) -> int | None:
    """The year non-members start (a release's `cutoffs.nonmember_after`, or a build config's), else None.
    A flat `cutoff`/`cutoff_year` key is accepted for hand-made benchmarks."""
    places = [manifest.get("cutoffs") or {}, (manifest.get("config") or {}).get("cutoffs") or {}, manifest]
    for where in places:
        for key in ("nonmember_after", "cutoff_year", "cutoff", "cutoff_date"):
            v = where.get(key)
            m = re.search(r"(1[5-9]\d\d|20\d\d)", str(v)) if v is not None else None
            if m:
                return int(m.group(1))
    return None



def audit_for_release(rows: Sequence[dict], cfg: dict[str, Any]) -> dict | None:
    """What build-benchmark stores under manifest["shift_audit"]: `audit_rows` over the release rows, with the
    cutoff year from cfg["cutoffs"]["nonmember_after"], the seed from cfg["seed"] and options from the optional
    cfg["shift_audit"] section (AUDIT_DEFAULTS). JSON-safe (NaN -> null). None when disabled; a dict with
    `error` when the rows cannot be cross-validated (e.g. one class only), so a build never fails on it."""
    opts = {**AUDIT_DEFAULTS, **(cfg.get("shift_audit") or {})}
    unknown = set(opts) - set(AUDIT_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown shift_audit option(s) {sorted(unknown)}; known: {sorted(AUDIT_DEFAULTS)}")
    if not opts["enabled"]:
        return None
    seed, n = int(cfg.get("seed", 0) or 0), len(rows)
    if n > int(opts["max_rows"]):  # the classifiers fit on a capped, seeded sample: the same cost on any corpus
        from curation.stages.sampling import sample_rank

        rows = sorted(rows, key=lambda r: sample_rank(seed, str(r["id"])))[: int(opts["max_rows"])]
    try:
        result = audit_rows([r["input"] for r in rows], [int(r["label"]) for r in rows],
                            [r.get("bucket") for r in rows], cutoff_year=cutoff_year_from_manifest(cfg),
                            n_folds=opts["n_folds"], seed=int(cfg.get("seed", 0) or 0),
                            n_bootstrap=opts["n_bootstrap"], group_prefix_words=opts["group_prefix_words"])
    except ValueError as e:
        return {"error": str(e), "n": len(rows)}
    if len(rows) < n:
        result["sample"] = {"rows": len(rows), "of": n, "max_rows": int(opts["max_rows"]),
                            "order": "sha256(seed, row id)"}
    return jsonable(result)


def stored_audit(path: str | Path) -> dict | None:
    """The `shift_audit` that build-benchmark stored in a local release's manifest.json, if there is one. For
    `evaluate`, which shows each detector's AUC next to `blind_aucs(result)` without auditing the release again."""
    manifest = Path(path) / "manifest.json"
    if not manifest.is_file():
        return None
    audit = json.loads(manifest.read_text()).get("shift_audit")
    return audit if isinstance(audit, dict) and "overall" in audit else None


def blind_aucs(result: dict) -> dict[str, float]:
    """{"all": overall blind AUC, "<bucket>": bucket blind AUC}: the column `evaluate` puts next to detectors."""
    out = {OVERALL: result["overall"]["auc"]}
    out.update({str(k): v["auc"] for k, v in result.get("buckets", {}).items()})
    return {k: float("nan") if v is None else float(v) for k, v in out.items()}  # a stored audit has null for NaN
