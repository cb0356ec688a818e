"""What identifies a scoring job, and where a job's outputs go (a local directory or an s3:// prefix).

- Identity: `model_identity` names a model's weights cheaply (file digests), `scoring_fingerprint` everything that
  changes a row's token stats (model, views, ReCaLL prefix, context, stride, batch size, device, tool version).
  Parts and their completion markers live in jobs/plane/part_store.py; the scoring itself in jobs/plane/part_loop.py.
- Outputs: every job opens OUT with `open_output` and makes its files in the local directory it returns (OUT
  itself, or a staging directory for S3); `publish` uploads them and writes `_SUCCESS` last; `completed_result`
  turns a re-run of a finished job with the same fingerprint into a no-op.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence

from curation.io.outputs import Location, sha256_bytes  # noqa: F401 - sha256_bytes is part of this module's API


def json_digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


# ---------------------------------------------------------------- identity of what is being scored

_CHUNK = 1 << 20


def file_digest(path: Path) -> str:
    """sha256 of a small file; of a large one, its size and three 1 MiB samples (start, middle, end). Retrained
    weights differ everywhere, so this tells two checkpoints apart without reading gigabytes, and it is the same on
    every machine (unlike a modification time)."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as fh:
        if size <= 3 * _CHUNK:
            digest.update(fh.read())
        else:
            for offset in (0, size // 2, size - _CHUNK):
                fh.seek(offset)
                digest.update(fh.read(_CHUNK))
    return digest.hexdigest()


def model_identity(model: str | None) -> Any:
    """What identifies a model's weights cheaply: for a local directory or file, each file's name and digest
    (`file_digest`); otherwise the name as given (a hub id, `smollm2`)."""
    if not model:
        return None
    path = Path(model.split("::")[0])
    if path.is_dir():
        return {"model": model, "files": [{"name": p.relative_to(path).as_posix(), "digest": file_digest(p)}
                                          for p in sorted(path.rglob("*")) if p.is_file()]}
    if path.is_file():
        return {"model": model, "digest": file_digest(path)}
    return {"model": model}


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tidemark")
    except PackageNotFoundError:
        return "0+unknown"


def scoring_fingerprint(cfg, views: Sequence[str], prefix_text: str | None) -> str:
    """Everything that changes the token stats of a row (not which rows: each shard records its own)."""
    facts = {
        "model": model_identity(cfg.model), "ref_model": model_identity(cfg.ref_model), "views": list(views),
        "prefix_text": prefix_text, "context": cfg.context, "stride": cfg.stride, "batch_size": cfg.batch_size,
        "device": "cuda" if cfg.gpus_per_actor > 0 else "cpu", "tool": tool_version(),
    }
    if getattr(cfg, "neighbour_model", None):  # only when set, so that earlier outputs keep their fingerprints
        facts["neighbour_model"] = model_identity(cfg.neighbour_model)
    return json_digest(facts)


JOB_FIELDS_IGNORED = ("out", "actors", "progress", "resume", "shard_size", "extra", "requester_pays", "runner",
                      "api_base", "api_concurrency", "api_rps", "api_max_retries", "api_timeout")  # where and how fast, not what


# ---------------------------------------------------------------- job outputs (local or s3://)

def local_output_dir(dest: Location) -> Path:
    """Where the job writes its non-shard outputs: OUT itself, or (S3) a staging directory named after OUT that
    survives the run, so the CLI can print the report."""
    if not dest.s3:
        dest.ensure()
        return dest.root
    stage = Path(tempfile.gettempdir()) / "tidemark-staging" / hashlib.sha256(dest.uri.encode()).hexdigest()[:16]
    shutil.rmtree(stage, ignore_errors=True)  # nothing from an earlier run may be uploaded with this one
    stage.mkdir(parents=True, exist_ok=True)
    return stage


def completed_result(dest: Location, fingerprint: str, out: Path) -> dict | None:
    """The recorded result of a finished job with this fingerprint, else None."""
    info = dest.completion()
    if not info or info.get("fingerprint") != fingerprint:
        return None
    try:
        metrics = dest.read_json("metrics.json")
        run = dest.read_json("run.json")
        if dest.s3:
            dest.download("report.md", out / "report.md")
            if dest.exists("report.html"):  # outputs written before report.html existed have none
                dest.download("report.html", out / "report.html")
    except Exception:  # noqa: BLE001 - a marker without its files is not a finished job
        return None
    blind = None
    if dest.exists("blind_baseline.json"):
        res = dest.read_json("blind_baseline.json")
        blind = {"all": res["overall"]["auc"], **{str(b): v["auc"] for b, v in res.get("buckets", {}).items()}}
    return {"report": str(out / "report.md"), "metrics": metrics, "counts": run.get("counts", {}),
            "seconds": 0.0, "blind": blind, "skipped": True}


def publish(dest: Location, out: Path, info: dict) -> None:
    """Upload the outputs made in `out` (S3) and write `_SUCCESS` last."""
    dest.upload_tree(out)
    dest.mark_complete(info)


def open_output(uri: str, clear: bool = True) -> tuple[Location, Path]:
    """How every job opens its output: the destination (a local directory or an s3:// prefix) and the local
    directory where the job makes its files, after removing a stale `_SUCCESS`. The job calls `publish` when it
    has finished; a job that raises before that leaves OUT without `_SUCCESS`, so a crash never looks complete.
    A job that may find its own finished output there (evaluate: `completed_result`) opens with clear=False, looks,
    and clears the marker itself before it starts work."""
    dest = Location(uri)
    if clear:
        dest.clear_complete()
    return dest, local_output_dir(dest)
