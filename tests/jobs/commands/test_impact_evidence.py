"""`tidemark impact` with a detector's evidence: a real `tidemark evaluate` (label 1: the task's items; label 0:
texts the model never saw) and a real `tidemark audit` in benchmark mode, each thresholded at the false-positive
rate on what the model cannot have seen, joined to a real lm-evaluation-harness run by text."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from jobs.commands.impact import ImpactConfig, run_impact

RUN = Path(__file__).resolve().parents[2] / "fixtures" / "lm_eval" / "run"
TASKS = RUN.parent / "tasks"


@pytest.fixture(scope="module")
def study(tmp_path_factory, ray_session):
    """A tiny GPT-2 trained on documents 0-9 of the task (repeated), a benchmark of all 20 (label 1) and 20 other
    sentences (label 0), evaluate and audit on them."""
    from jobs.commands.audit import AuditConfig, run_audit
    from jobs.commands.evaluate import EvaluateConfig, run_evaluate
    from jobs.kit.studies import train_tiny_gpt2
    from scoring.studies.known_membership import sotu_passages

    root = tmp_path_factory.mktemp("impact_evidence")
    docs = [json.loads(x)["question"] for x in (TASKS / "arith_gen.jsonl").read_text().splitlines()]
    other = [p["text"] for p in sotu_passages(16, 40, seed=5)]
    train_tiny_gpt2(docs[:10] * 20 + other[20:], root / "model", steps=120, seed=0, context=64, batch_size=8)
    bench = root / "bench.jsonl"
    bench.write_text("".join(json.dumps({"id": f"q{k}", "input": d, "label": 1}) + "\n" for k, d in enumerate(docs))
                     + "".join(json.dumps({"id": f"o{k}", "input": t, "label": 0}) + "\n"
                               for k, t in enumerate(other[:20])))
    run_evaluate(EvaluateConfig(benchmark=str(bench), model=str(root / "model"), out=str(root / "evaluate"),
                                methods="loss,min_k", runner="local", progress=False, n_bootstrap=100))
    target = root / "target.jsonl"
    target.write_text("".join(json.dumps({"id": f"q{k}", "text": d}) + "\n" for k, d in enumerate(docs)))
    calib = root / "calibration.jsonl"
    calib.write_text("".join(json.dumps({"id": f"c{k}", "text": t, "label": k % 2}) + "\n"
                             for k, t in enumerate(other[20:])))
    run_audit(AuditConfig(target=str(target), calibration=str(calib), model=str(root / "model"),
                          out=str(root / "audit"), detector="loss", progress=False, n_bootstrap=100))
    return root


def test_evaluate_evidence_is_thresholded_on_the_unseen_rows(study, tmp_path):
    from jobs.plane.part_store import read_parts
    from curation.io.outputs import Location
    from scoring.impact.splits import flag_at_fpr

    out = tmp_path / "out"
    run_impact(ImpactConfig(results=[str(RUN / "__tmp__lmeval-model")], evidence=[str(study / "evaluate")],
                            detector="min_k@k=0.2", detector_fpr=0.1, out=str(out), runner="local", progress=False,
                            bootstrap=200))
    report = json.loads((out / "report.json").read_text())
    ev, = report["evidence"]
    assert ev["job"] == "evaluate" and ev["detector"] == "min_k@k=0.2" and ev["reference_rows"] == 20
    scores = read_parts(Location(study / "evaluate"), "scores.parquet").to_pylist()
    ref = np.array([r["min_k@k=0.2"] for r in scores if r["label"] == 0])
    flags, threshold = flag_at_fpr(np.array([r["min_k@k=0.2"] for r in scores if r["label"] == 1]), ref, 0.1)
    assert ev["threshold"] == pytest.approx(threshold) and (ref >= threshold).mean() <= 0.1
    gen = next(r for r in report["tasks"] if r["task"] == "tidemark_arith_gen")
    assert gen["n_leaked"] == int(flags.sum()) and gen["n_unmatched"] == 0
    m = report["matching"]["tidemark_arith_gen"][0]
    assert m["join"] == "text" and m["matched"] == 20  # q0.. against the harness's doc ids 0..
    items = pq.read_table(out / "items.parquet").to_pylist()
    got = {r["item"]: r["min_k@k=0.2:input:leaked"] for r in items if r["task"] == "tidemark_arith_gen"}
    want = {str(k): bool(f) for k, f in enumerate(flags)}
    assert got == want


def test_audit_evidence(study, tmp_path):
    out = tmp_path / "out"
    run_impact(ImpactConfig(results=[str(RUN / "__tmp__lmeval-model")], evidence=[f"input={study / 'audit'}"],
                            out=str(out), runner="local", progress=False, bootstrap=200))
    report = json.loads((out / "report.json").read_text())
    ev, = report["evidence"]
    assert ev["job"] == "audit" and ev["detector"] == "loss" and ev["role"] == "input"
    assert ev["reference_rows"] == 10  # the calibration's non-members
    gen = next(r for r in report["tasks"] if r["task"] == "tidemark_arith_gen")
    assert gen["n_leaked"] + gen["n_clean"] == 20
