"""Benchmark parts without Ray: however a benchmark is cut, reading its parts on workers gives exactly the rows,
ids and quarantine records of the one-process reader (jobs/plane/benchmark_reader.py); the survey's plan finds duplicates
across parts and picks the same ReCaLL prefix whatever the cut; committed parts are skipped only when their
marker matches."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.plane.benchmark_reader import read_benchmark
from jobs.plane.benchmark_parts import plan_parts, read_part
from jobs.plane.part_store import PartStore
from jobs.plane.survey import SurveyParts, plan_from_survey
from jobs.plane.scoring_pool import from_ipc
from curation.io.outputs import Location


def write_benchmark(path, n=23):
    lines = []
    for i in range(n):
        row = {"input": "word " * (1 + (i * 7) % 13) + f"row {i}", "label": i % 2}
        if i % 5 == 0:
            row["id"] = f"explicit-{i}"
        lines.append(json.dumps(row).encode())
    lines.insert(4, b"")  # a blank line: counted, never a row
    lines.insert(9, b'{"input": "Caf\xe9", "label": 1}')  # not UTF-8
    lines.insert(12, b'{"input": "no label"}')
    lines.insert(15, b"not json")
    lines.insert(17, json.dumps({"id": "explicit-0", "input": "a duplicate id", "label": 0}).encode())
    path.write_bytes(b"\n".join(lines))  # no newline after the last line
    return path


def survey(parts, shots=0, seed=0):
    s = SurveyParts()
    results = {p.index: s.survey(p.to_json()) for p in parts}
    return plan_from_survey(parts, results, prefix_shots=shots, seed=seed, unipc=from_ipc)


def read_all(bench, rows_per_part, shots=0):
    parts = plan_parts(str(bench), rows_per_part)
    plan = survey(parts, shots)
    rows, bad = [], []
    for p in plan.parts:
        got = read_part(p)
        drop = set(plan.drops.get(p.index, []))
        for r in got.rows:
            if r["line"] in drop:
                bad.append({"id": r["id"], "stage": "read", "reason": "duplicate_id",
                            "detail": "an earlier row has the same id"})
            else:
                rows.append({k: r[k] for k in ("id", "input", "label", "bucket")})
        bad.extend(got.quarantined)
    return plan, rows, bad


@pytest.mark.parametrize("rows_per_part", [1, 2, 3, 5, 8, 1000])
def test_any_cut_reads_what_the_one_process_reader_reads(tmp_path, rows_per_part):
    bench = write_benchmark(tmp_path / "bench.jsonl")
    want_rows, want_bad = read_benchmark(bench)
    plan, rows, bad = read_all(bench, rows_per_part)
    assert rows == want_rows
    key = lambda q: (q["id"], q["reason"])  # noqa: E731 - the order across parts differs, not the records
    assert sorted(bad, key=key) == sorted(want_bad, key=key)
    assert plan.n_good + plan.n_bad == len(want_rows) + len(want_bad) - 0  # the duplicate is a good read row
    assert plan.n_duplicates == 1
    if rows_per_part == 1:
        assert len(plan.parts) > 10


def test_parquet_parts_read_like_the_one_process_reader(tmp_path):
    rows = [{"id": None if i % 3 else f"p{i}", "input": f"text number {i}", "label": i % 2} for i in range(17)]
    path = tmp_path / "bench.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=4)
    want_rows, want_bad = read_benchmark(path)
    for n in (1, 3, 6, 100):
        plan, got, bad = read_all(path, n)
        assert got == want_rows and bad == want_bad


def test_the_recall_prefix_does_not_depend_on_the_cut(tmp_path):
    bench = write_benchmark(tmp_path / "bench.jsonl", n=40)
    prefixes = {tuple(rid for _, _, rid in survey(plan_parts(str(bench), n), shots=3, seed=7).prefix)
                for n in (1, 4, 9, 1000)}
    assert len(prefixes) == 1
    (prefix,) = prefixes
    labels = {r["id"]: r["label"] for r in read_benchmark(bench)[0]}
    assert len(prefix) == 3 and all(labels[i] == 0 for i in prefix)
    other = survey(plan_parts(str(bench), 1000), shots=3, seed=8).prefix
    assert tuple(rid for _, _, rid in other) != prefix  # the seed chooses
    with pytest.raises(ValueError, match="non-member"):
        survey(plan_parts(str(bench), 1000), shots=500)


def test_a_part_is_skipped_only_when_its_marker_matches(tmp_path):
    dest = Location(tmp_path / "out")
    store = PartStore(dest, "fp-1")
    for i in range(3):
        dest.write_bytes(f"token_stats.parquet/part-{i:05d}.parquet", b"x")
    store.commit({"index": 0, "rows_in": 2}, "digest-0", "run")
    store.commit({"index": 1, "rows_in": 2}, "digest-1", "run")
    assert store.marker(0, "digest-0")["rows_in"] == 2
    assert store.marker(1, "edited") is None  # the part's input changed
    assert PartStore(dest, "fp-2").marker(0, "digest-0") is None  # the scoring changed
    assert store.marker(2, "digest-2") is None  # never committed
    store.clean(keep={0})
    assert dest.list("token_stats.parquet") == ["token_stats.parquet/part-00000.parquet"]
    assert dest.list("_parts") == ["_parts/part-00000.done.json"]


def test_a_part_with_no_line_finishes_with_empty_files(tmp_path):
    """A byte range in which no line starts (the tail of a file) is a part with no row: it is finished and
    committed like any other, with empty token-stats, scores and quarantine files (it used to crash the take)."""
    from jobs.plane.scoring_pool import ROWS_SCHEMA, ModelBranch, PartFinisher, ScoringSpec
    from curation.io.ledger import quarantine_table
    from scoring.detectors import parse_method
    from jobs.plane.tasks import SCORED_SCHEMA

    spec = ScoringSpec((ModelBranch("unused", ("original",)),))
    finisher = PartFinisher(spec, str(tmp_path), [parse_method("loss")])
    summary = finisher.finish(7, ROWS_SCHEMA.empty_table(), quarantine_table([]), SCORED_SCHEMA.empty_table(),
                              "streamed")
    assert (summary["rows_in"], summary["scored"], summary["quarantined"]) == (0, 0, 0)
    for d in ("token_stats", "scores", "quarantine"):
        assert pq.read_table(tmp_path / f"{d}.parquet" / "part-00007.parquet").num_rows == 0


def test_con_recalls_labelled_prefixes_do_not_depend_on_the_cut(tmp_path):
    bench = write_benchmark(tmp_path / "bench.jsonl", n=40)
    labels = {r["id"]: r["label"] for r in read_benchmark(bench)[0]}

    def chosen(n):
        parts = plan_parts(str(bench), n)
        s = SurveyParts()
        plan = plan_from_survey(parts, {p.index: s.survey(p.to_json()) for p in parts}, prefix_shots=3, seed=7,
                                unipc=from_ipc, labelled_shots=5)
        return ({k: tuple(rid for _, _, rid in v) for k, v in plan.labelled_prefixes.items()},
                tuple(rid for _, _, rid in plan.prefix))

    got = [chosen(n) for n in (1, 4, 9, 1000)]
    assert all(g == got[0] for g in got)
    labelled, recall = got[0]
    assert len(labelled["member"]) == len(labelled["nonmember"]) == 5
    assert all(labels[i] == 1 for i in labelled["member"]) and all(labels[i] == 0 for i in labelled["nonmember"])
    assert set(recall) <= set(labelled["nonmember"])  # the same rule: ReCaLL's 3 are Con-ReCall's first non-members
