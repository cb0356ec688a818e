"""`tidemark index-corpus --embeddings` then `overlap --index --semantic`, on Ray with a tiny random sentence model
(tests/sentence_models.py): the index's stored windows give the same semantic.parquet as embedding the corpus
(`overlap --corpus --semantic`, same windows, exact search), nothing is embedded again and a rerun reuses every
part; an index in float16 shards small enough to be many, each searched through its approximate index, still
flags the planted items at their documents; an index without embeddings, or built with another embedder or window
plan than the run asks for, is refused in one line (exit 2)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from jobs.commands.index_corpus import IndexConfig, run_index
from jobs.commands.overlap import OverlapConfig, run_overlap
from sentence_models import build_sentence_model

pytestmark = pytest.mark.ray
pytest.importorskip("pydivsufsort")
pytest.importorskip("faiss")

NAMES = "Adaeze Bartholomew Cosima Dmitri Evangeline Fitzgerald Gwendolyn Horatio Isolde Jebediah Kassandra".split()
FILLER = ("the farmer walked to the market with a basket of apples and came back home before the rain started "
          "while his dog slept under the old tree").split()
PLANTED = {0: ("a.jsonl", "plant-0"), 2: ("b.parquet", "plant-2"), 5: ("b.parquet", "plant-5")}
WORDS, STRIDE = 40, 20


def problem(name: str, a: int, b: int) -> str:
    return (f"At the county fair, {name} bought {a} pencils and later gave {b} of them to the children of the "
            f"village. How many pencils did {name} keep for the school?")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> dict:
    """8 items (3 planted whole as corpus documents), a null of 3, two corpus files (one line not JSON), a model."""
    rng = random.Random(11)
    root = tmp_path_factory.mktemp("semantic-index")
    nums = iter(rng.sample(range(100, 1000), 40))
    items = [{"id": f"q{i}", "question": problem(NAMES[i], next(nums), next(nums))} for i in range(8)]
    null = [{"id": f"n{i}", "question": problem(NAMES[8 + i], next(nums), next(nums))} for i in range(3)]
    files: dict[str, list] = {"a.jsonl": [], "b.parquet": []}
    for j in range(24):
        files[list(files)[j % 2]].append({"id": f"doc-{j}", "text": " ".join(
            rng.choice(FILLER) for _ in range(rng.randint(20, 160)))})
    for i, (f, doc) in PLANTED.items():
        files[f].insert(3, {"id": doc, "text": "Worksheet. " + items[i]["question"]})
    corpus = root / "corpus"
    corpus.mkdir()
    (corpus / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in files["a.jsonl"]) + "{not json\n")
    pq.write_table(pa.Table.from_pylist(files["b.parquet"]), corpus / "b.parquet")
    (root / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    (root / "null.jsonl").write_text("".join(json.dumps(r) + "\n" for r in null))
    model = build_sentence_model(root / "model", [r["question"] for r in items + null] + [" ".join(FILLER)])
    other = build_sentence_model(root / "other-model", ["a different tokenizer, so different vectors"])
    return {"root": root, "corpus": corpus, "model": str(model), "other": str(other)}


def overlap(study: dict, out: Path, **kw) -> dict:
    cfg = OverlapConfig(**{"benchmark": str(study["root"] / "bench.jsonl"), "out": str(out), "n": 0,
                           "benchmark_field": "question", "semantic": True, "embedder": study["model"],
                           "null": str(study["root"] / "null.jsonl"), "top_k": 10, "progress": False, **kw})
    return run_overlap(cfg)


def index(study: dict, name: str, **kw) -> dict:
    return run_index(IndexConfig(**{"corpus": str(study["corpus"]), "out": str(study["root"] / name),
                                    "embeddings": True, "embedder": study["model"], "window_words": WORDS,
                                    "window_stride": STRIDE, "progress": False, **kw}))


@pytest.fixture(scope="module")
def runs(ray_session, study) -> dict:
    info = index(study, "idx", vector_dtype="float32")
    overlap(study, study["root"] / "scan", corpus=str(study["corpus"]), window_words=WORDS, window_stride=STRIDE)
    overlap(study, study["root"] / "asked", index=str(study["root"] / "idx"))
    return {"info": info, "scan": study["root"] / "scan", "asked": study["root"] / "asked"}


def rows(out: Path) -> list[dict]:
    return pq.read_table(out / "semantic.parquet").to_pylist()


def test_the_index_gives_the_decisions_of_embedding_the_corpus(runs):
    scan, asked = rows(runs["scan"]), rows(runs["asked"])
    assert [r["id"] for r in asked] == [r["id"] for r in scan] and len(scan) == 8
    for a, b in zip(asked, scan):
        for col in ("score", "cosine", "decision_score", "verifier_score"):
            assert a.pop(col) == pytest.approx(b.pop(col), abs=1e-5), (a["id"], col)
        assert a == b
    flagged = {r["id"]: r["doc_id"] for r in asked if r["rephrased"]}
    assert flagged == {f"q{i}": doc for i, (_, doc) in PLANTED.items()}
    s, c = (json.loads((runs[k] / "report.json").read_text())["semantic"] for k in ("asked", "scan"))
    assert s["window"]["size"] == WORDS and s["window"]["stride"] == STRIDE and "the index's" in s["window"]["how"]
    assert s["counts"]["windows"] == c["counts"]["windows"] == runs["info"]["embeddings"]["counts"]["windows"]
    assert (s["counts"]["corpus_documents"], s["counts"]["corpus_quarantined"]) == (
        c["counts"]["corpus_documents"], c["counts"]["corpus_quarantined"]) == (27, 1)
    assert s["counts"]["corpus_files"] == 2 and s["settings"]["index"].endswith("idx")
    quarantined = pq.read_table(runs["asked"] / "semantic" / "quarantine.parquet").to_pylist()
    assert [q["reason"] for q in quarantined] == ["bad_json"]


def test_the_index_records_its_embedder_and_windows(runs, study):
    e = runs["info"]["embeddings"]
    assert e["embedder"]["path"] == study["model"] and len(e["embedder"]["files_digest"]) == 64
    assert e["window"] == {"size": WORDS, "stride": STRIDE, "contained_span": WORDS - STRIDE + 1}
    assert e["dtype"] == "float32" and e["counts"]["ann_shards"] == 0  # a tiny corpus is searched exactly
    assert e["counts"]["documents"] == 27 and e["counts"]["quarantined"] == 1 and len(e["parts"]) == 1
    saved = json.loads((study["root"] / "idx" / "index.json").read_text())["embeddings"]
    assert saved["parts"] == e["parts"]
    names = {p.name for p in (study["root"] / "idx" / "embeddings" / "part-00000").iterdir()}
    assert names == {"vectors.000.npy", "windows.000.parquet", "shards.json", "quarantine.parquet"}


def test_a_rerun_on_the_index_reuses_every_part(runs, study):
    before = pq.read_table(runs["asked"] / "semantic.parquet")
    overlap(study, runs["asked"], index=str(study["root"] / "idx"))
    s = json.loads((runs["asked"] / "report.json").read_text())["semantic"]
    assert s["parts"]["reused"] == 1 and s["parts"]["scored"] == 0
    assert pq.read_table(runs["asked"] / "semantic.parquet").equals(before)


def test_many_small_float16_shards_through_their_approximate_indexes(runs, study):
    info = index(study, "idx-ann", vector_dtype="float16", max_shard_windows=25, ann_min_windows=1)
    e = info["embeddings"]
    assert e["counts"]["shards"] >= 3 and e["counts"]["ann_shards"] == e["counts"]["shards"]
    shards = json.loads((study["root"] / "idx-ann" / "embeddings" / "part-00000" / "shards.json").read_text())
    assert all(s["ann"]["kind"] == "ivf" and s["ann"]["nprobe"] >= 1 for s in shards)
    out = study["root"] / "asked-ann"
    overlap(study, out, index=str(study["root"] / "idx-ann"))
    got, exact = {r["id"]: r for r in rows(out)}, {r["id"]: r for r in rows(runs["asked"])}
    # a planted item is decided on its own window through any index. Not "at rank 0": the random model puts every
    # same-template window within ~1e-3 of cosine 0.99, as close as float16 rounds, and the verifier picks it
    for i, (_, doc) in PLANTED.items():
        r, e = got[f"q{i}"], exact[f"q{i}"]
        assert r["rephrased"] and r["doc_id"] == doc and r["char_start"] == e["char_start"] and r["rank"] < 10
        assert r["score"] == pytest.approx(e["score"], abs=2e-3)  # float16 vectors: cosines to ~1e-3
    windows = pq.read_table(out / "semantic" / "windows.parquet").to_pylist()
    texts = {json.loads(line)["id"]: json.loads(line)["text"]
             for line in (study["corpus"] / "a.jsonl").read_text().splitlines()[:-1]}
    texts.update({r["id"]: r["text"] for r in pq.read_table(study["corpus"] / "b.parquet").to_pylist()})
    assert windows and all(w["text"] == texts[w["doc_id"]][w["char_start"]:w["char_end"]] for w in windows)


def test_an_index_that_cannot_answer_is_refused_in_one_line(runs, study, tmp_path):
    from jobs.cli import app

    run_index(IndexConfig(corpus=str(study["corpus"]), out=str(tmp_path / "plain"), progress=False))
    base = ["overlap", "--benchmark", str(study["root"] / "bench.jsonl"), "--benchmark-field", "question",
            "--semantic", "--n", "0", "--out", str(tmp_path / "o"), "--embedder", study["model"]]
    res = CliRunner().invoke(app, [*base, "--index", str(tmp_path / "plain")])
    assert res.exit_code == 2 and "no window embeddings" in res.output and "--embeddings" in res.output
    idx = str(study["root"] / "idx")
    res = CliRunner().invoke(app, [*base[:-2], "--embedder", study["other"], "--index", idx])
    assert res.exit_code == 2 and "was embedded with" in res.output
    res = CliRunner().invoke(app, [*base, "--index", idx, "--window-words", str(WORDS + 1)])
    assert res.exit_code == 2 and f"windows of {WORDS} words" in res.output
    res = CliRunner().invoke(app, [*base, "--index", idx, "--prefilter", "0.5"])
    assert res.exit_code == 2 and "embedded already" in res.output
    assert not (tmp_path / "o").exists()
    res = CliRunner().invoke(app, ["index-corpus", "--corpus", str(study["corpus"]), "--out", str(tmp_path / "x"),
                                   "--embeddings", "--embedder", str(tmp_path / "no-model")])
    assert res.exit_code == 2 and "error:" in res.output and not (tmp_path / "x").exists()
