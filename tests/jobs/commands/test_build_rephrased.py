"""`build-benchmark --drop-rephrased OUT` (issue 57) on a small dated corpus of State of the Union passages: a
release built once, an `overlap --semantic` OUT over it written by hand (semantic.parquet after
scoring/semantic/decide.SEMANTIC_SCHEMA, report.json's `semantic` block, _SUCCESS), then the same build with the
OUT: the flagged non-members in excluded/ with their reason and passage, the flagged member kept, every count
reconciled against the first build and the files; the join by text when the ids differ; the refusals in one
line, before anything is written; and the same release on Ray."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from curation.io.outputs import Location
from jobs.cli import app
from scoring.semantic.decide import SEMANTIC_SCHEMA

BLOCK = {"n": 0, "flagged": 0, "threshold": 0.62, "expected_false_flag_rate": 0.008, "false_flag_upper_bound": 0.021,
         "threshold_source": "null", "embedder": {"name": "minilm", "weights_digest": "sha256:abc"}, "judge": None}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    """12 passages from 2014 (members) and 12 from October 2026 (non-members), one 16-word row each; the release
    built from them without --drop-rephrased."""
    from scoring.studies.known_membership import sotu_passages

    root = tmp_path_factory.mktemp("rephrased_build")
    texts = [p["text"] for p in sotu_passages(words_per_passage=24, max_passages=24, seed=3)]
    dates = ["2014-03-05"] * 12 + ["2026-10-%02d" % (d + 1) for d in range(12)]
    with open(root / "docs.jsonl", "w") as fh:
        for i, (t, d) in enumerate(zip(texts, dates)):
            fh.write(json.dumps({"id": f"d{i:02d}", "text": t, "created": d}) + "\n")
    cfg = {"name": "rephrased", "source": {"kind": "files", "path": str(root / "docs.jsonl"), "id_field": "id",
                                           "date_field": "created"},
           "cutoffs": {"member_before": "2015-01-01", "nonmember_after": "2026-01-01"},
           "filters": {"languages": []}, "dedup": {"exact": True, "near": False},
           "buckets": [16], "per_bucket": None, "balance": True}
    (root / "config.yaml").write_text(yaml.safe_dump(cfg))
    build(root, root / "plain")
    return {"root": root, "plain": root / "plain", "rows": pq.read_table(root / "plain" / "data").to_pylist()}


def build(root: Path, out: Path, *extra: str, runner: str = "local"):
    return CliRunner().invoke(app, ["build-benchmark", "--config", str(root / "config.yaml"), "--runner", runner,
                                    "--quiet", "--out", str(out), *extra])


def overlap_out(where: Path, benchmark: str, ids: list[str], flagged: set[str], semantic: bool = True) -> str:
    """An overlap OUT over `benchmark` (its rows named `ids`), the rows in `flagged` rephrased."""
    where.mkdir(parents=True)
    report = {"job": "overlap", "inputs": {"benchmark": benchmark, "corpus": "corpus/", "mode": "scan"},
              "settings": {"n": 0, "benchmark_field": None}}
    if semantic:
        rows = []
        for k, rid in enumerate(ids):
            row = dict.fromkeys(SEMANTIC_SCHEMA.names)
            row.update(id=rid, doc_id=f"web:{k}", char_start=10 * k, char_end=10 * k + 90,
                       decision_score=0.9 if rid in flagged else 0.1, rephrased=rid in flagged)
            rows.append(row)
        pq.write_table(pa.Table.from_pylist(rows, schema=SEMANTIC_SCHEMA), where / "semantic.parquet")
        report["semantic"] = {**BLOCK, "n": len(ids), "flagged": len(flagged)}
    (where / "report.json").write_text(json.dumps(report))
    Location(str(where)).mark_complete({"job": "overlap"})
    return str(where)


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def excluded(out: Path) -> list[dict]:
    return pq.read_table(out / "excluded").to_pylist()


def flagged_rows(rows: list[dict]) -> tuple[list[str], str]:
    nonmembers = sorted(r["id"] for r in rows if r["label"] == 0)[:3]
    member = sorted(r["id"] for r in rows if r["label"] == 1)[0]
    return nonmembers, member


def test_flagged_nonmembers_are_excluded_with_their_passage_and_counts_reconcile(corpus, tmp_path):
    rows = corpus["rows"]
    nonmembers, member = flagged_rows(rows)
    ids = [r["id"] for r in rows]
    ov = overlap_out(tmp_path / "overlap", str(corpus["plain"]), ids, {*nonmembers, member})
    res = build(corpus["root"], tmp_path / "release", "--drop-rephrased", ov)
    assert res.exit_code == 0, res.output
    out, plain = tmp_path / "release", manifest(corpus["plain"])
    m = manifest(out)
    data = pq.read_table(out / "data").to_pylist()
    assert sorted(r["id"] for r in data) == sorted(set(ids) - set(nonmembers))  # the flagged member stays
    mine = [e for e in excluded(out) if e["stage"] == "rephrased"]
    assert sorted(e["id"] for e in mine) == nonmembers and {e["reason"] for e in mine} == {"rephrased_in_corpus"}
    k = ids.index(nonmembers[0])
    assert next(e for e in mine if e["id"] == nonmembers[0])["detail"] == \
        f"{ov}: doc_id web:{k}, characters {10 * k}-{10 * k + 90}, decision score 0.900"
    # every row in leaves kept or excluded with a reason: the first build's rows, less three, plus three exclusions
    step = m["counts"]["steps"][-1]
    assert step == {"step": "rephrased", "unit": "rows", "in": plain["counts"]["rows_out"],
                    "kept": plain["counts"]["rows_out"] - 3, "dropped": {"rephrased_in_corpus": 3}}
    assert m["counts"]["rows_out"] == len(data) == plain["counts"]["rows_out"] - 3
    assert m["counts"]["excluded"] == len(excluded(out)) == plain["counts"]["excluded"] + 3
    assert m["counts"]["dropped_by_reason"]["rephrased_in_corpus"] == 3
    assert m["counts"]["by_label_bucket"] == {"member": {"16": 12}, "nonmember": {"16": 9}}
    record = m["drop_rephrased"]
    assert (record["dropped"], record["flagged_members_kept"], record["rows_in"]) == (3, 1, len(ids))
    o, = record["overlaps"]
    assert (o["overlap"], o["join"], o["rows_joined"], o["rows_not_checked"]) == (ov, "id", len(ids), 0)
    assert (o["embedder"], o["threshold"], o["expected_false_flag_rate"]) == ("minilm", 0.62, 0.008)


def test_an_overlap_under_other_ids_joins_by_text(corpus, tmp_path):
    rows = corpus["rows"]
    nonmembers, _ = flagged_rows(rows)
    bench = tmp_path / "bench.jsonl"  # the release's rows under other ids, in other case
    names = {r["id"]: f"q{k}" for k, r in enumerate(rows)}
    bench.write_text("".join(json.dumps({"id": names[r["id"]], "input": r["input"].upper()}) + "\n" for r in rows))
    ov = overlap_out(tmp_path / "overlap", str(bench), list(names.values()), {names[i] for i in nonmembers[:2]})
    res = build(corpus["root"], tmp_path / "release", "--drop-rephrased", ov)
    assert res.exit_code == 0, res.output
    m = manifest(tmp_path / "release")
    assert m["drop_rephrased"]["overlaps"][0]["join"] == "text"
    assert sorted(e["id"] for e in excluded(tmp_path / "release") if e["stage"] == "rephrased") == nonmembers[:2]


def test_refusals_in_one_line_and_nothing_written(corpus, tmp_path):
    ids = [r["id"] for r in corpus["rows"]]
    verbatim = overlap_out(tmp_path / "verbatim", str(corpus["plain"]), ids, set(), semantic=False)
    other = overlap_out(tmp_path / "other", str(tmp_path / "gone.jsonl"), ["x1", "x2"], {"x1"})
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    for ov, why in ((verbatim, f"--drop-rephrased {verbatim}: no semantic.parquet (an overlap run without "
                               "--semantic)"),
                    (str(unfinished), "no _SUCCESS there"),
                    (other, f"--drop-rephrased {other}: none of its 2 rows is a row of this release, by id or by "
                            f"text (its benchmark: {tmp_path / 'gone.jsonl'}, whose texts could not be read here)")):
        out = tmp_path / "release"
        res = build(corpus["root"], out, "--drop-rephrased", ov)
        errors = [line for line in res.output.splitlines() if line.startswith("error:")]
        assert res.exit_code == 2 and len(errors) == 1 and why in errors[0], res.output
        assert not (out / "_SUCCESS").exists() and not (out / "manifest.json").exists()


@pytest.mark.ray
def test_the_same_release_on_ray(corpus, tmp_path, ray_session):
    rows = corpus["rows"]
    nonmembers, member = flagged_rows(rows)
    ov = overlap_out(tmp_path / "overlap", str(corpus["plain"]), [r["id"] for r in rows], {*nonmembers, member})
    for runner in ("local", "ray"):
        res = build(corpus["root"], tmp_path / runner, "--drop-rephrased", ov, runner=runner)
        assert res.exit_code == 0, res.output
    for name in ("data/length16.parquet", "excluded/excluded.parquet"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name
    assert manifest(tmp_path / "ray")["counts"] == manifest(tmp_path / "local")["counts"]
