"""Jobs that write to s3:// (moto), driven through the `tidemark` CLI, with a planted fake AWS secret both in the
environment (where boto3 reads it: moto accepts any key) and in the config (`--set source.aws_secret_access_key`):

- `build-benchmark --nonmember-month auto` picks the month from TIDEMARK_RUN_DATE, writes the release to S3 with
  `_SUCCESS` last, and a re-run with --skip-existing is a no-op;
- `evaluate` (a `tidemark` subprocess with its own local Ray, so that its workers share the environment) reads
  that release from S3 on its workers and writes its outputs and part files to S3;
- an S3 release without its completion marker is refused;
- neither secret appears in any object written, in anything printed, or in any log record.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from jobs.cli import app

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.heavy]

BUCKET = "tidemark-ops"
# Fake secrets made at run time. The env one is shaped like an AWS secret key (40 base64 characters).
ENV_SECRET = ("Fk" + uuid.uuid4().hex + "/xY+Q9z")[:40]
CFG_SECRET = "cfg-secret-" + uuid.uuid4().hex


@pytest.fixture
def s3_server(moto_server):
    # A moto server on 127.0.0.1: evaluate's Ray workers read and write S3 themselves, from other processes.
    return moto_server(BUCKET, key_id="AKIA" + uuid.uuid4().hex[:16].upper(), secret=ENV_SECRET)


@pytest.fixture
def s3(moto_s3):
    # A secret that looks real, so the tests can check that no output ever contains it.
    return moto_s3(BUCKET, key_id="AKIA" + uuid.uuid4().hex[:16].upper(), secret=ENV_SECRET)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A dated jsonl corpus: 12 passages from 2014 (members) and 12 from October 2026 (non-members), plus a
    few from September 2026 that the October window must leave out; and a tiny model trained on it."""
    from scoring.studies.known_membership import sotu_passages
    from jobs.kit.studies import train_tiny_gpt2

    root = tmp_path_factory.mktemp("corpus")
    texts = [p["text"] for p in sotu_passages(words_per_passage=24, max_passages=28, seed=3)]
    dates = ["2014-03-05"] * 12 + ["2026-10-%02d" % (d + 1) for d in range(12)] + ["2026-09-15"] * 4
    with open(root / "docs.jsonl", "w") as fh:
        for i, (t, d) in enumerate(zip(texts, dates)):
            fh.write(json.dumps({"id": f"d{i:02d}", "text": t, "created": d}) + "\n")
    cfg = {"name": "ops-demo", "source": {"kind": "files", "path": str(root / "docs.jsonl"), "id_field": "id",
                                          "date_field": "created"},
           "cutoffs": {"member_before": "2015-01-01", "nonmember_after": "2026-01-01"},
           "filters": {"languages": []}, "dedup": {"exact": True, "near": False},
           "buckets": [16], "per_bucket": None, "balance": True}
    (root / "config.yaml").write_text(yaml.safe_dump(cfg))
    model = train_tiny_gpt2(texts, root / "model", steps=15, context=64, batch_size=8, vocab_size=600)["path"]
    return {"root": root, "config": root / "config.yaml", "model": model}


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def all_objects(client) -> dict[str, bytes]:
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
            for o in page.get("Contents", [])]
    return {k: client.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in keys}


def assert_no_secret(blobs: dict[str, bytes | str]):
    for name, blob in blobs.items():
        data = blob.encode() if isinstance(blob, str) else blob
        for secret in (ENV_SECRET, CFG_SECRET):
            assert secret.encode() not in data, f"a planted secret leaked into {name}"


def test_build_then_evaluate_on_s3_without_leaking_credentials(s3_server, corpus, monkeypatch, caplog, capfd):
    s3 = s3_server
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("TIDEMARK_RUN_DATE", "2026-11-05")
    release = f"s3://{BUCKET}/releases/ops-{{nonmember_month}}"
    build_args = ["build-benchmark", "--config", str(corpus["config"]), "--runner", "local",
                  "--set", f"source.aws_secret_access_key={CFG_SECRET}", "--nonmember-month", "auto",
                  "--out", release]
    built = invoke(*build_args)
    assert built.exit_code == 0, built.output
    assert "non-member month 2026-10" in built.output
    objects = all_objects(s3)
    prefix = "releases/ops-2026-10/"
    assert {"data/length16.parquet", "excluded/excluded.parquet", "manifest.json", "_SUCCESS"} <= {
        k[len(prefix):] for k in objects if k.startswith(prefix)}
    manifest = json.loads(objects[prefix + "manifest.json"])
    assert manifest["cutoffs"]["nonmember_after"] == "2026-10-01"
    assert manifest["cutoffs"]["nonmember_before"] == "2026-11-01"
    assert manifest["config"]["source"]["aws_secret_access_key"] == "[REDACTED]"
    assert "source.aws_secret_access_key=[REDACTED]" in manifest["overrides"]
    assert manifest["counts"]["rows_out"] == 24  # 12 + 12; the September documents are outside the window
    success = json.loads(objects[prefix + "_SUCCESS"])
    assert success["rows"] == 24 and success["manifest_sha256"]

    again = invoke(*build_args, "--skip-existing")
    assert again.exit_code == 0 and "nothing to do" in again.output
    assert all_objects(s3)[prefix + "manifest.json"] == objects[prefix + "manifest.json"]
    refused = CliRunner().invoke(app, build_args)
    assert refused.exit_code != 0 and "already holds a release" in str(refused.exception)

    out = f"s3://{BUCKET}/runs/ops-2026-10/tiny"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([str(Path(sys.executable).parent / "tidemark"), "evaluate", "--benchmark",
                           f"s3://{BUCKET}/{prefix}", "--model", corpus["model"], "--out", out,
                           "--methods", "loss,min_k", "--shard-size", "10", "--quiet"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    evaluated = SimpleNamespace(output=proc.stdout + proc.stderr)
    objects = all_objects(s3)
    run_keys = {k[len("runs/ops-2026-10/tiny/"):] for k in objects if k.startswith("runs/ops-2026-10/tiny/")}
    assert {"_SUCCESS", "metrics.json", "report.md", "report.html", "run.json",
            "token_stats.parquet/part-00000.parquet",
            "scores.parquet/part-00000.parquet", "quarantine.parquet/part-00000.parquet",
            "_parts/part-00000.done.json"} <= run_keys
    n_parts = json.loads(objects["runs/ops-2026-10/tiny/run.json"])["parts"]["parts"]
    assert n_parts >= 2 and f"_parts/part-{n_parts - 1:05d}.done.json" in run_keys
    marker = json.loads(objects["runs/ops-2026-10/tiny/_SUCCESS"])
    assert marker["counts"]["in"] == 24 == marker["counts"]["scored"] + marker["counts"]["quarantined"]

    # In the environment and in the config: in no object, nothing printed, no log record.
    assert_no_secret(objects)
    captured = capfd.readouterr()
    assert_no_secret({"build output": built.output + again.output, "evaluate output": evaluated.output,
                      "stdout": captured.out, "stderr": captured.err, "log records": caplog.text})


def test_an_incomplete_s3_release_is_not_read(s3, tmp_path):
    from jobs.commands.evaluate import EvaluateConfig, run_evaluate
    from curation.io.outputs import Location

    loc = Location(f"s3://{BUCKET}/releases/half")
    loc.write_text("data/length16.jsonl", json.dumps({"id": "a", "input": "x y", "label": 1}) + "\n")
    cfg = EvaluateConfig(benchmark=loc.uri, model="unused", out=str(tmp_path / "out"))
    with pytest.raises(FileNotFoundError, match="incomplete release"):
        run_evaluate(cfg)


def test_local_release_is_published_whole_and_a_failed_rebuild_keeps_the_old_one(corpus, tmp_path, monkeypatch):
    import hashlib

    from curation.release import output as release_mod

    out = tmp_path / "releases" / "ops"
    args = ["build-benchmark", "--config", str(corpus["config"]), "--runner", "local", "--out", str(out),
            "--nonmember-month", "2026-10"]
    assert invoke(*args).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", "data", "excluded", "manifest.json"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["ops"]  # no staging or trash directory left
    manifest = (out / "manifest.json").read_bytes()
    assert json.loads((out / "_SUCCESS").read_text())["manifest_sha256"] == hashlib.sha256(manifest).hexdigest()

    def crash(*a, **k):
        raise OSError("disk full while writing the new release")

    monkeypatch.setattr(release_mod, "write_excluded_part", crash)
    with pytest.raises(OSError, match="disk full"):
        invoke(*args, "--overwrite")
    monkeypatch.undo()
    # The old release is untouched and still complete; the failed build's staging dir is gone.
    assert (out / "manifest.json").read_bytes() == manifest and (out / "_SUCCESS").exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["ops"]


def test_audit_writes_its_parts_straight_to_s3(s3_server, corpus, tmp_path):
    """audit --out s3://: the staging tasks and the scoring workers write to S3 themselves (a subprocess with its
    own Ray, so they reach the moto server through the environment), and the location is complete only at the
    end. The staged snippet texts are removed once scored."""
    rows = [json.loads(line) for line in (corpus["root"] / "docs.jsonl").read_text().splitlines()]
    target, calibration = tmp_path / "target.jsonl", tmp_path / "calibration.jsonl"
    target.write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in rows[:20]))
    calibration.write_text("".join(json.dumps({"id": r["id"], "text": r["text"], "label": k % 2}) + "\n"
                                   for k, r in enumerate(rows[20:])))
    out = f"s3://{BUCKET}/audits/tiny"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([str(Path(sys.executable).parent / "tidemark"), "audit", "--target", str(target),
                           "--calibration", str(calibration), "--model", corpus["model"], "--out", out,
                           "--detector", "loss", "--min-words", "1", "--shard-size", "8", "--quiet"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    keys = {k[len("audits/tiny/"):] for k in all_objects(s3_server) if k.startswith("audits/tiny/")}
    assert {"_SUCCESS", "report.json", "report.md", "report.html", "documents.parquet",
            "scoring/_parts/part-00000.done.json",
            "scoring/scores.parquet/part-00000.parquet", "quarantine.parquet/part-scored.parquet"} <= keys
    assert any(k.startswith("snippets.parquet/part-") for k in keys)
    assert not any(k.startswith("_staging/snippets/") for k in keys)
    report = json.loads(s3_server.get_object(Bucket=BUCKET, Key="audits/tiny/report.json")["Body"].read())
    assert report["counts"]["target"]["snippets_scored"] == 20 and report["parts"]["parts"] >= 2


def test_doc_mia_writes_its_parts_straight_to_s3(s3_server, corpus, tmp_path):
    """doc-mia --out s3://: the scoring workers write the document parts and the grid's feature files to S3, the
    driver reads them back from there, and the intermediate features are gone once the job is complete."""
    rows = [json.loads(line) for line in (corpus["root"] / "docs.jsonl").read_text().splitlines()]
    for label, chunk in (("members", rows[:12]), ("nonmembers", rows[12:24])):
        (tmp_path / label).mkdir()
        for r in chunk:
            (tmp_path / label / f"{r['id']}.txt").write_text(r["text"])
    out = f"s3://{BUCKET}/docmia/tiny"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([str(Path(sys.executable).parent / "tidemark"), "doc-mia", "--members",
                           str(tmp_path / "members"), "--nonmembers", str(tmp_path / "nonmembers"), "--model",
                           corpus["model"], "--out", out, "--contexts", "32", "--folds", "3", "--n-trees", "10",
                           "--min-words", "1", "--quiet"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    keys = {k[len("docmia/tiny/"):] for k in all_objects(s3_server) if k.startswith("docmia/tiny/")}
    assert {"_SUCCESS", "metrics.json", "report.md", "report.html", "scores.parquet", "_parts/part-00000.done.json",
            "_parts/part-00001.done.json", "doc_stats.parquet/part-00001.parquet",
            "documents.parquet/part-00000.parquet", "quarantine.parquet/duplicates.parquet"} <= keys
    assert not any(k.startswith("_grid/") for k in keys)
    metrics = json.loads(s3_server.get_object(Bucket=BUCKET, Key="docmia/tiny/metrics.json")["Body"].read())
    assert metrics["counts"] == {"documents_in": 24, "documents_used": 24, "documents_quarantined": 0,
                                 "members_used": 12, "nonmembers_used": 12}
    assert len(metrics["results"]) == 1 + 5 * 2
