"""`build-benchmark --drop-rephrased OUT`'s read of each `overlap --semantic` output, on the driver before the
build starts, so that an OUT that cannot serve is refused (exit 2, one line) before anything is parsed or written.

Per OUT: its rows' ids and decisions (semantic.parquet's `id`, `rephrased`, and for a flagged row where its passage
is: `doc_id`, `char_start`, `char_end`, `decision_score`), each id's text key from the benchmark the overlap read
(report.json's inputs.benchmark and settings.benchmark_field, for the join by text; null where that benchmark
cannot be read here), and the facts of its semantic pass for the manifest. The curation side
(curation/release/rephrased.py) joins them to the sampled rows. The table is benchmark-sized (an id, a key and a
flag per row; a detail per flagged row), as the overlap's own read of the benchmark is.
"""
from __future__ import annotations

import pyarrow as pa

from curation.release.rephrased import OVERLAP_SCHEMA, RephrasedDropError, RephrasedOverlap

COLUMNS = ["id", "rephrased", "doc_id", "char_start", "char_end", "decision_score"]


def read_overlaps(specs: list[str]) -> list[RephrasedOverlap]:
    return [read_overlap(spec) for spec in specs]


def read_overlap(spec: str) -> RephrasedOverlap:
    from curation.io.outputs import Location
    from jobs.plane.benchmark_reader import text_keys

    loc = Location(spec)
    done = loc.completion()
    if done is None:
        raise RephrasedDropError(f"--drop-rephrased {spec}: no _SUCCESS there (not a finished `tidemark overlap` "
                                 "output)")
    if done.get("job") != "overlap":
        raise RephrasedDropError(f"--drop-rephrased {spec}: a {done.get('job')!r} output; it reads the OUT of "
                                 "`tidemark overlap --semantic`")
    report = loc.read_json("report.json")
    block = report.get("semantic")
    if block is None or not loc.exists("semantic.parquet"):
        raise RephrasedDropError(f"--drop-rephrased {spec}: no semantic.parquet (an overlap run without "
                                 "--semantic); run `tidemark overlap --semantic` with this release as --benchmark")
    sem = loc.read_parquet("semantic.parquet", columns=COLUMNS)
    benchmark = (report.get("inputs") or {}).get("benchmark")
    keys = text_keys(benchmark, (report.get("settings") or {}).get("benchmark_field"))
    ids = sem.column("id").to_pylist()
    flags = [bool(f) for f in sem.column("rephrased").to_pylist()]
    details = [_detail(*cols) if f else None
               for f, *cols in zip(flags, *(sem.column(c).to_pylist() for c in COLUMNS[2:]))]
    table = pa.table({"id": ids, "key": pa.array([keys.get(i) for i in ids], pa.uint64()), "rephrased": flags,
                      "detail": details}, schema=OVERLAP_SCHEMA)
    embedder = block.get("embedder") or {}
    facts = {"benchmark": benchmark, "embedder": embedder.get("name"),
             "embedder_weights_digest": embedder.get("weights_digest"), "threshold": block.get("threshold"),
             "threshold_source": block.get("threshold_source"),
             "expected_false_flag_rate": block.get("expected_false_flag_rate"),
             "false_flag_upper_bound": block.get("false_flag_upper_bound"), "judge": block.get("judge")}
    return RephrasedOverlap(spec, table, facts)


def _detail(doc_id, char_start, char_end, decision_score) -> str:
    """Where the flagged row's rephrase is: the corpus document and the passage's characters in it."""
    score = f", decision score {decision_score:.3f}" if decision_score is not None else ""
    return f"doc_id {doc_id}, characters {char_start}-{char_end}{score}"


def log_record(record: dict, log) -> None:
    """What the build did with the overlaps, in the build's log: a row the overlap did not check is worth a line."""
    log(f"rephrased in a model's corpus: {record['dropped']} non-members dropped, {record['flagged_members_kept']} "
        "flagged members kept")
    for o in record["overlaps"]:
        if o["rows_not_checked"]:
            log(f"warning: {o['rows_not_checked']} of {record['rows_in']} release rows are not rows of "
                f"{o['overlap']} (joined by {o['join']}): not checked for rephrases there")
