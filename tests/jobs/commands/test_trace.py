"""`tidemark trace` end to end on a small corpus index (several parts, several shards a part): its spans, counts,
documents and offsets equal an independent scan of the corpus's words; `overlap --index` finds the same document for
the same span; untraceable rows are quarantined and the counts reconcile; the page escapes untrusted text; the Ray
runner gives the local runner's tables."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("pydivsufsort")
pytest.importorskip("pydivsufsort")

from jobs.commands.index_corpus import IndexConfig, run_index  # noqa: E402
from jobs.commands.trace import TraceConfig, run_trace  # noqa: E402

VOCAB = [f"w{k}" for k in range(400)]


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    """Three jsonl files of random-word documents; doc `planted` holds a passage the texts copy, `twice` repeats a
    phrase, and one document carries markup that the page must escape."""
    rng = random.Random(3)
    root = tmp_path_factory.mktemp("trace")
    docs = [(f"d{k}", " ".join(rng.choice(VOCAB) for _ in range(rng.randint(20, 120)))) for k in range(90)]
    docs[10] = ("planted", "Once upon a midnight dreary, while I pondered, weak and weary, over many a quaint and "
                "curious volume of forgotten lore. " + docs[10][1])
    docs[40] = ("markup", docs[40][1] + " <script>alert('x')</script> the raven said nevermore & more")
    docs[70] = ("twice", "while i pondered weak and weary " + docs[70][1] + " while i pondered weak and weary")
    (root / "c").mkdir()
    for f in range(3):
        with open(root / "c" / f"part{f}.jsonl", "w") as fh:
            for doc_id, text in docs[f * 30:(f + 1) * 30]:
                fh.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    idx = root / "idx"
    run_index(IndexConfig(corpus=str(root / "c"), out=str(idx), part_bytes=8_000, max_shard_tokens=1024,
                          progress=False))
    texts = [{"id": "poe", "text": "He wrote: once upon a midnight dreary, while I pondered weak and weary, then "
                                   "slept."},
             {"id": "copy", "text": "Noise words " + " ".join(docs[55][1].split()[5:40]) + " end."},
             {"id": "markup", "text": "the <script>alert('x')</script> the raven said nevermore"},
             {"id": "twice", "text": "so while I pondered weak and weary, I slept"},
             {"id": "none", "text": "zzz yyy xxx qqq"},
             {"id": "empty", "text": " ... "},
             {"id": "poe", "text": "a duplicate id"}]
    tf = root / "texts.jsonl"
    tf.write_text("".join(json.dumps(t) + "\n" for t in texts) + "not json\n")
    return {"root": root, "docs": docs, "idx": idx, "texts": tf, "rows": texts}


def brute_force(docs, text: str, min_words: int, limit: int) -> list[dict]:
    """Maximal spans by scanning every document's words for every (start, length): count, first documents."""
    w = words(text)
    dw = [(i, words(t)) for i, t in docs]

    def where(span):
        out = []
        for doc_id, d in dw:
            out += [(doc_id, k) for k in range(len(d) - len(span) + 1) if d[k:k + len(span)] == span]
        return out

    longest = []
    for i in range(len(w)):
        n = 0
        while i + n < len(w) and where(w[i:i + n + 1]):
            n += 1
        longest.append(n)
    spans, reach = [], 0
    for i, n in enumerate(longest):
        if n and i + n > reach:
            reach = i + n
            if n >= min_words:
                hits = where(w[i:i + n])
                docs = list({d: (d, k) for d, k in reversed(hits)}.values())[::-1]  # a document's first occurrence
                spans.append({"start": i, "end": i + n, "count": len(hits), "docs": docs[:limit]})
    return spans


def test_spans_counts_and_documents_equal_a_scan_of_the_corpus(corpus, tmp_path):
    res = run_trace(TraceConfig(index=str(corpus["idx"]), texts=str(corpus["texts"]), out=str(tmp_path / "o"),
                                min_words=4, docs_per_span=3, batch_texts=2, progress=False))
    spans = pq.read_table(tmp_path / "o" / "spans.parquet").to_pylist()
    meta = json.loads((corpus["idx"] / "index.json").read_text())
    assert meta["counts"]["parts"] >= 2 and meta["counts"]["shards"] > meta["counts"]["parts"]
    for row in corpus["rows"][:5]:
        want = brute_force(corpus["docs"], row["text"], 4, 3)
        got = sorted((s for s in spans if s["id"] == row["id"]), key=lambda s: s["start"])
        assert [(s["start"], s["end"], s["count"]) for s in got] == [(x["start"], x["end"], x["count"]) for x in want]
        assert [list(zip(s["doc_ids"], s["doc_offsets"])) for s in got] == [x["docs"] for x in want]
    poe = [s for s in spans if s["id"] == "poe"]
    # "once upon a midnight dreary while i pondered weak and weary": 11 words, once, in `planted`; the shorter run
    # `twice` also holds lies inside it, so it is no span of its own
    assert [(s["words"], s["count"], s["doc_ids"]) for s in poe] == [(11, 1, ["planted"])]
    twice = [s for s in spans if s["id"] == "twice"]  # twice in `twice`, once in `planted`: 3, two documents
    assert [(s["words"], s["count"], s["doc_ids"]) for s in twice] == [(6, 3, ["planted", "twice"])]
    assert res["summary"]["counts"] == {"rows_in": 8, "traced": 5, "quarantined": 3,
                                        "reasons": {"no_words": 1, "duplicate_id": 1, "bad_json": 1}}
    q = pq.read_table(tmp_path / "o" / "quarantine.parquet")
    assert q.num_rows == 3 and (tmp_path / "o" / "_SUCCESS").exists()


def test_documents_have_snippets_bm25_ranks_and_the_page_escapes_them(corpus, tmp_path):
    run_trace(TraceConfig(index=str(corpus["idx"]), texts=str(corpus["texts"]), out=str(tmp_path / "o"),
                          min_words=4, context_words=3, progress=False))
    docs = pq.read_table(tmp_path / "o" / "documents.parquet").to_pylist()
    planted = [d for d in docs if d["doc_id"] == "planted"][0]
    assert planted["file"] == "part0.jsonl" and planted["word_offset"] == 0
    assert planted["snippet"][planted["match_start"]:planted["match_end"]].lower().startswith("once upon")
    assert all(d["doc_rank"] >= 1 for d in docs)
    for text_id in {d["id"] for d in docs}:  # ranks follow BM25 within a text
        mine = sorted({(d["doc_rank"], d["bm25"]) for d in docs if d["id"] == text_id})
        assert [b for _, b in mine] == sorted((b for _, b in mine), reverse=True)
    page = (tmp_path / "o" / "report.html").read_text()
    assert "<script>" not in page and "script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["summary"]["texts_with_span"] == 4
    assert (tmp_path / "o" / "longest.png").stat().st_size > 1000


def test_a_traced_document_is_found_by_overlap_for_the_same_span(corpus, tmp_path):
    pytest.importorskip("infini_gram")
    from index_engine import engine, engine_documents
    from jobs.parts.index.query import index_shards, span_report
    from jobs.parts.index.reader import local_index
    from scoring.overlap.ngrams import word_hashes, word_ids, words

    res = run_trace(TraceConfig(index=str(corpus["idx"]), text=corpus["rows"][1]["text"], min_words=4,
                                progress=False))
    local = local_index(str(corpus["idx"]))[0]
    shards, eng = index_shards(local), engine(local)
    for s in res["spans"].to_pylist():
        found = span_report(shards, s["span"], max_sources=50)
        assert found["count"] == s["count"] == engine_documents(eng, word_ids(word_hashes(words(s["span"]))).tolist(),
                                                                 50)[0]
        assert set(s["doc_ids"]) <= {d["id"] for d in found["documents"]}


def test_the_ray_runner_and_chunks_give_the_local_runner_s_tables(corpus, tmp_path, ray_session):
    common = dict(index=str(corpus["idx"]), texts=str(corpus["texts"]), min_words=4, batch_texts=2, progress=False)
    local = run_trace(TraceConfig(out=str(tmp_path / "l"), runner="local", **common))
    on_ray = run_trace(TraceConfig(out=str(tmp_path / "r"), runner="ray", chunk_texts=3, **common))  # 2 chunks
    assert on_ray["summary"]["runner"]["used"] == "ray"
    for name in ("spans.parquet", "documents.parquet"):
        assert pq.read_table(tmp_path / "r" / name).equals(pq.read_table(tmp_path / "l" / name))
    assert local["summary"]["summary"] == on_ray["summary"]["summary"]
    # chunks of 3 rows: the duplicate id and the bad line fall in later chunks, still quarantined
    assert local["summary"]["counts"] == on_ray["summary"]["counts"] == {
        "rows_in": 8, "traced": 5, "quarantined": 3, "reasons": {"no_words": 1, "duplicate_id": 1, "bad_json": 1}}


def test_a_parquet_input_gives_the_jsonl_input_s_spans(corpus, tmp_path):
    import pyarrow as pa

    rows = [r for r in corpus["rows"][:4]]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "texts.parquet")
    (tmp_path / "texts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("texts.parquet", "texts.jsonl"):
        run_trace(TraceConfig(index=str(corpus["idx"]), texts=str(tmp_path / name), out=str(tmp_path / name[6:]),
                              min_words=4, chunk_texts=2, runner="local", progress=False))
    spans = [pq.read_table(tmp_path / d / "spans.parquet") for d in ("parquet", "jsonl")]
    assert spans[0].num_rows and spans[0].equals(spans[1])


def test_bad_inputs_are_one_clear_line(corpus, tmp_path):
    from typer.testing import CliRunner

    from jobs.cli import app

    r = CliRunner().invoke(app, ["trace", "--index", str(corpus["idx"]), "--texts", str(corpus["texts"])])
    assert r.exit_code == 2 and "--out" in r.output
    r = CliRunner().invoke(app, ["trace", "--index", str(tmp_path / "nothing"), "--text", "a b c"])
    assert r.exit_code == 2 and "not a complete index" in r.output
    r = CliRunner().invoke(app, ["trace", "--index", str(corpus["idx"]), "--text",
                                 "once upon a midnight dreary while", "--min-words", "3"])
    assert r.exit_code == 0 and "planted" in r.output
    nothing = tmp_path / "nothing.jsonl"
    nothing.write_text('{"id": "a", "text": "zzz yyy xxx"}\n')
    r = CliRunner().invoke(app, ["trace", "--index", str(corpus["idx"]), "--texts", str(nothing), "--out",
                                 str(tmp_path / "none"), "--quiet"])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "none" / "report.json").read_text())["summary"]["texts_with_span"] == 0
