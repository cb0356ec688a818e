"""`tidemark overlap` end to end on Ray: copies of benchmark rows planted in a corpus of every format are found,
bad corpus input is quarantined with its reason, counts reconcile, and a cut-off run resumes by corpus part."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from jobs.commands.overlap import OverlapConfig, run_overlap

pytestmark = pytest.mark.ray

FORMATS = ("jsonl", "jsonl.gz", "jsonl.zst", "parquet", "txt")


def sentence(rng: random.Random, n: int, vocab: int = 4000) -> str:
    return " ".join(f"w{rng.randrange(vocab)}" for _ in range(n))


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> dict:
    """20 benchmark rows; row k (k < 5) is planted whole in the file of format k, upper-cased with punctuation;
    row 5 has its first 20 words planted; the rest appear nowhere. Plus bad input in every way the reader knows."""
    import zstandard

    rng = random.Random(11)
    root = tmp_path_factory.mktemp("overlap")
    rows = [{"id": f"q{i}", "question": sentence(rng, 30), "bucket": "32" if i % 2 else "64",
             "label": i % 2} for i in range(20)]
    bench = root / "bench.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows) + json.dumps({"id": "blank", "question": " "}) + "\n")
    corpus = root / "corpus"
    corpus.mkdir()
    planted = {}
    for k, fmt in enumerate(FORMATS):
        docs = [{"id": f"{fmt}-{j}", "text": sentence(rng, 200, vocab=3000)} for j in range(60)]
        words = rows[k]["question"].upper().split()
        docs[17]["text"] += " ... " + ", ".join(words) + "!"
        planted[rows[k]["id"]] = f"{fmt}-17" if fmt != "txt" else "f4.txt"
        if k == 0:
            docs[30]["text"] += " " + " ".join(rows[5]["question"].split()[:20])
        lines = b"".join(json.dumps(d).encode() + b"\n" for d in docs)
        if fmt == "jsonl":
            (corpus / "f0.jsonl").write_bytes(lines + b'{"id": "cut\n' + b"\xff\xfe\n"
                                              + b'{"id": "nt", "body": "x"}\n')
        elif fmt == "jsonl.gz":
            (corpus / "f1.jsonl.gz").write_bytes(gzip.compress(lines))
        elif fmt == "jsonl.zst":
            (corpus / "f2.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
        elif fmt == "parquet":
            pq.write_table(pa.Table.from_pylist(docs), corpus / "f3.parquet")
        else:
            (corpus / "f4.txt").write_text(docs[17]["text"])
    truncated = gzip.compress(b"".join(json.dumps({"id": f"t{j}", "text": sentence(rng, 100)}).encode() + b"\n"
                                       for j in range(200)))
    (corpus / "f5.jsonl.gz").write_bytes(truncated[: len(truncated) // 2])
    return {"root": root, "bench": bench, "corpus": corpus, "planted": planted, "rows": rows}


def run(study: dict, out: Path, **kw) -> dict:
    cfg = OverlapConfig(**{"benchmark": str(study["bench"]), "corpus": str(study["corpus"]), "out": str(out),
                           "benchmark_field": "question", "progress": False, **kw})
    return run_overlap(cfg)


@pytest.fixture(scope="module")
def result(ray_session, study) -> tuple[dict, Path]:
    out = study["root"] / "out"
    return run(study, out), out


def test_planted_copies_are_found_in_every_format_with_their_document(result, study):
    res, out = result
    rows = {r["id"]: r for r in pq.read_table(out / "rows.parquet").to_pylist()}
    assert list(rows) == [r["id"] for r in study["rows"]]  # every readable row, in order, joinable by id
    for rid, doc in study["planted"].items():
        assert rows[rid]["share"] == 1.0 and rows[rid]["longest_match_words"] == 30, rid
        assert rows[rid]["sources"] == [doc] and rows[rid]["contaminated"]
    half = rows["q5"]
    assert half["n_matched"] == 20 - 13 + 1 and half["longest_match_words"] == 20 and half["sources"] == ["jsonl-30"]
    clean = [r for rid, r in rows.items() if rid not in study["planted"] and rid != "q5"]
    assert all(r["share"] == 0.0 and not r["contaminated"] and r["sources"] == [] for r in clean)
    assert res["contamination"]["contaminated"] == 6 and res["contamination"]["checked"] == 20


def test_bad_input_is_quarantined_and_counts_reconcile(result):
    _, out = result
    report = json.loads((out / "report.json").read_text())
    c = report["counts"]
    assert (c["rows_in"], c["rows_scored"], c["rows_quarantined"]) == (21, 20, 1)
    assert c["rows_reasons"] == {"empty_input": 1}
    assert c["corpus_files"] == 6 and c["corpus_records"] == c["corpus_documents"] + c["corpus_quarantined"]
    assert c["corpus_reasons"] == {"bad_json": 1, "not_utf8": 1, "missing_text": 1, "corrupt_file": 1}
    quarantine = pq.read_table(out / "quarantine.parquet").to_pylist()
    assert sorted(q["reason"] for q in quarantine) == sorted(["bad_json", "not_utf8", "missing_text",
                                                              "corrupt_file"])
    assert 0 < _truncated_read(out) < 200  # the truncated file's documents before the break are kept
    assert c["corpus_documents"] == 60 * 4 + 1 + _truncated_read(out)
    by = report["contamination"]["by"]
    assert set(by) == {"bucket", "label"} and sum(g["checked"] for g in by["bucket"].values()) == 20
    for name in ("report.md", "report.html", "shares.png", "benchmark_quarantine.parquet", "_SUCCESS"):
        assert (out / name).is_file(), name
    assert "6 of 20 benchmark rows (30.0%" in (out / "report.md").read_text()


def _truncated_read(out: Path) -> int:
    """How many documents of the truncated file were read before it broke (its parts' summary says)."""
    marker = json.loads((out / "_parts" / "part-00005.done.json").read_text())
    return marker["documents"]


def test_a_run_cut_off_after_two_parts_resumes_and_matches_an_uninterrupted_run(ray_session, study, result,
                                                                                monkeypatch, tmp_path):
    from jobs.plane.part_loop import ABORT_ENV, InjectedAbort

    out = tmp_path / "cut"
    monkeypatch.setenv(ABORT_ENV, "2")
    with pytest.raises(InjectedAbort):
        run(study, out)
    assert not (out / "_SUCCESS").exists() and len(list((out / "_parts").glob("*.done.json"))) == 2
    monkeypatch.delenv(ABORT_ENV)
    res = run(study, out)
    report = json.loads((out / "report.json").read_text())
    assert report["parts"]["reused"] == 2 and report["parts"]["scored"] == 4
    assert (out / "rows.parquet").read_bytes() == (result[1] / "rows.parquet").read_bytes()
    assert res["counts"] == result[0]["counts"]


def test_the_cli_refuses_a_missing_corpus_in_one_line(study, tmp_path):
    from jobs.cli import app

    res = CliRunner().invoke(app, ["overlap", "--benchmark", str(study["bench"]), "--corpus",
                                   str(tmp_path / "nothing"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "error:" in res.output and not (tmp_path / "o").exists()


def test_an_index_of_the_corpus_gives_the_scan_s_answers(ray_session, study, result, tmp_path):
    """`index-corpus` then `overlap --index`: every row's share, longest match, occurrences and documents equal the
    streaming scan's, and the index counts the same documents and quarantined records."""
    from jobs.commands.index_corpus import IndexConfig, run_index
    from jobs.parts.index.query import index_shards, span_report
    from jobs.parts.index.reader import local_index

    info = run_index(IndexConfig(corpus=str(study["corpus"]), out=str(tmp_path / "idx"), progress=False))
    scanned = result[0]["counts"]
    assert info["counts"]["documents"] == scanned["corpus_documents"]
    assert info["counts"]["reasons"] == scanned["corpus_reasons"]
    res = run(study, tmp_path / "via-index", corpus=None, index=str(tmp_path / "idx"))
    assert pq.read_table(tmp_path / "via-index" / "rows.parquet").equals(pq.read_table(result[1] / "rows.parquet"))
    assert res["contamination"] == result[0]["contamination"]
    shards = index_shards(local_index(str(tmp_path / "idx"))[0])
    words = [r for r in study["rows"] if r["id"] == "q5"][0]["question"].split()
    span = span_report(shards, " ".join(words[2:18]))  # inside the 20 words planted in jsonl-30
    assert span["count"] == 1 and span["documents"] == [{"id": "jsonl-30", "word_offset": 202}]
    assert span_report(shards, " ".join(words[10:30]))["count"] == 0  # runs past what was planted


def test_an_index_path_the_engine_would_misread_is_refused(tmp_path):
    from jobs.parts.index.build import check_index_path

    with pytest.raises(ValueError, match="may not contain 'table'"):
        check_index_path(str(tmp_path / "stable-indexes" / "dolma"))
