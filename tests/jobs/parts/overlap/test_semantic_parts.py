"""jobs/parts/overlap/semantic_parts.py and semantic_run.py without Ray: a part's windows are cut as
scoring/semantic/windows.py cuts them, its candidates are each query's exact top k over the part's windows (embedded
a chunk at a time), the driver's merge over parts equals one search over the whole corpus, and it reads back the
chosen windows' texts at their offsets."""
from __future__ import annotations

import json
import random

import numpy as np
import pyarrow.parquet as pq
import pytest

from sentence_models import build_sentence_model

WORDS = ("the farmer walked to market with a basket of apples and came home before rain started while his dog "
         "slept under an old oak tree near river").split()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two corpus files of documents of 5-90 words (one with a line that is not JSON), a tiny model, 4 queries."""
    rng = random.Random(3)
    root = tmp_path_factory.mktemp("semantic-parts")
    docs = [{"id": f"d{j}", "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 90)))}
            for j in range(24)]
    (root / "c").mkdir()
    (root / "c" / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs[:12]) + "{not json\n")
    (root / "c" / "b.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs[12:]))
    model = build_sentence_model(root / "model", [" ".join(WORDS)])
    return {"root": root, "docs": docs, "model": str(model), "queries": [d["text"][:60] for d in docs[::7]]}


def stages(corpus, tmp_path, k=3):
    from curation.io.outputs import Location
    from jobs.parts.overlap.corpus_scan import plan_corpus_parts
    from jobs.parts.overlap.semantic_parts import PrepareWindows, ScoreWindows, part_item
    from jobs.plane.scoring_pool import ModelBranch, ScoringSpec
    from scoring.semantic.embed import Embedder

    parts = plan_corpus_parts(str(corpus["root"] / "c"), {})
    read = {"text_field": "text", "id_field": "id", "opts": {}, "window_words": 20, "window_stride": 10}
    queries = Embedder(corpus["model"]).embed(corpus["queries"])
    spec = ScoringSpec((ModelBranch(corpus["model"], ("original",)),))
    score = ScoreWindows(spec, 0, 1, {"dest": str(tmp_path)}, queries=queries, top_k=k)
    prepared = [PrepareWindows().prepare(json.loads(json.dumps(part_item(p, read)))["part"]) for p in parts]
    return Location(str(tmp_path)), parts, prepared, score


def test_a_part_is_read_quarantined_and_cut_as_windows_py_cuts(corpus, tmp_path):
    from jobs.plane.scoring_pool import from_ipc
    from scoring.semantic.windows import WindowPlan, cut_windows

    _, parts, prepared, _ = stages(corpus, tmp_path)
    assert [p.index for p in parts] == [0, 1]
    bad = from_ipc(prepared[0]["quarantine"]).to_pylist()
    assert [(q["reason"], q["stage"]) for q in bad] == [("bad_json", "corpus.read")]
    docs = from_ipc(prepared[0]["docs"]).to_pylist()
    assert [d["id"] for d in docs] == [f"d{j}" for j in range(12)]
    windows = from_ipc(prepared[0]["windows"]).to_pylist()
    expected = [(i, w.start_word, w.n_words, w.char_start, w.char_end)
                for i, d in enumerate(docs) for w in cut_windows(d["text"], WindowPlan(20, 10))]
    assert [tuple(w.values()) for w in windows] == expected


def test_candidates_are_each_querys_exact_top_k_of_the_part(corpus, tmp_path, monkeypatch):
    import jobs.parts.overlap.semantic_parts as sp
    from jobs.plane.scoring_pool import from_ipc
    from scoring.semantic.search import top_k

    monkeypatch.setattr(sp, "EMBED_CHUNK", 7)  # several chunks per part, merged
    dest, _, prepared, score = stages(corpus, tmp_path)
    for prep in prepared:
        summary = score.score(dict(prep))
        docs, win = from_ipc(prep["docs"]).to_pylist(), from_ipc(prep["windows"]).to_pylist()
        texts = [docs[w["doc"]]["text"][w["char_start"]:w["char_end"]] for w in win]
        s, ids = top_k(score.queries, score.embedder.embed(texts), 3, offset=prep["index"] << 32)
        got = pq.read_table(dest.root / f"candidates.parquet/part-{prep['index']:05d}.parquet").to_pylist()
        assert [(r["query"], r["rank"]) for r in got] == [(q, r) for q in range(len(s)) for r in range(3)]
        assert [r["window"] for r in got] == ids.ravel().tolist()
        assert np.allclose([r["cosine"] for r in got], s.ravel(), atol=1e-5)
        assert set(got[0]) == {"query", "rank", "cosine", "window"}  # the texts are in windows.parquet, once each
        kept = pq.read_table(dest.root / f"windows.parquet/part-{prep['index']:05d}.parquet").to_pylist()
        assert [r["window"] for r in kept] == sorted(set(ids.ravel().tolist()))
        for r in kept:
            w = win[r["window"] - (prep["index"] << 32)]
            doc = docs[w["doc"]]
            assert r["doc_id"] == doc["id"] and r["text"] == doc["text"][r["char_start"]:r["char_end"]]
            assert (r["start_word"], r["n_words"], r["char_start"]) == (w["start_word"], w["n_words"],
                                                                      w["char_start"])
        assert summary["records"] == summary["documents"] + summary["quarantined"] == 12 + (prep["index"] == 0)
        assert summary["windows"] == len(win) and summary["reasons"] == ({"bad_json": 1} if prep["index"] == 0 else {})
        assert (dest.root / f"quarantine.parquet/part-{prep['index']:05d}.parquet").is_file()


def test_the_drivers_merge_equals_one_search_over_the_corpus_and_reads_the_chosen_texts(corpus, tmp_path):
    from jobs.parts.overlap.semantic_run import chosen_windows, merged_top_k
    from jobs.plane.scoring_pool import from_ipc
    from scoring.semantic.search import top_k

    dest, _, prepared, score = stages(corpus, tmp_path, k=4)
    keys, ids, texts = [], [], {}
    for prep in prepared:
        score.score(dict(prep))
        docs, win = from_ipc(prep["docs"]).to_pylist(), from_ipc(prep["windows"]).to_pylist()
        for j, w in enumerate(win):
            text = docs[w["doc"]]["text"][w["char_start"]:w["char_end"]]
            keys.append(text)
            ids.append((prep["index"] << 32) + j)
            texts[ids[-1]] = (docs[w["doc"]]["id"], text)
    s, local = top_k(score.queries, score.embedder.embed(keys), 4)
    merged_s, merged_ids = merged_top_k(dest, [0, 1], len(score.queries), 4)
    assert merged_ids.tolist() == np.asarray(ids)[local].tolist()
    assert np.allclose(merged_s, s, atol=1e-5)
    chosen = chosen_windows(dest, merged_ids)
    assert set(chosen) == set(merged_ids.ravel().tolist())
    assert all((c["doc_id"], c["text"]) == texts[w] for w, c in chosen.items())


def test_the_threshold_without_a_null_is_the_default_with_the_rate_the_study_measured():
    from jobs.parts.overlap.semantic_run import threshold_block
    from scoring.semantic.calibrate import DEFAULT_CALIBRATION, DEFAULT_THRESHOLD
    from scoring.stats.proportions import clopper_pearson_ci

    b = threshold_block(None, 0.01, None)
    d = DEFAULT_CALIBRATION
    assert b["threshold"] == DEFAULT_THRESHOLD and b["null"] is None and b["threshold_source"] == "default"
    assert b["expected_false_flag_rate"] == d["rate"] == d["n_flagged"] / d["n_null"] <= 0.01
    # the stated bound is the one-sided 95% Clopper-Pearson bound of the study's count, not a number typed twice
    assert b["false_flag_upper_bound"] == pytest.approx(clopper_pearson_ci(d["n_flagged"], d["n_null"], 0.1)[1],
                                                         abs=1e-4)
    assert "study" in b["threshold_reason"]
    c = threshold_block([0.0] * 99 + [0.4], 0.01, {"path": "null.jsonl"})
    assert c["threshold"] == 0.4 and c["expected_false_flag_rate"] == 0.01 and c["null"]["n"] == 100
    assert 0.01 < c["false_flag_upper_bound"] < 0.06
