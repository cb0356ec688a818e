"""`tidemark dataset-inference` end to end on local Ray, on a tiny GPT-2 trained here on known members: a suspect
set the model trained on must give p < 0.01, and two unseen sets from the same pool must give p > 0.05 in at
least 90% of 40 seeded learn/test splits (the test's calibration, not one lucky split)."""
from __future__ import annotations

import json

import numpy as np
import pyarrow.compute as pc
import pytest
from typer.testing import CliRunner

from jobs.cli import app
from jobs.plane.part_store import read_parts
from curation.io.outputs import Location
from report_pages import assert_self_contained
from scoring.audits.dataset_inference import dataset_inference

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    from jobs.kit.studies import build_known_membership

    root = tmp_path_factory.mktemp("di")
    info = build_known_membership(root, n_per_label=90, buckets=(64,), repeats=3, steps=250, seed=0)
    rows = [json.loads(line) for line in open(info["benchmark"])]
    members = [r for r in rows if r["label"] == 1]
    unseen = [r for r in rows if r["label"] == 0]
    paths = {}
    for name, group in (("members", members), ("unseen_a", unseen[:45]), ("unseen_b", unseen[45:]),
                        ("unseen", unseen)):
        paths[name] = root / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps({"id": r["id"], "text": r["input"]}) + "\n" for r in group))
    # a row the reader must quarantine, not lose
    with open(paths["members"], "a") as fh:
        fh.write('{"id": "short", "text": "too short"}\n')
    return {"model": info["model"], **{k: str(v) for k, v in paths.items()}}


def run(sets, suspect, validation, out):
    result = CliRunner().invoke(app, ["dataset-inference", "--suspect", sets[suspect], "--validation",
                                      sets[validation], "--model", sets["model"], "--out", str(out), "--quiet"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads((out / "report.json").read_text())


def test_a_trained_on_suspect_set_is_detected(sets, ray_session, tmp_path):
    rep = run(sets, "members", "unseen", tmp_path)
    assert rep["p_value"] < 0.01 and rep["t"] > 0, rep["p_value"]
    assert "significant at 1%" in rep["conclusion"] and "not the probability" in rep["meaning"]
    assert rep["inputs"]["suspect_passages"] == 90 and rep["inputs"]["documents_quarantined"]["suspect"] == 1
    assert rep["inputs"]["validation_passages"] == 90 and rep["inputs"]["recall_prefix_passages"] == 3
    sz = rep["sizes"]
    assert sz["suspect_learn"] + sz["suspect_test"] == 90 and sz["validation_learn"] + sz["validation_test"] == 87
    assert set(rep["weights"]) >= {"loss", "min_k@k=0.2", "zlib", "min_k_pp@k=0.2"}
    assert (tmp_path / "test_scores.png").stat().st_size > 5_000 and (tmp_path / "_SUCCESS").exists()
    assert "What the p-value means" in (tmp_path / "report.md").read_text()
    doc = assert_self_contained(tmp_path, "The model scores the suspect set as training data (significant at 1%): p = ",
                                "What the p-value means")
    assert all(f"<code>{name}</code>" in doc for name in rep["weights"])  # every detector's weight


def test_two_unseen_sets_hold_the_false_positive_rate(sets, ray_session, tmp_path):
    rep = run(sets, "unseen_a", "unseen_b", tmp_path)
    scores = read_parts(Location(str(tmp_path / "scoring")), "scores.parquet", None)
    scores = scores.filter(scores.column("in_eval"))
    scores = scores.take(pc.sort_indices(scores, [("id", "ascending")]))
    names = rep["features_used"] + [n for n in rep["weights"] if n not in rep["features_used"]]
    x = np.column_stack([scores.column(n).to_numpy(zero_copy_only=False).astype(float) for n in names])
    label = scores.column("label").to_numpy()
    ps = [dataset_inference(x[label == 1], x[label == 0], names, seed=s)["p_value"] for s in range(40)]
    assert ps[0] == pytest.approx(rep["p_value"])  # the job's own split is seed 0
    assert np.mean(np.array(ps) > 0.05) >= 0.9, sorted(ps)[:6]
