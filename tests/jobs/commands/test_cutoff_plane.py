"""`tidemark cutoff` on the rest of the plane it claims (test_cutoff.py covers local weights, Ray and the answers):
a served model's prompt log-probabilities (--api-base) equal local weights' and run.json records the server; s3://
input and output; a job cut off after one part resumes to the bytes an uninterrupted run writes; an id given
twice is scored once (its first row and date) and the other quarantined as duplicate_id; a text-only server
(--api-logprobs none) scores every staged row with ngram_coverage, and a rerun asks it nothing but the probe; a
text-only --dry-run writes plan.md and scores nothing. Plumbing, not power: one small study, outputs compared for
equality, counts and files checked; whether the cutoff is recovered is test_cutoff.py's question."""
from __future__ import annotations

import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from jobs.cli import app
from jobs.commands.cutoff import CutoffConfig, run_cutoff
from scoring.api.loopback import LoopbackServer

SHARD = 20  # rows per part: 144 rows make several parts (resume, duplicates across parts)
NGRAM = "ngram_coverage@agg=max,n=3,prefix=0.5"  # the text-only default's column
FAST = {"runner": "local", "permutations": 199, "bootstrap": 50, "progress": False}
OUTPUTS = ("report.json", "rows.parquet", "quarantine.parquet", "report.md", "report.html", "curve.png", "run.json",
           "_SUCCESS")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """144 dated rows (2 sources x 12 months x 6), a tiny GPT-2 trained briefly on months up to the 6th: enough to
    score, not to find the cutoff. 128 positions, so that a text-only prompt plus its continuation always fits."""
    from jobs.kit.dated_studies import build_study

    root = tmp_path_factory.mktemp("cutoff_plane")
    res = build_study(root, months=12, cutoff=5, per_month=6, words=32, train_steps=30, repeats=2, background=30,
                      train={"positions": 128})
    return {**res, "root": root}


def cutoff(study, out, **kw) -> dict:
    cfg = CutoffConfig(**{"texts": study["dated"], "model": study["model"], "out": str(out), "methods": "loss",
                          "shard_size": SHARD, **FAST, **kw})
    return run_cutoff(cfg)


def report_of(out) -> dict:
    return json.loads((out / "report.json").read_text())


def run_of(out) -> dict:
    return json.loads((out / "run.json").read_text())


@pytest.fixture(scope="module")
def local(study, tmp_path_factory):
    """The reference: local weights, one uninterrupted run."""
    out = tmp_path_factory.mktemp("cutoff_local") / "out"
    cutoff(study, out)
    return out


def assert_same_answers(a: dict, b: dict, atol: float = 0.0) -> None:
    """report.json's per-period curves (top level and per source) and counts equal (within atol for the scores)."""
    assert a["counts"] == b["counts"]
    pairs = [(a, b)] + list(zip(a["sources"], b["sources"]))
    for x, y in pairs:
        assert x.get("source") == y.get("source") and x["detector"] == y["detector"]
        assert [p["period"] for p in x["per_period"]] == [p["period"] for p in y["per_period"]]
        assert [p["n"] for p in x["per_period"]] == [p["n"] for p in y["per_period"]]
        for key in ("score", "ci_low", "ci_high", "trend", "fit"):
            got, want = [p[key] for p in y["per_period"]], [p[key] for p in x["per_period"]]
            np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float), atol=atol, rtol=0,
                                       err_msg=key)


def test_served_model_scores_equal_local_weights_and_run_json_records_the_server(study, local, tmp_path):
    out = tmp_path / "served"
    with LoopbackServer(study["model"], name="tiny") as server:
        cutoff(study, out, model="tiny", api_base=server.url, tokenizer=study["model"])
    a, b = pq.read_table(local / "rows.parquet"), pq.read_table(out / "rows.parquet")
    assert a.drop(["loss"]).equals(b.drop(["loss"]))  # the same rows, dates and periods, in the same order
    np.testing.assert_allclose(b.column("loss").to_numpy(), a.column("loss").to_numpy(), atol=1e-4, rtol=0)
    assert_same_answers(report_of(local), report_of(out), atol=1e-4)
    assert report_of(out)["model"] == "tiny"
    run = run_of(out)
    served = run["served_model"]
    assert served["api_base"] == server.url and served["model"] == "tiny" and served["tokenizer"] == study["model"]
    assert served["method"] == "echo" and served["extraction_error_bound_nats"] == 0.0
    assert served["requests"]["calls"] == run["scoring"]["target"]["api"]["calls"] > 0
    assert run_of(local)["served_model"] is None  # local weights: no server to record


def test_s3_input_and_output(study, local, tmp_path, moto_s3):
    bucket = "tidemark-cutoff"
    s3 = moto_s3(bucket)
    s3.upload_file(study["dated"], bucket, "in/dated.jsonl")
    res = cutoff(study, f"s3://{bucket}/out", texts=f"s3://{bucket}/in/dated.jsonl")
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="out/")["Contents"]}
    assert {f"out/{name}" for name in OUTPUTS} <= keys
    assert any(k.startswith("out/scoring/_parts/") for k in keys) and any(k.startswith("out/_staging/") for k in keys)

    def get(key: str) -> bytes:
        return s3.get_object(Bucket=bucket, Key=f"out/{key}")["Body"].read()

    assert pq.read_table(io.BytesIO(get("rows.parquet"))).equals(pq.read_table(local / "rows.parquet"))
    report = json.loads(get("report.json"))
    assert_same_answers(report_of(local), report)
    assert report["inputs"]["path"] == f"s3://{bucket}/in/dated.jsonl"
    assert res["cutoff"] == report_of(local)["cutoff"]
    assert json.loads(get("_SUCCESS"))["counts"] == report["counts"]


def test_a_job_cut_off_after_one_part_resumes_to_the_same_bytes(study, local, tmp_path, monkeypatch):
    from jobs.plane.part_loop import ABORT_ENV, InjectedAbort

    out = tmp_path / "cut"
    monkeypatch.setenv(ABORT_ENV, "1")
    with pytest.raises(InjectedAbort):
        cutoff(study, out)
    assert not (out / "_SUCCESS").exists() and not (out / "rows.parquet").exists()
    assert len(list((out / "scoring" / "_parts").glob("*.done.json"))) == 1
    monkeypatch.delenv(ABORT_ENV)
    cutoff(study, out)
    stats = run_of(out)["scoring"]["target"]
    assert stats["reused"] == 1 and stats["scored"] == stats["parts"] - 1 >= 2
    assert pq.read_table(out / "rows.parquet").equals(pq.read_table(local / "rows.parquet"))
    assert pq.read_table(out / "quarantine.parquet").equals(pq.read_table(local / "quarantine.parquet"))
    assert_same_answers(report_of(local), report_of(out))


def test_an_id_given_twice_is_scored_once_as_its_first_row(study, local, tmp_path):
    lines = open(study["dated"]).read().splitlines()
    first, second = json.loads(lines[0]), json.loads(lines[1])
    # the first row's id again at the end (another part), with another date and text; the second row's id again
    # right after it (the same part)
    again_far = {**first, "date": "2020-11-15", "text": second["text"]}
    again_near = {**second, "date": "2020-12-01", "text": first["text"]}
    dated = tmp_path / "dated.jsonl"
    dated.write_text("\n".join([lines[0], lines[1], json.dumps(again_near), *lines[2:], json.dumps(again_far)]) + "\n")
    out = tmp_path / "dup"
    cutoff(study, out, texts=str(dated))
    counts = report_of(out)["counts"]
    assert counts == {"in": 146, "scored": 144, "quarantined": 2, "reasons": {"duplicate_id": 2}}
    assert counts["in"] == counts["scored"] + counts["quarantined"]
    rows = {r["id"]: r for r in pq.read_table(out / "rows.parquet").to_pylist()}
    want = {r["id"]: r for r in pq.read_table(local / "rows.parquet").to_pylist()}
    assert sorted(rows) == sorted(want)
    for rid, row in ((first["id"], first), (second["id"], second)):
        got = rows[rid]
        assert got["date"] == row["date"] and got["period"] == row["date"][:7]  # the first row's date
        assert got["loss"] == pytest.approx(want[rid]["loss"], abs=1e-6)  # the first row's text
        assert got["loss"] != pytest.approx(want[(second if row is first else first)["id"]]["loss"], abs=1e-6)
    q = pq.read_table(out / "quarantine.parquet").to_pylist()
    assert sorted((r["id"], r["reason"]) for r in q) == sorted([(first["id"], "duplicate_id"),
                                                                 (second["id"], "duplicate_id")])
    by_period = {p["period"]: p["n"] for s in report_of(out)["sources"] for p in s["per_period"]
                 if s["source"] == first["source"]}
    assert by_period == {p["period"]: p["n"] for s in report_of(local)["sources"] for p in s["per_period"]
                         if s["source"] == first["source"]}  # the later dates were not counted


def text_only_args(server, study, out, *extra) -> list[str]:
    return ["cutoff", "--texts", study["dated"], "--model", "loopback", "--api-base", server.url,
            "--api-logprobs", "none", "--samples", "2", "--max-new-tokens", "8", "--shard-size", "50",
            "--runner", "local", "--permutations", "199", "--bootstrap", "50", "--quiet", "--out", str(out), *extra]


def invoke(args: list[str]):
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.slow
def test_text_only_scores_every_row_and_a_rerun_asks_nothing_again(study, tmp_path):
    out = tmp_path / "text"
    with LoopbackServer(study["model"]) as server:
        invoke(text_only_args(server, study, out))
        first = server.requests
        run = run_of(out)
        gen = run["generation"]
        assert first == gen["probe"]["calls"] + gen["spent"]["requests_sent"]
        invoke(text_only_args(server, study, out))
        rerun = run_of(out)
        assert server.requests - first == rerun["generation"]["probe"]["calls"]  # the probe only
    staged = pq.read_table(out / "_staging" / "meta").column("id").to_pylist()
    rows = pq.read_table(out / "rows.parquet")
    assert rows.column_names == ["id", "date", "period", "source", "group", NGRAM]
    assert sorted(rows.column("id").to_pylist()) == sorted(staged) and len(staged) == 144
    assert np.isfinite(rows.column(NGRAM).to_numpy()).all()
    report = report_of(out)
    assert report["detector"] == NGRAM and {s["detector"] for s in report["sources"]} == {NGRAM}
    assert report["counts"] == {"in": 144, "scored": 144, "quarantined": 0, "reasons": {}}
    assert run["served_model"]["mode"] == "none" and run["served_model"]["model"] == "loopback"
    stats = rerun["scoring"]["target"]
    assert stats["reused"] == stats["parts"] >= 3 and stats["streamed"] == 0 and not stats.get("api")
    assert rerun["generation"]["spent_all_runs"]["requests_sent"] == gen["spent"]["requests_sent"]
    assert pq.read_table(out / "rows.parquet").equals(rows)


def test_text_only_dry_run_writes_the_plan_and_scores_nothing(study, tmp_path):
    out = tmp_path / "plan"
    with LoopbackServer(study["model"]) as server:
        res = invoke(text_only_args(server, study, out, "--dry-run"))
        probe = server.requests
    assert "# Plan (dry run)" in res.output and "144 rows" in res.output
    assert (out / "plan.md").is_file() and "144 rows" in (out / "plan.md").read_text()
    assert probe > 0
    for name in OUTPUTS:
        assert not (out / name).exists(), name
    assert not (out / "scoring").exists() or not any((out / "scoring").rglob("*.parquet"))
