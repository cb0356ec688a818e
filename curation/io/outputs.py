"""Where job outputs go: a local directory or an s3:// prefix, with atomic files and a completion marker.

    loc = Location("s3://bucket/releases/stackmia-2026-10")   # or a local directory
    loc.write_bytes("data/length32.parquet", payload)           # atomic per file
    loc.mark_complete({"job": "build-benchmark", ...})           # `_SUCCESS`, always written last
    loc.completion()                                              # the marker's JSON, or None

The contract every job keeps: **a location is complete only when its `_SUCCESS` marker exists**, and the marker is
written after every other file (for a benchmark release, after `manifest.json`). A job clears the marker before it
writes anything, so a crashed or half-overwritten run never looks complete. On top of that each file is written
atomically, so a reader never sees a torn file:
- local: the bytes go to a hidden temporary file in the same directory, are fsynced, and are renamed over the target
  (`os.replace`, atomic on POSIX);
- S3: one `PutObject` per file up to `multipart_threshold()` bytes (64 MiB, `TIDEMARK_S3_MULTIPART_BYTES`), a
  multipart upload above it (a single PutObject stops at 5 GB); either way S3 makes the object visible all at once,
  when the upload completes (never a partial object).

S3 goes through boto3, like curation/io/storage.py, because pyarrow's S3 filesystem cannot send the
requester-pays header that public buckets such as arXiv's need. Credentials are never passed in here: boto3 reads
them from the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE), a web
identity (EKS IRSA) or the instance profile. `endpoint_url` and `region` may be given, or come from boto3's own
environment variables (AWS_ENDPOINT_URL_S3, AWS_DEFAULT_REGION).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import posixpath
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterator, Mapping

# Local atomic writes live in scoring/ (the lowest layer), so that scoring/stats/evaluation.py uses them too.
from curation.io.atomic import atomic_write_bytes, parquet_bytes

SUCCESS = "_SUCCESS"
MULTIPART_ENV = "TIDEMARK_S3_MULTIPART_BYTES"
_DEFAULT_MULTIPART = 64 << 20


def multipart_threshold() -> int:
    """Files larger than this go to S3 as multipart uploads (parts of at least 5 MiB, S3's minimum)."""
    return int(os.environ.get(MULTIPART_ENV) or _DEFAULT_MULTIPART)


def _transfer_config():
    from boto3.s3.transfer import TransferConfig

    threshold = multipart_threshold()
    return TransferConfig(multipart_threshold=threshold, multipart_chunksize=max(threshold, 5 << 20))


def is_s3(uri: str | os.PathLike) -> bool:
    return str(uri).startswith("s3://")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- a location: local dir or s3:// prefix

class Location:
    """A directory-like destination. Relative names use forward slashes (`shards/token_stats-00001.parquet`)."""

    def __init__(self, uri: str | os.PathLike, *, requester_pays: bool = False, endpoint_url: str | None = None,
                 region: str | None = None):
        self.uri = str(uri).rstrip("/") if is_s3(uri) else str(uri)
        self.s3 = is_s3(self.uri)
        self.requester_pays = bool(requester_pays)
        self.endpoint_url = endpoint_url
        self.region = region
        if self.s3:
            self.bucket, _, prefix = self.uri[len("s3://"):].partition("/")
            if not self.bucket:
                raise ValueError(f"not an s3://bucket/prefix location: {uri!r}")
            self.prefix = prefix.strip("/")
            self._s3 = None
        else:
            self.root = Path(self.uri)

    def __repr__(self) -> str:
        return f"Location({self.uri!r})"

    # ---- naming
    def child(self, rel: str) -> str:
        """The full path or URI of `rel` under this location."""
        return f"{self.uri}/{rel}" if self.s3 else str(self.root / rel)

    def _key(self, rel: str) -> str:
        return posixpath.join(self.prefix, rel) if self.prefix else rel

    # ---- S3 plumbing
    @property
    def client(self):
        if self._s3 is None:
            from curation.io.storage import s3_client

            self._s3 = s3_client({"endpoint_url": self.endpoint_url, "region": self.region})
        return self._s3

    def _payer(self) -> dict:
        from curation.io.storage import request_payer

        return request_payer({"requester_pays": self.requester_pays})

    # ---- primitives
    def write_bytes(self, rel: str, data: bytes) -> dict:
        """Atomic write of one file; returns {bytes, sha256} for manifests and markers."""
        if self.s3 and len(data) > multipart_threshold():
            self.client.upload_fileobj(io.BytesIO(data), self.bucket, self._key(rel), ExtraArgs=self._payer(),
                                       Config=_transfer_config())
        elif self.s3:
            self.client.put_object(Bucket=self.bucket, Key=self._key(rel), Body=data, **self._payer())
        else:
            atomic_write_bytes(self.root / rel, data)
        return {"bytes": len(data), "sha256": sha256_bytes(data)}

    def write_text(self, rel: str, text: str) -> dict:
        return self.write_bytes(rel, text.encode("utf-8"))

    def write_json(self, rel: str, obj: Any) -> dict:
        return self.write_text(rel, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")

    def write_parquet(self, rel: str, table, **options: Any) -> dict:
        return {"rows": table.num_rows, **self.write_bytes(rel, parquet_bytes(table, **options))}

    def read_bytes(self, rel: str) -> bytes:
        if self.s3:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(rel), **self._payer())["Body"].read()
        return (self.root / rel).read_bytes()

    def read_json(self, rel: str) -> Any:
        return json.loads(self.read_bytes(rel))

    def read_parquet(self, rel: str, columns=None):
        """One Parquet file as a table (only `columns` when given)."""
        import pyarrow.parquet as pq

        if self.s3:
            return pq.read_table(io.BytesIO(self.read_bytes(rel)), columns=columns)
        return pq.read_table(self.root / rel, columns=columns)

    def exists(self, rel: str) -> bool:
        if self.s3:
            from botocore.exceptions import ClientError

            try:
                self.client.head_object(Bucket=self.bucket, Key=self._key(rel), **self._payer())
                return True
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                    return False
                raise
        return (self.root / rel).is_file()

    def list(self, under: str = "") -> list[str]:
        """Relative names of every file under `under` (recursive, sorted; temporary files skipped)."""
        if self.s3:
            base = self._key(under).rstrip("/")
            prefix = base + "/" if base else ""
            names = []
            for page in self.client.get_paginator("list_objects_v2").paginate(
                    Bucket=self.bucket, Prefix=prefix, **self._payer()):
                for obj in page.get("Contents", []):
                    key = obj["Key"]
                    names.append(key[len(self.prefix) + 1:] if self.prefix else key)
            return sorted(names)
        top = self.root / under
        if not top.is_dir():
            return []
        return sorted(p.relative_to(self.root).as_posix() for p in top.rglob("*")
                      if p.is_file() and not p.name.endswith(".tmp"))

    def delete(self, rel: str) -> None:
        if self.s3:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(rel), **self._payer())
        else:
            with contextlib.suppress(FileNotFoundError):
                (self.root / rel).unlink()

    def delete_tree(self, under: str) -> None:
        if self.s3:
            for rel in self.list(under):
                self.delete(rel)
        else:
            shutil.rmtree(self.root / under, ignore_errors=True)

    def upload_file(self, local: str | os.PathLike, rel: str) -> dict:
        """Copy one local file here. To S3 it streams from disk (multipart above the threshold), so a file of any
        size goes up without being read into memory."""
        local = Path(local)
        if not self.s3 or local.stat().st_size <= multipart_threshold():
            return self.write_bytes(rel, local.read_bytes())
        digest = hashlib.sha256()
        with open(local, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        self.client.upload_file(str(local), self.bucket, self._key(rel), ExtraArgs=self._payer(),
                                Config=_transfer_config())
        return {"bytes": local.stat().st_size, "sha256": digest.hexdigest()}

    def upload_tree(self, local_dir: str | os.PathLike, *, skip: tuple[str, ...] = ()) -> list[str]:
        """Copy every file under `local_dir` here (each one atomically), skipping relative names that start with
        any of `skip`; for a local location that is the same directory, nothing to do. Returns the names."""
        local_dir = Path(local_dir)
        if not self.s3 and local_dir.resolve() == self.root.resolve():
            return []
        names = []
        for p in sorted(local_dir.rglob("*")):
            rel = p.relative_to(local_dir).as_posix()
            if p.is_file() and not rel.startswith(skip) and p.name != SUCCESS and not p.name.endswith(".tmp"):
                self.upload_file(p, rel)
                names.append(rel)
        return names

    def download(self, rel: str, local: str | os.PathLike) -> Path:
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        if self.s3:
            atomic_write_bytes(local, self.read_bytes(rel))
        else:
            shutil.copyfile(self.root / rel, local)
        return local

    # ---- completion marker
    def completion(self) -> dict | None:
        """The `_SUCCESS` marker's content when this location holds a complete output, else None."""
        if not self.exists(SUCCESS):
            return None
        try:
            return json.loads(self.read_bytes(SUCCESS) or b"{}")
        except json.JSONDecodeError:
            return {}

    def mark_complete(self, info: Mapping[str, Any]) -> None:
        """Write `_SUCCESS` (call it last: every other file must already be in place)."""
        self.write_json(SUCCESS, dict(info))

    def clear_complete(self) -> None:
        """Remove `_SUCCESS` before rewriting anything here, so that a crash cannot leave a stale marker."""
        self.delete(SUCCESS)

    def ensure(self) -> None:
        if not self.s3:
            self.root.mkdir(parents=True, exist_ok=True)


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


@contextlib.contextmanager
def local_copy(uri: str, *, requester_pays: bool = False, endpoint_url: str | None = None,
               region: str | None = None) -> Iterator[str]:
    """A local path for an input that may live on S3: a file, or a prefix (e.g. a release) copied to a temporary
    directory that is removed on exit. Local paths pass through unchanged."""
    if not is_s3(uri):
        yield str(uri)
        return
    from curation.io import storage

    opts = {k: v for k, v in {"requester_pays": requester_pays, "endpoint_url": endpoint_url,
                              "region": region}.items() if v}
    files = storage.list_files(uri, **opts)
    if not files:
        raise FileNotFoundError(f"nothing found under {uri}")
    with tempfile.TemporaryDirectory(prefix="tidemark-input-") as tmp:
        if files == [uri]:  # one object
            target = os.path.join(tmp, storage.basename(uri))
            with storage.open_binary(uri, **opts) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, storage.CHUNK)
            yield target
            return
        root = os.path.join(tmp, storage.basename(uri) or "input")
        for f in files:
            target = os.path.join(root, *storage.relative(f, uri).split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with storage.open_binary(f, **opts) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, storage.CHUNK)
        yield root
