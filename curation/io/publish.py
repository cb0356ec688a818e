"""Publishing a benchmark release to a local directory or an s3:// prefix without ever exposing a half-written one.

A release is built in a staging directory (local: a hidden sibling of the target, on the same filesystem, so that
renames are atomic; S3: a local temporary directory), then published in this order:

1. the old markers go first: `_SUCCESS`, then `manifest.json` (an overwrite can no longer look complete);
2. `data/` and `excluded/`: local, each directory is swapped in with one rename (the old one is moved aside and
   removed afterwards); S3, each object is one atomic PUT, and objects of an older release that the new one does
   not have are deleted;
3. `manifest.json` (atomic);
4. `_SUCCESS`, last.

A crash anywhere before step 4 leaves no `_SUCCESS`; before step 3, no manifest either. `release_state` tells a
complete release (a manifest or `_SUCCESS`; a release written before markers existed has only the manifest), a
partial one (data without a manifest) and an empty location apart.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from curation.io.outputs import SUCCESS, Location, new_run_id, sha256_bytes

MANIFEST = "manifest.json"
RELEASE_DIRS = ("data", "excluded")


def destination(out: str | os.PathLike) -> Location:
    return Location(str(out))


def release_state(dest: Location) -> str:
    """'complete', 'partial' or 'absent'."""
    if dest.exists(SUCCESS) or dest.exists(MANIFEST):
        return "complete"
    if any(dest.list(d) for d in RELEASE_DIRS):
        return "partial"
    return "absent"


def read_manifest(dest: Location) -> dict:
    return dest.read_json(MANIFEST)


@contextlib.contextmanager
def staging(dest: Location) -> Iterator[Path]:
    """An empty local directory to write the release into; removed on exit (published or not)."""
    if dest.s3:
        with tempfile.TemporaryDirectory(prefix="tidemark-release-") as tmp:
            yield Path(tmp)
        return
    root = dest.root
    root.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{root.name}.staging-", dir=root.parent))
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def publish(stage: Path, dest: Location, *, job: str, rows: int) -> dict:
    """Move a staged release (data/, excluded/, manifest.json) to `dest` in the crash-safe order above and write
    `_SUCCESS`; returns the marker's content."""
    manifest_bytes = (stage / MANIFEST).read_bytes()
    dest.clear_complete()
    dest.delete(MANIFEST)
    if dest.s3:
        new = set()
        for d in RELEASE_DIRS:
            if (stage / d).is_dir():
                new.update(f"{d}/{p.relative_to(stage / d).as_posix()}" for p in (stage / d).rglob("*") if p.is_file())
        for rel in sorted(new):
            dest.upload_file(stage / rel, rel)
        for d in RELEASE_DIRS:
            for rel in dest.list(d):
                if rel not in new:
                    dest.delete(rel)
    else:
        dest.ensure()
        trash = Path(tempfile.mkdtemp(prefix=f".{dest.root.name}.old-", dir=dest.root.parent))
        try:
            for d in RELEASE_DIRS:
                target = dest.root / d
                if target.exists():
                    os.rename(target, trash / d)
                if (stage / d).exists():
                    os.rename(stage / d, target)
        finally:
            shutil.rmtree(trash, ignore_errors=True)
    dest.write_bytes(MANIFEST, manifest_bytes)
    info = {"job": job, "rows": int(rows), "manifest_sha256": sha256_bytes(manifest_bytes), "run_id": new_run_id()}
    dest.mark_complete(info)
    return info
