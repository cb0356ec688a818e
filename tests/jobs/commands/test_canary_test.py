"""`tidemark canary test` end to end on local Ray: a tiny GPT-2 trained here with one set's planted canaries
repeated must rank them above the held-out ones (p < 0.01, per set and combined), a model that never saw them must
not (p > 0.05), and a set that cannot be tested is refused before anything is scored."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curation.canary import load_canaries
from jobs.cli import app
from report_pages import assert_self_contained
from scoring.stats.rank_test import planted_vs_holdout


def make(root: Path, name: str, seed: int, n: int = 40, words: int = 16) -> str:
    res = CliRunner().invoke(app, ["canary", "make", "--n", str(n), "--seed", str(seed), "--words", str(words),
                                   "--out", str(root / name)])
    assert res.exit_code == 0, res.output
    return str(root / name)


STEPS = 80


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from jobs.kit.studies import train_tiny_gpt2
    from scoring.studies.known_membership import sotu_passages

    root = tmp_path_factory.mktemp("canary")
    sets = {"a": make(root, "a", 1), "b": make(root, "b", 2, words=24)}
    background = [p["text"] for p in sotu_passages(64, 80, seed=0)]
    planted = [r["text"] for d in sets.values() for r in load_canaries(Path(d))[0] if r["role"] == "plant"]
    texts = background + planted * 12
    random.Random(0).shuffle(texts)
    train_tiny_gpt2(texts, root / "seen", tokenizer_texts=background + planted, steps=STEPS, context=128)
    train_tiny_gpt2(background, root / "unseen", steps=STEPS, context=128)
    return {"root": root, "sets": sets, "seen": str(root / "seen"), "unseen": str(root / "unseen")}


def run(setup, model: str, out: Path, *extra: str):
    args = ["canary", "test", "--canaries", setup["sets"]["a"], "--canaries", setup["sets"]["b"], "--model",
            setup.get(model, model), "--out", str(out), "--quiet", *extra]
    res = CliRunner().invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads((out / "report.json").read_text())


@pytest.mark.ray
def test_planted_canaries_are_detected_in_a_model_trained_on_them(setup, ray_session, tmp_path):
    rep = run(setup, "seen", tmp_path)
    assert rep["p_value"] < 0.01 and rep["combination"]["method"] == "fisher", rep["conclusion"]
    assert all(s["p_value"] < 0.01 and s["auc"] > 0.8 for s in rep["sets"].values()), rep["sets"]
    assert rep["counts"] == {"in": 80, "scored": 80, "quarantined": 0, "reasons": {}}
    assert rep["detector"] == "loss" and rep["model_identity"]["files"]
    scores = pq.read_table(tmp_path / "scores.parquet").to_pylist()
    assert len(scores) == 80 and set(scores[0]) == {"set", "id", "role", "score"}
    for name, d in setup["sets"].items():  # the report's p-values are the test over scores.parquet's rows
        roles = {r["id"]: r["role"] for r in load_canaries(Path(d))[0]}
        mine = [r for r in scores if r["set"] == name]
        assert {r["id"]: r["role"] for r in mine} == roles
        res = planted_vs_holdout([r["score"] for r in mine if r["role"] == "plant"],
                                 [r["score"] for r in mine if r["role"] == "holdout"])
        assert rep["sets"][name]["p_value"] == pytest.approx(res["p_value"])
        assert rep["sets"][name]["canaries_sha256"] == load_canaries(Path(d))[1]["canaries_sha256"]
    assert (tmp_path / "_SUCCESS").exists() and (tmp_path / "scores.png").stat().st_size > 5_000
    assert_self_contained(tmp_path, "The model ranks the planted canaries of 2 sets", "What the p-value means",
                          "Commitments checked")


@pytest.mark.ray
@pytest.mark.heavy  # the null side of the study (make test-slow); the bench measures it over 10,000 coins
def test_a_model_that_never_saw_them_gives_no_evidence(setup, ray_session, tmp_path):
    rep = run(setup, "unseen", tmp_path, "--detector", "min_k@k=0.2")
    assert rep["p_value"] > 0.05 and "no evidence" in rep["conclusion"], rep["sets"]
    assert rep["detector"] == "min_k@k=0.2"


@pytest.mark.parametrize("case, match", [
    ("edited", "edited after it was made"),
    ("twice", "is the same canary set"),
    ("all", "name one detector"),
    ("recall", "held-out canaries, which are the test's control"),
    ("model", "no-model': no such file or directory"),
])
def test_a_set_or_detector_that_cannot_be_tested_is_refused_before_scoring(tmp_path, case, match):
    a = make(tmp_path, "a", 1, n=6)
    args = ["canary", "test", "--canaries", a, "--model", str(tmp_path / "no-model"), "--out", str(tmp_path / "o")]
    if case == "edited":
        path = Path(a) / "canaries.jsonl"
        path.write_text(path.read_text().replace('"holdout"', '"plant"', 1))
    elif case == "model":
        pass  # the set is fine; --model names a directory that does not exist
    elif case == "twice":
        args += ["--canaries", str(Path(a) / ".." / "a")]
    else:
        args += ["--detector", case]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and match in " ".join(res.output.split()), res.output
    assert not (tmp_path / "o").exists()  # nothing scored, nothing written


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.heavy  # ~1-3 minutes over HTTP on 2 cores: `make test-slow`, beside evaluate's served tests
def test_a_served_model_gives_the_local_scores_and_is_recorded(setup, ray_session, tmp_path):
    from scoring.api.loopback import LoopbackServer

    local = run(setup, "seen", tmp_path / "local")
    with LoopbackServer(setup["seen"], name="tiny") as server:
        served = run(setup, "tiny", tmp_path / "served", "--api-base", server.url, "--tokenizer", setup["seen"])
    want = pq.read_table(tmp_path / "local" / "scores.parquet").to_pylist()
    got = pq.read_table(tmp_path / "served" / "scores.parquet").to_pylist()
    assert [r["id"] for r in got] == [r["id"] for r in want]
    assert [r["score"] for r in got] == pytest.approx([r["score"] for r in want], abs=1e-4)
    assert served["p_value"] == pytest.approx(local["p_value"], rel=1e-3)
    assert served["served_model"]["api_base"] == server.url and served["model_identity"]["served_model"] == "tiny"
