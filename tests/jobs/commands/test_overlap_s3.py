"""`tidemark overlap` and `index-corpus` against S3 (a moto server on 127.0.0.1): the corpus read from s3:// by the
workers, the index built into s3:// and asked from there, with the same rows as a local scan."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.heavy, pytest.mark.ray]
BUCKET = "tidemark-corpora"


def tidemark(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([str(Path(sys.executable).parent / "tidemark"), *args, "--quiet"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    return proc.stdout


def test_scan_and_index_on_s3_answer_as_a_local_scan(moto_server, tmp_path):
    import zstandard

    s3 = moto_server(BUCKET)
    words = [f"w{i}" for i in range(3000)]
    rows = [{"id": f"q{k}", "input": " ".join(words[k * 40:(k + 1) * 40])} for k in range(10)]
    docs = [{"id": f"d{j}", "text": " ".join(words[(j * 7) % 2900:(j * 7) % 2900 + 60])} for j in range(300)]
    docs[5]["text"] += " " + rows[3]["input"].upper()
    blobs = {"corpus/a.jsonl.zst": zstandard.ZstdCompressor().compress(
                 b"".join(json.dumps(d).encode() + b"\n" for d in docs[:150])),
             "corpus/b.jsonl.gz": gzip.compress(b"".join(json.dumps(d).encode() + b"\n" for d in docs[150:]))}
    local = tmp_path / "corpus"
    local.mkdir()
    for key, blob in blobs.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=blob)
        (local / key.split("/")[1]).write_bytes(blob)
    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tidemark("overlap", "--benchmark", str(bench), "--corpus", str(local), "--out", str(tmp_path / "local"))
    tidemark("overlap", "--benchmark", str(bench), "--corpus", f"s3://{BUCKET}/corpus", "--out",
             f"s3://{BUCKET}/runs/scan")
    tidemark("index-corpus", "--corpus", f"s3://{BUCKET}/corpus", "--out", f"s3://{BUCKET}/indexes/c")
    tidemark("overlap", "--benchmark", str(bench), "--index", f"s3://{BUCKET}/indexes/c", "--out",
             str(tmp_path / "via-index"))
    expected = pq.read_table(tmp_path / "local" / "rows.parquet")
    (tmp_path / "scan.parquet").write_bytes(s3.get_object(Bucket=BUCKET, Key="runs/scan/rows.parquet")["Body"].read())
    assert pq.read_table(tmp_path / "scan.parquet").equals(expected)
    assert pq.read_table(tmp_path / "via-index" / "rows.parquet").equals(expected)
    found = {r["id"]: r for r in expected.to_pylist()}
    assert found["q3"]["share"] == 1.0 and found["q3"]["sources"][0] == "d5"
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="indexes/c/")["Contents"]}
    assert {"indexes/c/_SUCCESS", "indexes/c/index.json", "indexes/c/shards/part-00000/table.000"} <= keys
