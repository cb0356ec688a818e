"""`build-benchmark --cutoff-from`: the two cutoff dates from a `tidemark cutoff` report.json (written by hand
here): the overrides and the manifest record (a pure function), the refusals, and one build of the coffee dump
with `--runner local` whose manifest records the measurement."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curation.config import load_config
from jobs.cli import app
from jobs.commands import build_benchmark
from jobs.commands.build_benchmark import (CutoffFromError, check_cutoff_conflicts, cutoff_overrides,
                                           read_cutoff_report, recipe_value)

ROOT = Path(__file__).resolve().parents[3]
STACKMIA = ROOT / "jobs" / "configs" / "stackmia.yaml"


def answer(source: str, cutoff: str | None, ci: list[str] | None, p: float = 0.001) -> dict:
    """One source's answer, with the keys report.json gives every answer."""
    return {"source": source, "detector": "loss", "differential": False, "estimator": "new_documents",
            "cutoff": cutoff, "cutoff_ci": ci, "p_no_cutoff": p,
            "per_period": [{"period": "2018-01", "n": 15, "score": -2.5}], "detectors": {}}


def report(*answers: dict) -> dict:
    """report.json: the first source's answer at the top level, every source's under `sources`."""
    return {**answers[0], "sources": list(answers), "settings": {"estimator": "auto"}}


TWO = report(answer("arxiv", "2017-11", ["2017-11", "2017-11"]),
             answer("stackexchange", "2018-03", ["2018-02", "2018-05"], p=0.002))


def invoke(*args: str):
    return CliRunner().invoke(app, ["build-benchmark", "--config", str(STACKMIA), *args])


def said(result) -> str:
    """The command's output on one line (typer may draw its error in a wrapped box)."""
    return " ".join(result.output.replace("│", " ").replace("╭", " ").replace("╰", " ").split())


# ---------------------------------------------------------------- the overrides and the record

def test_the_worked_example_gives_the_dates_and_the_record():
    overrides, record = cutoff_overrides(TWO, "stackexchange", report_path="runs/m/report.json")
    # CI [2018-02, 2018-05], gap 2: members before 2018-03 less 2 months, non-members from 2018-06 plus 2 months
    assert overrides == ["cutoffs.member_before=2018-01-01", "cutoffs.nonmember_after=2018-08-01"]
    assert record == {"report": "runs/m/report.json", "source": "stackexchange", "chosen_by": "source.kind",
                      "detector": "loss", "differential": False, "estimator": "new_documents", "cutoff": "2018-03",
                      "cutoff_ci": ["2018-02", "2018-05"], "p_no_cutoff": 0.002, "gap_months": 2,
                      "member_before": "2018-01-01", "nonmember_after": "2018-08-01",
                      "rule": build_benchmark.WINDOW_RULE}
    overrides, record = cutoff_overrides(TWO, "stackexchange", gap_months=0)
    assert overrides == ["cutoffs.member_before=2018-03-01", "cutoffs.nonmember_after=2018-06-01"]
    assert record["gap_months"] == 0


def test_which_source_answers():
    assert cutoff_overrides(TWO, "stackexchange", "arxiv")[1]["source"] == "arxiv"  # named: whatever the kind
    assert cutoff_overrides(TWO, "arxiv")[1]["source"] == "arxiv"
    sites = report(answer("stackexchange:coffee", "2018-03", ["2018-03", "2018-03"]),
                   answer("wikipedia-versions", "2019-06", ["2019-05", "2019-07"]))
    assert cutoff_overrides(sites, "stackexchange")[1]["source"] == "stackexchange:coffee"  # a name starting so
    _, record = cutoff_overrides(sites, "wikipedia_dump")  # a dump recipe reads Wikipedia as well
    assert record["source"] == "wikipedia-versions" and record["member_before"] == "2019-04-01"
    only = report(answer("all", "2016-04", ["2016-03", "2016-05"]))  # texts without a source: the only answer
    overrides, record = cutoff_overrides(only, "stackexchange")
    assert record["chosen_by"] == "the report's only source"
    assert overrides == ["cutoffs.member_before=2016-02-01", "cutoffs.nonmember_after=2016-08-01"]
    no_sources_key = {k: v for k, v in only.items() if k != "sources"}
    assert cutoff_overrides(no_sources_key, "arxiv")[0] == overrides


@pytest.mark.parametrize("rep, kind, name, message", [
    (TWO, "wikipedia", None, "answers for several sources ('arxiv', 'stackexchange') and none matches source.kind "
                             "'wikipedia'; choose one with --cutoff-source NAME"),
    (report(answer("stackexchange:coffee", "2018-03", ["2018-03", "2018-03"]),
            answer("stackexchange:beer", "2018-04", ["2018-04", "2018-04"])), "stackexchange", None, "2 match"),
    (TWO, "stackexchange", "github", "has no source 'github'; its sources: 'arxiv', 'stackexchange'"),
    (report(answer("stackexchange", None, None, p=0.41)), "stackexchange", None,
     "the measurement found no cutoff in its range for source 'stackexchange' (p_no_cutoff=0.41), so it cannot "
     "set the dates; choose them another way"),
    (report(answer("stackexchange", "2018-03", None)), "stackexchange", None, "no cutoff_ci"),
    (TWO, "corpus", None, "a measured cutoff does not apply"),
])
def test_refusals(rep, kind, name, message):
    with pytest.raises(CutoffFromError) as err:
        cutoff_overrides(rep, kind, name)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_recipes_nonmember_before_is_kept_unless_the_window_passes_it():
    assert cutoff_overrides(TWO, "stackexchange", nonmember_before="2018-09-01")[0][1] == \
        "cutoffs.nonmember_after=2018-08-01"  # left as it is: the build keeps it
    for end in ("2018-08-01", "2018-06-01"):
        with pytest.raises(CutoffFromError, match=r"nonmember_after at 2018-08-01, not before the recipe's "
                                                  rf"cutoffs.nonmember_before {end}.*nonmember_before=null"):
            cutoff_overrides(TWO, "stackexchange", nonmember_before=end)


def test_conflicting_options_are_refused():
    check_cutoff_conflicts(["source.path=/data", "cutoffs.nonmember_before=2020-01-01"], None)
    for sets in (["cutoffs.member_before=2015-01-01"], [" cutoffs.nonmember_after =2015-01-01"],
                 ["cutoffs={member_before: 2015-01-01}"]):
        with pytest.raises(CutoffFromError, match="--cutoff-from sets cutoffs.member_before and "
                                                  "cutoffs.nonmember_after; drop --set"):
            check_cutoff_conflicts(sets, None)
    with pytest.raises(CutoffFromError, match="--nonmember-month 2026-10"):
        check_cutoff_conflicts([], "2026-10")


def test_the_report_is_read_from_a_directory_or_the_file(tmp_path: Path):
    (tmp_path / "report.json").write_text(json.dumps(TWO))
    assert read_cutoff_report(str(tmp_path)) == (TWO, str(tmp_path / "report.json"))
    assert read_cutoff_report(str(tmp_path / "report.json"))[1] == str(tmp_path / "report.json")
    with pytest.raises(CutoffFromError, match="not found"):
        read_cutoff_report(str(tmp_path / "missing"))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(CutoffFromError, match="not a cutoff report"):
        read_cutoff_report(str(tmp_path / "bad.json"))


def test_recipe_values_come_from_the_file_then_the_last_set():
    assert recipe_value(STACKMIA, [], "source.kind") == "stackexchange"
    assert recipe_value(STACKMIA, ["source.kind=arxiv"], "source.kind") == "arxiv"
    assert recipe_value(STACKMIA, [], "cutoffs.nonmember_before") is None
    assert recipe_value(STACKMIA, ["cutoffs.nonmember_before=2024-01-01"], "cutoffs.nonmember_before").isoformat() \
        == "2024-01-01"


# ---------------------------------------------------------------- the command

def test_the_command_refuses_before_building(tmp_path: Path):
    (tmp_path / "none.json").write_text(json.dumps(report(answer("stackexchange", None, None, p=0.3))))
    (tmp_path / "two.json").write_text(json.dumps(TWO))
    out = str(tmp_path / "release")
    cases = [
        (["--cutoff-from", str(tmp_path / "none.json")], "found no cutoff in its range for source 'stackexchange' "
                                                          "(p_no_cutoff=0.3)"),
        (["--cutoff-from", str(tmp_path / "two.json"), "--set", "cutoffs.member_before=2015-01-01"],
         "drop --set cutoffs.member_before=2015-01-01 or --cutoff-from"),
        (["--cutoff-from", str(tmp_path / "two.json"), "--nonmember-month", "2026-10"], "--nonmember-month 2026-10"),
        (["--cutoff-from", str(tmp_path / "two.json"), "--set", "source.kind=wikipedia"], "none matches source.kind "
                                                                                          "'wikipedia'"),
        (["--cutoff-from", str(tmp_path / "two.json"), "--set", "cutoffs.nonmember_before=2018-07-01"],
         "not before the recipe's cutoffs.nonmember_before 2018-07-01"),
        (["--gap-months", "1"], "--cutoff-source and --gap-months go with --cutoff-from"),
    ]
    for args, message in cases:
        result = invoke(*args, "--out", out, "--runner", "local")
        assert result.exit_code == 2 and message in said(result), (args, result.output)
    assert not Path(out).exists()


def test_a_build_takes_its_dates_from_the_report_and_records_it(shared_data: Path, tmp_path: Path):
    """The coffee dump with the dates of a measured cutoff: CI [2015-01, 2015-02] with no gap gives the window the
    other build tests set by hand (members before 2015-02-01, non-members from 2015-03-01), so the cutoff step
    keeps the same questions."""
    coffee = shared_data / "stackexchange" / "coffee.stackexchange.com"
    measured = report(answer("arxiv", "2017-11", ["2017-11", "2017-11"]),
                      answer("stackexchange", "2015-02", ["2015-01", "2015-02"], p=0.004))
    (tmp_path / "cutoff").mkdir()
    (tmp_path / "cutoff" / "report.json").write_text(json.dumps(measured))
    out = tmp_path / "release"
    result = invoke("--set", f"source.path={coffee}", "--cutoff-from", str(tmp_path / "cutoff"), "--gap-months", "0",
                    "--out", str(out), "--runner", "local", "--quiet")
    assert result.exit_code == 0, result.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["overrides"] == [f"source.path={coffee}", "cutoffs.member_before=2015-02-01",
                              "cutoffs.nonmember_after=2015-03-01"]
    assert m["cutoffs"]["member_before"] == "2015-02-01" and m["cutoffs"]["nonmember_after"] == "2015-03-01"
    assert m["cutoffs"]["nonmember_before"] is None  # the recipe's
    assert m["cutoff_from"] == {
        "report": str(tmp_path / "cutoff" / "report.json"), "source": "stackexchange", "chosen_by": "source.kind",
        "detector": "loss", "differential": False, "estimator": "new_documents", "cutoff": "2015-02",
        "cutoff_ci": ["2015-01", "2015-02"], "p_no_cutoff": 0.004, "gap_months": 0, "member_before": "2015-02-01",
        "nonmember_after": "2015-03-01", "rule": build_benchmark.WINDOW_RULE}
    cutoff = next(s for s in m["counts"]["steps"] if s["step"] == "cutoff")
    assert cutoff["kept_by_label"] == {"member": 89, "nonmember": 16}
    # the same release as the dates set by hand, whose manifest has no cutoff_from
    plain = build_benchmark.build(load_config(STACKMIA, m["overrides"]), tmp_path / "plain", runner="local",
                                  progress=False)
    assert "cutoff_from" not in plain and plain["counts"] == m["counts"]
    for f in sorted((out / "data").iterdir()):
        assert f.read_bytes() == (tmp_path / "plain" / "data" / f.name).read_bytes(), f.name
