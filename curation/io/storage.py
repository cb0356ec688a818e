"""Where source files live: a local path or an s3:// prefix, behind four calls.

- `list_files(path)`: every file under a path (recursive, sorted, hidden names skipped), or the path itself.
- `open_binary(path)`: a streaming, read-only binary file object (S3: the GetObject body, never the whole object).
- `local_path(path)`: a local file name, for formats that must seek (7z, Parquet). S3 objects are downloaded to a
  temporary file that is removed on exit.
- `describe(path)`: size and checksum for a release manifest. Local files get an md5 (one streaming read); S3
  objects report the ETag and size from a HEAD, because re-reading a large dump just to hash it costs as much as
  parsing it. (An ETag is the md5 only for single-part uploads.)

S3 goes through boto3 rather than pyarrow.fs because public dumps such as arXiv's are requester-pays, which
pyarrow's S3 filesystem cannot send. Options come from the source section: `requester_pays` (bool),
`endpoint_url`, `region`.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import posixpath
import shutil
import tempfile
from typing import Any, BinaryIO, Iterator, Mapping

CHUNK = 1 << 20


def is_s3(path: str) -> bool:
    return str(path).startswith("s3://")


def split_s3(path: str) -> tuple[str, str]:
    bucket, _, key = str(path)[len("s3://"):].partition("/")
    if not bucket:
        raise ValueError(f"not an s3://bucket/key path: {path!r}")
    return bucket, key


def basename(path: str) -> str:
    return posixpath.basename(str(path).rstrip("/")) if is_s3(path) else os.path.basename(os.path.normpath(path))


def relative(path: str, root: str) -> str:
    """`path` relative to `root` with forward slashes (stable ids on every OS); the base name if root is a file."""
    if is_s3(path):
        prefix = str(root).rstrip("/") + "/"
        return path[len(prefix):] if path.startswith(prefix) else posixpath.basename(path)
    if os.path.isfile(root):
        return os.path.basename(path)
    return os.path.relpath(path, root).replace(os.sep, "/")


def s3_options(cfg: Mapping[str, Any] | None) -> dict:
    cfg = cfg or {}
    return {k: cfg.get(k) for k in ("requester_pays", "endpoint_url", "region") if cfg.get(k) is not None}


def s3_client(opts: Mapping[str, Any]):
    """The one way Tidemark makes an S3 client (sources, outputs, arXiv): boto3's own credential chain (the
    environment, a profile, an instance or web identity), with `endpoint_url` and `region` from `opts`."""
    import boto3

    return boto3.client("s3", endpoint_url=opts.get("endpoint_url"), region_name=opts.get("region"))


def request_payer(opts: Mapping[str, Any]) -> dict:
    """The extra arguments of every S3 call on a requester-pays bucket (arXiv's): RequestPayer=requester."""
    return {"RequestPayer": "requester"} if opts.get("requester_pays") else {}


def list_files(path: str, **opts: Any) -> list[str]:
    """Every file under `path` (or `[path]` when it names one file), sorted so that shard order is stable."""
    if is_s3(path):
        bucket, key = split_s3(path)
        from botocore.exceptions import ClientError

        s3, found = s3_client(opts), []
        if key and not key.endswith("/"):
            try:  # an exact object key is a file, not a prefix
                s3.head_object(Bucket=bucket, Key=key, **request_payer(opts))
                return [path]
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                    raise
        prefix = key.rstrip("/") + "/" if key else ""
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, **request_payer(opts)):
            for obj in page.get("Contents", []):
                name = posixpath.basename(obj["Key"])
                if name and not name.startswith("."):
                    found.append(f"s3://{bucket}/{obj['Key']}")
        return sorted(found)
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise FileNotFoundError(f"source path not found: {path}")
    found = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        found.extend(os.path.join(dirpath, f) for f in filenames if not f.startswith("."))
    return sorted(found)


class _RawStream(io.RawIOBase):
    """Adapts botocore's StreamingBody (whose interface has varied across versions) to a RawIOBase."""

    def __init__(self, body):
        self._body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._body.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._body.close()
        super().close()


@contextlib.contextmanager
def open_binary(path: str, start: int = 0, **opts: Any) -> Iterator[BinaryIO]:
    """A stream from byte `start` to the end (S3: one ranged GET, read only as far as the caller reads)."""
    if is_s3(path):
        bucket, key = split_s3(path)
        ranged = {"Range": f"bytes={int(start)}-"} if start else {}
        body = s3_client(opts).get_object(Bucket=bucket, Key=key, **ranged, **request_payer(opts))["Body"]
        with io.BufferedReader(_RawStream(body), buffer_size=CHUNK) as stream:
            yield stream
    else:
        with open(path, "rb") as stream:
            if start:
                stream.seek(int(start))
            yield stream


def file_size(path: str, **opts: Any) -> int:
    if is_s3(path):
        bucket, key = split_s3(path)
        return int(s3_client(opts).head_object(Bucket=bucket, Key=key, **request_payer(opts))["ContentLength"])
    return os.path.getsize(path)


@contextlib.contextmanager
def local_path(path: str, **opts: Any) -> Iterator[str]:
    if not is_s3(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="tidemark-") as tmp:
        target = os.path.join(tmp, basename(path))
        with open_binary(path, **opts) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
        yield target


def exists(path: str, **opts: Any) -> bool:
    if is_s3(path):
        from botocore.exceptions import ClientError

        bucket, key = split_s3(path)
        try:
            s3_client(opts).head_object(Bucket=bucket, Key=key, **request_payer(opts))
            return True
        except ClientError:
            return False
    return os.path.exists(path)


def write_stream(path: str, stream: BinaryIO, **opts: Any) -> int:
    """Copy a stream to `path` whole or not at all (local: a temporary name, then a rename; S3: a multipart upload
    that completes only at the end). Returns the bytes written."""
    if is_s3(path):
        bucket, key = split_s3(path)
        counter = _CountingReader(stream)
        s3_client(opts).upload_fileobj(counter, bucket, key, ExtraArgs=request_payer(opts))
        return counter.n
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.partial-{os.getpid()}"
    try:
        with open(tmp, "wb") as dst:
            shutil.copyfileobj(stream, dst, CHUNK)
            n = dst.tell()
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return n


class _CountingReader(io.RawIOBase):
    def __init__(self, stream: BinaryIO):
        self.stream, self.n = stream, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.n += len(data)
        return data


def describe(path: str, **opts: Any) -> dict:
    if is_s3(path):
        bucket, key = split_s3(path)
        head = s3_client(opts).head_object(Bucket=bucket, Key=key, **request_payer(opts))
        return {"path": path, "bytes": int(head["ContentLength"]), "etag": head.get("ETag", "").strip('"')}
    md5 = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            md5.update(chunk)
    return {"path": path, "bytes": os.path.getsize(path), "md5": md5.hexdigest()}
