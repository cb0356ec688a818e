"""`tidemark demo` end to end on a small setting (the full default is what `make demo` runs). Checks the steps it
announces, the report it prints, and that `--no-study` really skips the contamination study."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from jobs.cli import app

pytestmark = [pytest.mark.slow]


def test_demo_without_study_trains_evaluates_and_skips_step_three(tmp_path, ray_session):
    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path), "--n-per-label", "12", "--train-seconds", "2",
                                      "--methods", "loss,min_k", "--no-study"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "[1/2]" in result.output and "[2/2]" in result.output and "[3/" not in result.output
    assert "| min_k@k=0.2 |" in result.output
    assert not (tmp_path / "contamination_study").exists()
    study = json.loads((tmp_path / "study.json").read_text())
    assert study["train"]["steps"] > 0
    metrics = json.loads((tmp_path / "evaluate" / "metrics.json").read_text())
    assert {m["method"] for m in metrics} == {"loss", "min_k"}
    assert metrics[0]["rows_in"] == metrics[0]["rows_scored"] + metrics[0]["rows_quarantined"]
