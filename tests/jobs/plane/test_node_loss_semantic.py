"""`tidemark overlap --semantic` on a genuine two-node Ray cluster loses the worker node mid-job (the same harness
as test_node_loss.py: ray.cluster_utils.Cluster, a head and a worker of 1 CPU each, two embedder actors, so one of
them is on the worker node when it is removed).

The job must either finish on the head or exit with one `error:` line and finish when the same command is run
again; either way semantic.parquet equals an uninterrupted run's on the test session's local Ray, every corpus part
is committed once, and the corpus counts reconcile (records = documents + quarantined).
"""
from __future__ import annotations

import json
import random

import pyarrow.parquet as pq
import pytest

from bench.cluster_harness import parts_done
from node_loss_runs import run_losing_a_worker
from sentence_models import build_sentence_model

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.heavy]

NAMES = "Adaeze Bartholomew Cosima Dmitri Evangeline Fitzgerald Gwendolyn Horatio Isolde Jebediah".split()
FILLER = ("the farmer walked to the market with a basket of apples and came back home before the rain started "
          "while his dog slept under the old tree").split()
FILES = 10  # one corpus part each


def problem(name: str, a: int, b: int) -> str:
    return (f"At the county fair, {name} bought {a} pencils and later gave {b} of them to the children of the "
            f"village. How many pencils did {name} keep for the school?")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """8 items, 2 planted whole in the corpus; 10 corpus files of filler long enough that a part takes a moment."""
    rng = random.Random(11)
    root = tmp_path_factory.mktemp("nl-semantic")
    nums = iter(rng.sample(range(100, 1000), 40))
    items = [{"id": f"q{i}", "question": problem(NAMES[i], next(nums), next(nums))} for i in range(8)]
    null = [{"id": f"n{i}", "question": problem(NAMES[8 + i % 2], next(nums), next(nums))} for i in range(6)]
    corpus = root / "corpus"
    corpus.mkdir()
    for f in range(FILES):
        docs = [{"id": f"doc-{f}-{j}", "text": " ".join(rng.choice(FILLER) for _ in range(400))} for j in range(40)]
        if f in (2, 7):
            docs.insert(5, {"id": f"plant-{f}", "text": items[f]["question"]})
        (corpus / f"part-{f:02d}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    (root / "null.jsonl").write_text("".join(json.dumps(r) + "\n" for r in null))
    model = build_sentence_model(root / "model", [r["question"] for r in items + null] + [" ".join(FILLER)])
    return {"root": root, "model": str(model), "corpus": str(corpus)}


def argv(study, out) -> list[str]:
    return ["overlap", "--benchmark", str(study["root"] / "bench.jsonl"), "--benchmark-field", "question",
            "--corpus", study["corpus"], "--semantic", "--n", "0", "--embedder", study["model"],
            "--null", str(study["root"] / "null.jsonl"), "--actors", "2", "--out", str(out), "--quiet"]


def test_overlap_semantic_survives_losing_a_worker_node(study, ray_session, tmp_path):
    from jobs.commands.overlap import OverlapConfig, run_overlap

    clean = tmp_path / "clean"
    run_overlap(OverlapConfig(benchmark=str(study["root"] / "bench.jsonl"), benchmark_field="question",
                              corpus=study["corpus"], semantic=True, n=0, embedder=study["model"],
                              null=str(study["root"] / "null.jsonl"), actors=2, out=str(clean), progress=False))
    assert parts_done(clean / "semantic") == FILES

    out = tmp_path / "out"
    runs = run_losing_a_worker(argv(study, out), out, tmp_path, lambda: parts_done(out / "semantic"), FILES)
    assert pq.read_table(out / "semantic.parquet").equals(pq.read_table(clean / "semantic.parquet"))
    s = json.loads((out / "report.json").read_text())["semantic"]
    c = s["counts"]
    assert s["flagged"] == 2 and parts_done(out / "semantic") == FILES
    assert c["corpus_records"] == c["corpus_documents"] + c["corpus_quarantined"] == FILES * 40 + 2
    print(json.dumps({"runs": [{"rc": r.rc, "seconds": r.seconds, "fault_at_s": r.fault_at_s} for r in runs],
                      "parts": s["parts"]}))
