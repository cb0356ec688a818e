"""Which detectors a job can feed, decided before anything runs: GradNorm needs weights (refused over an API by
name, left out of `all` there), CoDeC needs dataset-inference's context pool (refused by evaluate), and `all`
never includes the opt-in detectors (Con-ReCall consumes labels, GradNorm a backward pass per text)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import typer

from jobs.commands.evaluate import resolve_methods
from jobs.kit.served_model import drop_full_distribution
from scoring.detectors import parse_methods

SERVED = SimpleNamespace(api=SimpleNamespace(source="api:echo:top5", top_logprobs=5))


def test_gradnorm_needs_the_weights():
    with pytest.raises(typer.BadParameter, match="gradnorm@p=inf needs the model's weights"):
        drop_full_distribution(parse_methods("loss,gradnorm"), "loss,gradnorm", SERVED)
    kept = drop_full_distribution(parse_methods("loss,gradnorm"), "all", SERVED)
    assert [m.name for m in kept] == ["loss"]
    assert [m.name for m in drop_full_distribution(parse_methods("loss,gradnorm"), "x", None)] == ["loss", "gradnorm"]


def test_codec_is_refused_by_evaluate_and_opt_in_detectors_are_not_in_all(capsys):
    with pytest.raises(typer.BadParameter, match="dataset-inference --method codec"):
        resolve_methods("loss,codec", None)
    names = {m.name for m in resolve_methods("all", None)}
    assert not names & {"gradnorm", "con_recall", "codec"}
    assert "run only when named: con_recall, gradnorm" in capsys.readouterr().err
    assert {m.name for m in resolve_methods("loss,con_recall@shots=3,gradnorm", None)} == {
        "loss", "con_recall", "gradnorm"}
