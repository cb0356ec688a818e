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

from sentence_models import build_sentence_model

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


def test_a_semantic_index_on_s3_in_a_requester_pays_bucket(moto_server, tmp_path):
    """`index-corpus --embeddings` into s3://, then `overlap --index s3:// --semantic --requester-pays` and `trace
    --index s3:// --requester-pays`: the same decisions as embedding the local corpus, and every request the two
    runs make for the index's files (the driver's and the workers') carries x-amz-request-payer: requester."""
    s3 = moto_server(BUCKET)
    names = "Adaeze Bartholomew Cosima Dmitri Evangeline Fitzgerald".split()
    items = [{"id": f"q{i}", "question": f"At the county fair, {n} bought {100 + 7 * i} pencils and later gave "
              f"{20 + 3 * i} of them to the children of the village. How many pencils did {n} keep for the school?"}
             for i, n in enumerate(names)]
    filler = "the farmer walked to the market with a basket of apples and came back home before the rain".split()
    docs = [{"id": f"d{j}", "text": " ".join(filler[(j + k) % len(filler)] for k in range(30 + j))} for j in range(20)]
    docs.insert(4, {"id": "plant", "text": "Worksheet. " + items[2]["question"]})
    local = tmp_path / "corpus"
    local.mkdir()
    body = "".join(json.dumps(d) + "\n" for d in docs)
    (local / "a.jsonl").write_text(body)
    s3.put_object(Bucket=BUCKET, Key="corpus/a.jsonl", Body=body.encode())
    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in items))
    model = str(build_sentence_model(tmp_path / "model", [r["question"] for r in items] + [" ".join(filler)]))
    semantic = ["--benchmark", str(bench), "--benchmark-field", "question", "--semantic", "--n", "0",
                "--embedder", model]
    tidemark("overlap", *semantic, "--corpus", str(local), "--window-words", "40", "--window-stride", "20",
             "--out", str(tmp_path / "scan"))
    idx = f"s3://{BUCKET}/indexes/e"
    tidemark("index-corpus", "--corpus", f"s3://{BUCKET}/corpus", "--out", idx, "--embeddings", "--embedder", model,
             "--window-words", "40", "--window-stride", "20")
    moto_server.requests.clear()
    tidemark("overlap", *semantic, "--index", idx, "--requester-pays", "--out", str(tmp_path / "asked"))
    out = tidemark("trace", "--index", idx, "--requester-pays", "--text", items[2]["question"], "--min-words", "5")
    scan, asked = (pq.read_table(tmp_path / d / "semantic.parquet").to_pylist() for d in ("scan", "asked"))
    assert [(r["id"], r["rephrased"], r["doc_id"], r["char_start"]) for r in asked] == [
        (r["id"], r["rephrased"], r["doc_id"], r["char_start"]) for r in scan]
    assert {r["id"]: r["doc_id"] for r in asked if r["rephrased"]} == {"q2": "plant"}
    assert "29 words, 1 in the corpus" in out and "in: plant" in out  # the whole item, found in its document
    index_requests = [r for r in moto_server.requests
                      if r[1].startswith(f"/{BUCKET}/indexes/e") or "prefix=indexes%2Fe" in r[1]]
    assert {m for m, _, _ in index_requests} >= {"GET"} and any("prefix=" in p for _, p, _ in index_requests)
    assert [r for r in index_requests if r[2] != "requester"] == []
