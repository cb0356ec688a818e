"""`tidemark build-benchmark` end to end on the real coffee dump: a StackMIA-style config on Ray Data, then the
same build without Ray (and from a .7z) for byte-identical data files."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from importlib.metadata import version
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from curation.config import load_config
from curation.sources.stackexchange import posts as se_posts
from curation.sources.stackexchange import source as se
from jobs.commands import build_benchmark

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[3]
STACKMIA = ROOT / "jobs" / "configs" / "stackmia.yaml"
WINDOW = ["cutoffs.member_before=2015-02-01", "cutoffs.nonmember_after=2015-03-01"]
HTML_TAG = re.compile(r"</?(p|a|li|ul|ol|em|strong|code|pre|img|br|blockquote|sup|sub|hr|div|span)\b[^>]*>", re.I)
COFFEE_MD5 = "f272b402827f0149e1fd96f205404864"


def cli_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:  # a group, so the command keeps its name as in `tidemark build-benchmark`
        pass

    build_benchmark.register(app)
    return app


@pytest.fixture(scope="module")
def coffee_dir(shared_data: Path) -> Path:
    return shared_data / "stackexchange" / "coffee.stackexchange.com"


@pytest.fixture(scope="module")
def release(ray_session, coffee_dir: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("releases") / "stackmia-coffee"
    args = ["build-benchmark", "--config", str(STACKMIA), "--set", f"source.path={coffee_dir}"]
    for item in WINDOW:
        args += ["--set", item]
    result = CliRunner().invoke(cli_app(), args + ["--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def manifest_of(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_manifest_counts_reconcile(release: Path):
    m = manifest_of(release)
    counts = m["counts"]
    steps = counts["steps"]
    for step in steps:  # in = kept + dropped, per step and per reason
        assert step["in"] == step["kept"] + sum(step["dropped"].values()), step
    for before, after in zip(steps[:-2], steps[1:-1]):
        assert before["kept"] == after["in"]
    assert steps[-2]["rows_out"] == steps[-1]["in"] and steps[-1]["kept"] == counts["rows_out"]

    excluded = pq.read_table(release / "excluded").to_pylist()
    assert Counter(e["reason"] for e in excluded) == Counter(counts["dropped_by_reason"])
    assert sum(counts["dropped_by_reason"].values()) == len(excluded) == counts["excluded"]
    per_step = Counter(e["stage"] for e in excluded)
    assert per_step == Counter({s["step"]: sum(s["dropped"].values()) for s in steps if s["dropped"]})

    data = pq.read_table(release / "data").to_pylist()
    assert len(data) == counts["rows_out"] == sum(n for cell in counts["by_label_bucket"].values()
                                                  for n in cell.values())
    assert len(set(r["id"] for r in data) | set(e["id"] for e in excluded)) == len(data) + len(excluded)
    # every question that came in is in the release or in the exclusions (documents before bucketing)
    document_ids = {r["id"].split("@")[0] for r in data} | {e["id"].split("@")[0] for e in excluded}
    assert len(document_ids) == counts["documents_in"] == 225


def test_question_counts_per_side_on_the_coffee_dump(release: Path, coffee_dir: Path):
    questions = [r for r in ET.parse(coffee_dir / "Posts.xml").getroot() if r.get("PostTypeId") == "1"]
    cutoff = next(s for s in manifest_of(release)["counts"]["steps"] if s["step"] == "cutoff")
    assert cutoff["in"] == len(questions) == 225
    # members: asked before 2015-02-01 with no answer or edit from then on; non-members: asked from 2015-03-01
    assert cutoff["kept_by_label"] == {"member": 89, "nonmember": 16}
    assert cutoff["dropped"] == {"between_cutoffs": 100, "member_active_after_cutoff": 20}


def test_rows_are_balanced_truncated_questions_without_html_or_answers(release: Path, coffee_dir: Path):
    m = manifest_of(release)
    assert m["counts"]["by_label_bucket"]["member"] == m["counts"]["by_label_bucket"]["nonmember"]
    texts = {d["id"]: d["text"] for d in se.iter_documents({"path": str(coffee_dir)})}
    answers = [se_posts.body_text(r.get("Body", ""))[0] for r in ET.parse(coffee_dir / "Posts.xml").getroot()
               if r.get("PostTypeId") == "2"]
    probes = [a[:60] for a in answers if len(a) >= 60]
    table = pq.read_table(release / "data")
    assert table.column_names == ["id", "input", "label", "bucket", "source", "created_at", "url"]
    for row in table.to_pylist():
        doc_id, bucket = row["id"].rsplit("@", 1)
        assert int(bucket) == row["bucket"] and len(row["input"].split()) == row["bucket"]
        assert texts[doc_id].startswith(row["input"])  # a prefix of the question body: nothing else
        assert not HTML_TAG.search(row["input"]) and "&lt;" not in row["input"]
        assert not any(p in row["input"] for p in probes)
        assert row["created_at"].tzinfo is not None and row["url"].startswith("https://coffee.stackexchange.com/")
        assert (row["label"] == 1) == (row["created_at"].isoformat() < "2015-02-01")


def test_manifest_records_config_cutoffs_snapshot_and_version(release: Path, coffee_dir: Path):
    m = manifest_of(release)
    assert m["tool"] == {"name": "tidemark", "version": version("tidemark")}
    assert m["config"]["source"]["path"] == str(coffee_dir) and m["config"]["bucket_mode"] == "largest"
    assert m["overrides"] == [f"source.path={coffee_dir}", *WINDOW]
    assert m["cutoffs"]["member_before"] == "2015-02-01" and m["cutoffs"]["nonmember_after"] == "2015-03-01"
    assert m["source"]["dump_name"] == "coffee.stackexchange.com"
    assert [f["md5"] for f in m["source"]["files"]] == [COFFEE_MD5]
    audit = m["shift_audit"]  # the blind-baseline audit of exactly the released rows
    assert audit["overall"]["n"] == m["counts"]["rows_out"] and 0.0 <= audit["overall"]["auc"] <= 1.0
    assert len(audit["overall"]["auc_ci"]) == 2 and set(audit["buckets"]) <= {"32", "64", "128", "256"}
    for name, info in m["files"].items():
        assert pq.read_metadata(release / name).num_rows == info["rows"]


def test_same_config_same_bytes_without_ray_and_from_7z(release: Path, coffee_dir: Path, tmp_path: Path):
    import py7zr

    archive = tmp_path / "coffee.stackexchange.com.7z"
    with py7zr.SevenZipFile(archive, "w") as z:
        z.write(coffee_dir / "Posts.xml", "Posts.xml")
    for path, name in ((coffee_dir, "local"), (archive, "local-7z")):
        cfg = load_config(STACKMIA, [f"source.path={path}", *WINDOW])
        build_benchmark.build(cfg, tmp_path / name, runner="local")
        data = sorted(p.name for p in (release / "data").iterdir())
        assert data == sorted(p.name for p in (tmp_path / name / "data").iterdir())
        for f in data:
            assert (tmp_path / name / "data" / f).read_bytes() == (release / "data" / f).read_bytes(), (name, f)
        assert manifest_of(tmp_path / name)["counts"] == manifest_of(release)["counts"]


def test_an_existing_release_is_not_overwritten_by_accident(release: Path, coffee_dir: Path):
    args = ["build-benchmark", "--config", str(STACKMIA), "--set", f"source.path={coffee_dir}", "--set", WINDOW[0],
            "--set", WINDOW[1], "--out", str(release), "--runner", "local"]
    result = CliRunner().invoke(cli_app(), args)
    assert result.exit_code != 0 and "already holds a release" in str(result.exception)
    bad = CliRunner().invoke(cli_app(), args[:-4] + ["--set", "cutoff.member_before=2015-01-01", "--out",
                                                     str(release) + "-x"])
    assert bad.exit_code != 0 and "unknown config key" in bad.output


def test_debiased_mode_records_blind_auc_before_and_after(coffee_dir: Path, tmp_path: Path):
    cfg = load_config(STACKMIA, [f"source.path={coffee_dir}", *WINDOW, "debias.enabled=true",
                                 "debias.n_bootstrap=100"])
    m = build_benchmark.build(cfg, tmp_path / "debiased", runner="local")
    plain = build_benchmark.build(load_config(STACKMIA, [f"source.path={coffee_dir}", *WINDOW]),
                                  tmp_path / "plain", runner="local")
    d = m["debias"]
    assert {"before", "after", "reached", "message"} <= set(d)
    assert d["before"]["overall"]["n"] == plain["counts"]["rows_out"]
    dropped = sum(m["counts"]["steps"][-1]["dropped"].values())
    assert m["counts"]["steps"][-1]["step"] == "debias"
    assert m["counts"]["rows_out"] + dropped == plain["counts"]["rows_out"]
    assert pq.read_table(tmp_path / "debiased" / "data").num_rows == m["counts"]["rows_out"]
    excluded = pq.read_table(tmp_path / "debiased" / "excluded" / "excluded.parquet").to_pylist()
    assert sum(e["stage"] == "debias" for e in excluded) == dropped


def build_with(out: Path, *sets: str):
    """`build-benchmark` through the CLI with the StackMIA config, coffee's window and `sets`; returns its output."""
    args = ["build-benchmark", "--config", str(STACKMIA)]
    for item in (*sets, *WINDOW):
        args += ["--set", item]
    result = CliRunner().invoke(cli_app(), args + ["--out", str(out)])
    assert result.exit_code == 0, result.output
    return result.output


def assert_same_release(out: Path, release: Path) -> None:
    data = sorted(p.name for p in (release / "data").iterdir())
    assert data == sorted(p.name for p in (out / "data").iterdir())
    for f in data:
        assert (out / "data" / f).read_bytes() == (release / "data" / f).read_bytes(), f
    assert manifest_of(out)["counts"] == manifest_of(release)["counts"]


def coffee_7z(coffee_dir: Path, archive: Path) -> Path:
    import py7zr

    archive.parent.mkdir(parents=True, exist_ok=True)
    with py7zr.SevenZipFile(archive, "w") as z:
        z.write(coffee_dir / "Posts.xml", "Posts.xml")
    return archive


@pytest.mark.heavy  # a second whole build; the cut-off test below builds in the same 8 ranges (make test-slow)
def test_a_dump_parsed_in_byte_ranges_gives_the_same_release(release: Path, coffee_dir: Path, tmp_path: Path):
    """The coffee Posts.xml (741 KB) cut into 100 kB ranges: 8 parse tasks and the answers pass as a partitioned
    aggregation on Ray give byte-identical data files and the same counts as one task per site."""
    output = build_with(tmp_path / "ranges", f"source.path={coffee_dir}", "source.range_bytes=100000")
    assert "answers pass: 8 range(s)" in output
    assert_same_release(tmp_path / "ranges", release)


def test_a_build_cut_off_mid_parse_resumes_from_the_shards_it_parsed(release: Path, coffee_dir: Path,
                                                                     tmp_path: Path, monkeypatch):
    """The parse pass runs on the one part loop: a build stopped after 3 of its 8 shards (the part loop's fault
    hook) publishes nothing and keeps those 3 under OUT/_build; the same command then parses only the 5 left,
    publishes the same release as an uninterrupted build, and removes OUT/_build."""
    from jobs.plane.part_loop import ABORT_ENV, InjectedAbort

    out = tmp_path / "cut"
    sets = (f"source.path={coffee_dir}", "source.range_bytes=100000")
    args = ["build-benchmark", "--config", str(STACKMIA), "--quiet"]
    for item in (*sets, *WINDOW):
        args += ["--set", item]
    monkeypatch.setenv(ABORT_ENV, "3")
    cut = CliRunner().invoke(cli_app(), args + ["--out", str(out)])
    assert isinstance(cut.exception, InjectedAbort), cut.output
    assert not (out / "data").exists() and not (out / "_SUCCESS").exists()
    assert len(list((out / "_build" / "_parts").glob("part-*.done.json"))) == 3
    # commit tasks already running may land files after the stop; without a marker they are not done (cleaned)
    assert len(list((out / "_build" / "parsed").glob("part-*.parquet"))) >= 3
    monkeypatch.delenv(ABORT_ENV)
    output = build_with(out, *sets)
    assert "parse: 3 of 8 shard(s) reused" in output and "5 parsed" in output
    assert_same_release(out, release)
    assert not (out / "_build").exists()


# One range per site (one partition) is how the `release` fixture itself is built from the directory.
@pytest.mark.heavy
@pytest.mark.parametrize("range_bytes,ranges", [(200_000, 4)])
def test_a_7z_dump_is_staged_then_parsed_in_ranges_with_the_same_release(release: Path, coffee_dir: Path,
                                                                           tmp_path: Path, range_bytes, ranges):
    """A site .7z on a single-node cluster is decompressed once into source.staging, then split and parsed in
    parallel like a plain Posts.xml (or as one range, one partition): the same bytes as the release built from the
    directory."""
    archive = coffee_7z(coffee_dir, tmp_path / "dumps" / "coffee.stackexchange.com.7z")
    output = build_with(tmp_path / "from7z", f"source.path={archive}", f"source.range_bytes={range_bytes}",
                        f"source.staging={tmp_path / 'staging'}")
    assert f"answers pass: {ranges} range(s)" in output
    assert len(list((tmp_path / "staging").rglob("_COMPLETE"))) == 1
    assert_same_release(tmp_path / "from7z", release)


@pytest.mark.heavy
def test_without_source_staging_a_7z_is_staged_under_out_and_removed_once_published(release: Path, coffee_dir: Path,
                                                                                    tmp_path: Path):
    import tempfile

    archive = coffee_7z(coffee_dir, tmp_path / "coffee.stackexchange.com.7z")
    before = set(Path(tempfile.gettempdir()).glob("tidemark-staging-*"))
    output = build_with(tmp_path / "out", f"source.path={archive}", "source.range_bytes=300000")
    assert "answers pass: 3 range(s)" in output
    assert set(Path(tempfile.gettempdir()).glob("tidemark-staging-*")) == before
    assert not (tmp_path / "out" / "_build").exists()  # the staged dump lived in OUT/_build/staging
    assert_same_release(tmp_path / "out", release)
