"""`tidemark cutoff` end to end on a controlled study (known truth): a tiny GPT-2 trained on two sources' dated
passages of the months up to 2020-10, scored on the plane (local runner, then Ray for the same bytes), the cutoff
recovered per source; bad rows quarantined with their reasons; the answers recomputed from rows.parquet alone; a
reference model's differential; refusals in one line."""
from __future__ import annotations

import json
import random

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from jobs.cli import app
from jobs.commands.cutoff import CutoffConfig, run_cutoff

TRUTH = "2020-10"
BAD = [{"id": "bad-date", "text": "a text", "date": "sometime in 2020", "source": "sotu"},
       {"id": "empty", "text": "", "date": "2020-05", "source": "sotu"},
       {"id": "early", "text": "a text from before the range", "date": "2018-01-01", "source": "pydoc"}]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from jobs.kit.dated_studies import build_study
    from jobs.kit.studies import train_tiny_gpt2
    from scoring.studies.contamination import torch_threads

    root = tmp_path_factory.mktemp("cutoff_study")
    res = build_study(root, months=20, cutoff=9, per_month=12, words=48, train_steps=600, repeats=4, background=150)
    with open(res["dated"], "a") as fh:
        fh.write("".join(json.dumps(b) + "\n" for b in BAD))
    # the reference reads none of the months: other passages of the same two sources
    dated = {r["text"] for r in res["rows"]}
    with torch_threads(1):
        ref = train_tiny_gpt2([t for t in _background() if t not in dated], root / "ref", steps=150, seed=1,
                              context=64, batch_size=8)
    return {**res, "ref": ref["path"], "root": root}


def _background():
    from scoring.studies.dated import source_passages

    return source_passages("sotu", 48)[-300:] + source_passages("pydoc", 48)[:300]


def run(study, out, **kw):
    cfg = CutoffConfig(texts=study["dated"], model=study["model"], out=str(out), methods="min_k_pp,loss",
                       months="2020-01..2021-08", permutations=1999, bootstrap=300, progress=False,
                       **{"runner": "local", **kw})
    return run_cutoff(cfg), json.loads((out / "report.json").read_text())


def within_one_month(a: str, b: str) -> bool:
    from scoring.cutoff.periods import month_of

    return abs(month_of(a) - month_of(b)) <= 1


def test_recovers_each_sources_cutoff_and_accounts_for_every_row(study, tmp_path):
    out = tmp_path / "local"
    res, report = run(study, out)
    assert study["truth"]["cutoff"] == TRUTH
    assert [s["source"] for s in report["sources"]] == ["pydoc", "sotu"]
    for s in report["sources"]:  # Min-K%++ (the first detector named): the month, its CI and p
        assert s["detector"] == "min_k_pp@k=0.2"
        assert within_one_month(s["cutoff"], TRUTH), s
        assert s["cutoff_ci"][0] <= TRUTH <= s["cutoff_ci"][1]
        assert s["p_no_cutoff"] < 0.01 and s["estimator"] == "new_documents"
        assert len(s["per_period"]) == 20 and {p["n"] for p in s["per_period"]} == {12}
        # the loss (a weaker detector on these tiny models: pydoc's passages vary most) finds the same best month
        assert set(s["detectors"]) == {"loss"} and within_one_month(s["detectors"]["loss"]["best_break"], TRUTH)
    assert res["cutoff"] == report["cutoff"] == report["sources"][0]["cutoff"]
    counts = report["counts"]
    assert counts == {"in": 483, "scored": 480, "quarantined": 3,
                      "reasons": {"bad_date": 1, "empty_input": 1, "outside_months": 1}}
    rows = pq.read_table(out / "rows.parquet")
    assert rows.num_rows == 480 and rows.column_names[:5] == ["id", "date", "period", "source", "group"]
    q = {r["id"]: r["reason"] for r in pq.read_table(out / "quarantine.parquet").to_pylist()}
    assert q == {"bad-date": "bad_date", "empty": "empty_input", "early": "outside_months"}
    for name in ("report.md", "report.html", "curve.png", "run.json", "_SUCCESS"):
        assert (out / name).is_file(), name
    assert json.loads((out / "run.json").read_text())["runner"]["used"] == "local"
    html = (out / "report.html").read_text()
    assert TRUTH in html or report["sources"][0]["cutoff"] in html


def test_from_rows_recomputes_the_answers_without_the_model(study, tmp_path):
    out = tmp_path / "local"
    _, first = run(study, out)
    again = tmp_path / "again"
    cfg = CutoffConfig(from_rows=str(out), out=str(again), permutations=1999, bootstrap=300, progress=False)
    run_cutoff(cfg)
    second = json.loads((again / "report.json").read_text())
    for key in ("cutoff", "cutoff_ci", "p_no_cutoff", "per_period", "sources"):
        assert second[key] == first[key], key
    # the same rows with their months shuffled: a null set (no tie between date and training): no cutoff
    rows = pq.read_table(out / "rows.parquet").to_pylist()
    periods = [r["period"] for r in rows]
    random.Random(0).shuffle(periods)
    shuffled = tmp_path / "shuffled.parquet"
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist([dict(r, period=p) for r, p in zip(rows, periods)]), shuffled)
    cfg = CutoffConfig(from_rows=str(shuffled), out=str(tmp_path / "null"), permutations=999, bootstrap=100,
                       progress=False)
    assert run_cutoff(cfg)["cutoff"] is None


def test_reference_model_gives_the_differential(study, tmp_path):
    out = tmp_path / "ref"
    _, report = run(study, out, ref_model=study["ref"])
    rows = pq.read_table(out / "rows.parquet")
    assert {"ref:loss", "ref:min_k_pp@k=0.2"} <= set(rows.column_names)
    for s in report["sources"]:
        assert s["differential"] and s["cutoff_ci"][0] <= TRUTH <= s["cutoff_ci"][1]
        assert s["detectors"]["loss"]["differential"]
    d = np.asarray(rows.column("loss")) - np.asarray(rows.column("ref:loss"))
    sotu = [p for p in report["sources"] if p["source"] == "sotu"][0]["detectors"]["loss"]
    first = [x for r, x in zip(rows.to_pylist(), d) if r["source"] == "sotu" and r["period"] == "2020-01"]
    assert sotu["per_period"][0]["score"] == pytest.approx(np.mean(first))


@pytest.mark.ray
def test_ray_runner_writes_the_same_rows(study, tmp_path, ray_session):
    run(study, tmp_path / "local")
    _, report = run(study, tmp_path / "ray", runner="ray")
    assert json.loads((tmp_path / "ray" / "run.json").read_text())["runner"]["used"] == "ray"
    a, b = pq.read_table(tmp_path / "local" / "rows.parquet"), pq.read_table(tmp_path / "ray" / "rows.parquet")
    assert a.equals(b)


def test_cli_help_and_refusals(study, tmp_path):
    runner = CliRunner()
    assert runner.invoke(app, ["cutoff", "--help"]).exit_code == 0
    for args, why in (
        (["--texts", study["dated"], "--out", str(tmp_path / "x")], "--model"),
        (["--texts", study["dated"], "--config", "x.yaml", "--model", study["model"], "--out", str(tmp_path / "x")],
         "exactly one"),
        (["--texts", study["dated"], "--model", study["model"], "--methods", "recall", "--out", str(tmp_path / "x")],
         "non-members"),
        (["--texts", study["dated"], "--model", study["model"], "--months", "2020-13..2021-01",
          "--out", str(tmp_path / "x")], "not 1..12"),
    ):
        res = runner.invoke(app, ["cutoff", *args])
        assert res.exit_code == 2, (args, res.output)
        assert why in res.output, res.output
