"""`tidemark contamination-study --quick` on CPU: contaminants inserted 1, 2 and 4 times into a background corpus,
one epoch of continued training each. Detection must get easier with repeats (Shi et al.), measured, not assumed:
the numbers come from the run and the test fails if Min-K% does not rise."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from jobs.cli import app

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.heavy]


def test_min_k_auc_rises_with_repeats(tmp_path, ray_session):
    result = CliRunner().invoke(app, ["contamination-study", "--out", str(tmp_path), "--quick", "--repeats", "1,2,4",
                                      "--base-steps", "80"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "| min_k@k=0.2 | 0.001 |" in result.output  # the table is printed
    res = json.loads((tmp_path / "results.json").read_text())
    trend = {(t["method"], t["lr"]): t for t in res["trend"]}
    mk = trend[("min_k@k=0.2", 0.001)]["auc_by_repeats"]
    assert mk["1"] <= mk["2"] + 0.02 and mk["2"] <= mk["4"] + 0.02, mk  # rising, up to bootstrap-level noise
    assert mk["4"] - mk["1"] >= 0.1, mk
    assert mk["4"] > 0.8 and abs(mk["0"] - 0.5) < 0.15, mk  # the base model never saw them: near chance
    assert res["corpus"]["contaminants"] == res["corpus"]["negatives"] == 60
    assert {r["repeats"] for r in res["results"]} == {0, 1, 2, 4}
    assert (tmp_path / "auc_vs_repeats.png").stat().st_size > 10_000
    assert "rise" in (tmp_path / "report.md").read_text()


def test_bad_arguments_fail_clearly(tmp_path):
    result = CliRunner().invoke(app, ["contamination-study", "--out", str(tmp_path), "--repeats", "one,two"])
    assert result.exit_code != 0 and "comma-separated integers" in result.output
    result = CliRunner().invoke(app, ["contamination-study", "--out", str(tmp_path), "--quick",
                                      "--n-contaminants", "100000"])
    assert result.exit_code == 2 and "distinct texts" in result.output


def test_the_study_scores_through_the_api(tmp_path, ray_session):
    """--via-api echo: each cell's model is served on 127.0.0.1 and scored as a served model; Min-K%++ becomes
    its labelled top-n approximation, and detection still rises with repeats."""
    result = CliRunner().invoke(app, ["contamination-study", "--out", str(tmp_path), "--quick", "--repeats", "4",
                                      "--base-steps", "80", "--via-api", "echo"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["config"]["scored_via"] == "api:echo"
    trend = {(t["method"], t["lr"]): t["auc_by_repeats"] for t in res["trend"]}
    assert ("min_k_pp@k=0.2,topk=5", 0.001) in trend
    mk = trend[("min_k@k=0.2", 0.001)]
    assert mk["4"] > 0.8 and abs(mk["0"] - 0.5) < 0.15, mk
    assert "through each model's OpenAI-compatible API (api:echo" in (tmp_path / "report.md").read_text()
