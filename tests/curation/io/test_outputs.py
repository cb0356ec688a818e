"""Outputs to a local directory or s3:// (moto): atomic files, `_SUCCESS` written last, requester pays, and a
release publish that never looks complete when it crashes half way."""
from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pytest

from curation.io import publish as release_io
from curation.io.outputs import SUCCESS, Location, atomic_write_bytes, local_copy

BUCKET = "tidemark-test"


@pytest.fixture
def s3(moto_s3):
    return moto_s3(BUCKET)


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    target = tmp_path / "d" / "report.md"
    atomic_write_bytes(target, b"old")

    def broken_replace(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        atomic_write_bytes(target, b"new and longer")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.md"]  # no temporary file left behind


@pytest.mark.parametrize("where", ["local", "s3"])
def test_location_round_trip_and_marker(where, tmp_path, request):
    if where == "s3":
        request.getfixturevalue("s3")
        loc = Location(f"s3://{BUCKET}/runs/one/")
    else:
        loc = Location(tmp_path / "runs" / "one")
    table = pa.table({"id": ["a", "b"], "x": [1.0, 2.0]})
    info = loc.write_parquet("shards/t-00000.parquet", table)
    assert info["rows"] == 2 and len(info["sha256"]) == 64
    loc.write_json("shards/t-00000.done.json", {"ok": True})
    loc.write_text("report.md", "# hi\n")
    assert loc.read_parquet("shards/t-00000.parquet").equals(table)
    assert loc.list() == ["report.md", "shards/t-00000.done.json", "shards/t-00000.parquet"]
    assert loc.list("shards") == ["shards/t-00000.done.json", "shards/t-00000.parquet"]
    assert loc.completion() is None
    loc.mark_complete({"job": "test"})
    assert loc.completion() == {"job": "test"}
    loc.clear_complete()
    assert loc.completion() is None and not loc.exists(SUCCESS)
    loc.delete_tree("shards")
    assert loc.list() == ["report.md"]


def test_requester_pays_is_sent_on_every_s3_call(s3):
    seen = []
    loc = Location(f"s3://{BUCKET}/public", requester_pays=True)
    loc.client.meta.events.register("before-call.s3", lambda params, model, **kw: seen.append(
        (model.name, params.get("headers", {}).get("x-amz-request-payer"))))
    loc.write_text("a.txt", "x")
    loc.read_bytes("a.txt")
    loc.exists("a.txt")
    loc.list()
    assert {name for name, _ in seen} >= {"PutObject", "GetObject", "HeadObject", "ListObjectsV2"}
    assert all(payer == "requester" for _, payer in seen), seen
    plain = Location(f"s3://{BUCKET}/public")
    seen.clear()
    plain.client.meta.events.register("before-call.s3", lambda params, model, **kw: seen.append(
        params.get("headers", {}).get("x-amz-request-payer")))
    plain.read_bytes("a.txt")
    assert seen == [None]


def test_local_copy_of_an_s3_prefix(s3):
    loc = Location(f"s3://{BUCKET}/rel")
    loc.write_text("data/a.jsonl", "1\n")
    loc.write_text("manifest.json", "{}")
    with local_copy(f"s3://{BUCKET}/rel") as path:
        assert sorted(os.listdir(path)) == ["data", "manifest.json"]
        assert open(os.path.join(path, "data", "a.jsonl")).read() == "1\n"
    assert not os.path.exists(path)


def _stage(tmp_path, version: str):
    stage = tmp_path / f"stage-{version}-{len(list(tmp_path.glob('stage-*')))}"
    (stage / "data").mkdir(parents=True)
    (stage / "excluded").mkdir()
    (stage / "data" / "length32.parquet").write_bytes(f"data {version}".encode())
    if version == "v1":
        (stage / "data" / "length64.parquet").write_bytes(b"only in v1")
    (stage / "excluded" / "excluded.parquet").write_bytes(b"excluded")
    (stage / "manifest.json").write_text(json.dumps({"version": version}))
    return stage


@pytest.mark.parametrize("where", ["local", "s3"])
def test_publish_order_and_a_crash_half_way(where, tmp_path, request, monkeypatch):
    if where == "s3":
        request.getfixturevalue("s3")
        dest = Location(f"s3://{BUCKET}/releases/x")
    else:
        dest = Location(tmp_path / "releases" / "x")
    assert release_io.release_state(dest) == "absent"
    info = release_io.publish(_stage(tmp_path, "v1"), dest, job="build-benchmark", rows=3)
    assert release_io.release_state(dest) == "complete"
    assert dest.completion() == info and dest.read_json("manifest.json") == {"version": "v1"}

    # An overwrite that dies after the data went out: the old markers are gone, nothing looks complete.
    writes = []
    real = dest.write_bytes

    def dying_write(rel, data):
        writes.append(rel)
        if rel == "manifest.json":
            raise ConnectionError("node lost")
        return real(rel, data)

    monkeypatch.setattr(dest, "write_bytes", dying_write)
    with pytest.raises(ConnectionError):
        release_io.publish(_stage(tmp_path, "v2"), dest, job="build-benchmark", rows=3)
    monkeypatch.undo()
    assert dest.completion() is None and not dest.exists("manifest.json")
    assert release_io.release_state(dest) == "partial"
    assert "_SUCCESS" not in writes

    release_io.publish(_stage(tmp_path, "v2"), dest, job="build-benchmark", rows=3)
    assert release_io.release_state(dest) == "complete"
    assert dest.read_json("manifest.json") == {"version": "v2"}
    # v1's extra file is gone: the release is exactly v2's file set
    assert dest.list("data") == ["data/length32.parquet"]
    assert dest.read_bytes("data/length32.parquet") == b"data v2"


def test_a_file_over_the_multipart_threshold_arrives_whole(s3, tmp_path, monkeypatch):
    from curation.io.outputs import MULTIPART_ENV, sha256_bytes

    monkeypatch.setenv(MULTIPART_ENV, str(1 << 20))  # 1 MiB; parts are 5 MiB, S3's minimum
    data = np.random.default_rng(0).bytes(11 << 20)  # 11 MiB: three parts
    local = tmp_path / "big.bin"
    local.write_bytes(data)
    loc = Location(f"s3://{BUCKET}/out")
    calls = []
    real = loc.client.create_multipart_upload
    monkeypatch.setattr(loc.client, "create_multipart_upload", lambda **kw: calls.append(kw) or real(**kw))
    info = loc.upload_file(local, "token_stats.parquet/part-00000.parquet")
    info2 = loc.write_bytes("blob.bin", data)
    assert len(calls) == 2  # both went up as multipart uploads, not one PutObject
    assert info == info2 == {"bytes": len(data), "sha256": sha256_bytes(data)}
    for key in ("out/token_stats.parquet/part-00000.parquet", "out/blob.bin"):
        got = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        assert got == data
    small = loc.write_bytes("small.txt", b"x")  # under the threshold: one PutObject
    assert small["bytes"] == 1 and len(calls) == 2


def test_a_finished_s3_job_brings_both_reports_back(s3, tmp_path):
    """A re-run of a finished evaluation on s3:// is a no-op that copies report.md and report.html to the local
    staging directory, where the CLI prints the one and names the other; an older output without report.html
    still counts as finished."""
    from jobs.kit.identity import completed_result

    loc = Location(f"s3://{BUCKET}/runs/done/")
    for name, text in (("metrics.json", "[]"), ("run.json", "{}"), ("report.md", "# r\n"),
                       ("report.html", "<!DOCTYPE html>")):
        loc.write_text(name, text)
    loc.mark_complete({"fingerprint": "fp"})
    res = completed_result(loc, "fp", tmp_path / "a")
    assert res["skipped"] and (tmp_path / "a" / "report.html").read_text() == "<!DOCTYPE html>"
    loc.delete("report.html")
    assert completed_result(loc, "fp", tmp_path / "b")["report"] == str(tmp_path / "b" / "report.md")
    assert not (tmp_path / "b" / "report.html").exists()
