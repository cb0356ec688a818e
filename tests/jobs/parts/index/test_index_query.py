"""`overlap --index` through the batched suffix-array search (jobs/parts/index/query.py), against a scan of the
same texts in this process (scoring/overlap/matching.scan_texts) and against infini-gram's engine over the same
files (the old way, tests/index_engine.py): counts, each n-gram's first documents, every row's answer, and
`--query`'s occurrences and word offsets, on an index of two parts and three shards whose documents repeat ids and
passages."""
from __future__ import annotations

import random

import pytest

pytest.importorskip("pydivsufsort")

from jobs.parts.index.build import SHARDS, _ShardWriter  # noqa: E402
from jobs.parts.index.query import index_matches, index_shards, span_report  # noqa: E402
from scoring.overlap.matching import BenchmarkGrams, row_results, scan_texts  # noqa: E402
from scoring.overlap.ngrams import word_hashes, word_ids, words  # noqa: E402

VOCAB = [f"w{k}" for k in range(40)]


def sentence(rng, n):
    return " ".join(rng.choice(VOCAB) for _ in range(n))


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """Documents in corpus order over part-00000 (shards 0 and 1) and part-00001 (shard 0); some repeat an id
    (the same id in a later document and a later part) and some carry a planted benchmark passage."""
    rng = random.Random(3)
    rows = [{"id": f"q{k}", "input": sentence(rng, 20)} for k in range(8)]
    docs = []
    for k in range(45):
        text = sentence(rng, rng.randint(5, 60))
        if k % 7 == 0:
            q = rows[k % len(rows)]["input"].split()
            text += " " + " ".join(q[rng.randint(0, 5):rng.randint(10, 20)])
        docs.append({"id": "dup" if k in (3, 30) else f"d{k}", "text": text})
    local = tmp_path_factory.mktemp("idx")
    layout = [("part-00000", 0, docs[:15]), ("part-00000", 1, docs[15:30]), ("part-00001", 0, docs[30:])]
    for part, k, chunk in layout:
        where = local / SHARDS / part
        where.mkdir(parents=True, exist_ok=True)
        w = _ShardWriter(where, k)
        for d in chunk:
            w.add(d["id"], word_ids(word_hashes(words(d["text"]))), text=d["text"], file="c.jsonl")
        w.close()
    return {"local": local, "rows": rows, "docs": docs}


@pytest.mark.parametrize("n", [3, 8])
def test_every_row_s_answer_equals_a_scan_of_the_texts(index, n):
    bench = BenchmarkGrams.of(index["rows"], n)
    scanned = scan_texts(bench, [d["text"] for d in index["docs"]], [d["id"] for d in index["docs"]])
    for max_sources in (1, 3, 10):
        got = index_matches(index_shards(index["local"]), bench, max_sources)
        assert row_results(bench, got, max_sources=max_sources) == row_results(bench, scanned,
                                                                                max_sources=max_sources)
    assert any(r["corpus_occurrences"] for r in row_results(bench, scanned))  # the test reaches documents


def test_counts_and_documents_equal_infini_gram_s_engine(index):
    pytest.importorskip("infini_gram")
    from index_engine import engine, engine_documents

    bench = BenchmarkGrams.of(index["rows"], 4)
    shards = index_shards(index["local"])
    got = index_matches(shards, bench, 5)
    eng = engine(index["local"])
    checked = 0
    for w, g in zip(bench.words, bench.grams):
        ids = word_ids(word_hashes(w)).tolist()
        for i, key in enumerate(g.tolist()):
            count, docs = engine_documents(eng, ids[i:i + 4], 5)
            assert got.count.get(key, 0) == count
            if key in got.sources:  # documents are read for the n-grams a row's answer takes
                assert got.sources[key] == docs
                checked += 1
    assert checked > 5


def test_a_query_s_occurrences_are_in_corpus_order_with_their_words(index):
    shards = index_shards(index["local"])
    docs = index["docs"]
    q = " ".join(index["rows"][0]["input"].split()[11:15])
    want = [(d["id"], i) for d in docs for w in [words(d["text"])] for i in range(len(w) - 3)
            if w[i:i + 4] == q.split()]
    res = span_report(shards, q, max_sources=100)
    assert res["words"] == 4 and res["count"] == len(want) > 0
    assert [(d["id"], d["word_offset"]) for d in res["documents"]] == want
    assert span_report(shards, q, max_sources=1)["documents"] == res["documents"][:1]
    assert span_report(shards, "zz unseen words", max_sources=3) == {"words": 3, "count": 0, "documents": []}
    assert span_report(shards, "  ...  ") == {"words": 0, "count": 0, "documents": []}
