"""build-benchmark from two generated multistream dumps (source.kind: wikipedia_dump) on Ray: the shards parse in
parallel, the release equals the local runner's byte for byte, the manifest records both dumps, and a corrupt
stream is counted, not lost."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.wikidump import dump_pair
from curation.config import load_config
from curation.sources.wikipedia.multistream import open_index, parse_index_line
from jobs.commands import build_benchmark

pytestmark = pytest.mark.ray

CONFIG = Path(__file__).resolve().parents[3] / "jobs" / "configs" / "wikimia_dump.yaml"


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict:
    return dump_pair(tmp_path_factory.mktemp("wikidump"), 400, 150, pages_per_stream=40)


def config(dumps: dict, **extra) -> dict:
    cfg = load_config(str(CONFIG))
    cfg["source"] = {**cfg["source"], "dump_before": dumps["dump_before"], "dump_after": dumps["dump_after"],
                     "pages_per_shard": 120, **extra}
    return cfg


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


@pytest.mark.heavy  # two whole builds compared byte for byte: an end-to-end identity study (make test-slow)
def test_ray_and_local_runners_give_the_same_release_and_the_manifest_records_both_dumps(ray_session, dumps,
                                                                                        tmp_path: Path):
    build_benchmark.build(config(dumps), tmp_path / "ray", runner="ray")
    build_benchmark.build(config(dumps), tmp_path / "local", runner="local")
    files = sorted(p.relative_to(tmp_path / "ray") for p in (tmp_path / "ray").rglob("*.parquet"))
    assert files and files == sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*.parquet"))
    for f in files:
        assert (tmp_path / "ray" / f).read_bytes() == (tmp_path / "local" / f).read_bytes(), f
    m = manifest(tmp_path / "ray")
    assert m["counts"] == manifest(tmp_path / "local")["counts"]
    snap = m["source"]
    assert snap["dump_before"]["date"] == "2023-01-01" and snap["dump_after"]["date"] == "2024-03-01"
    assert snap["new_after_page_id"] == 400
    candidates = snap["dump_before"]["candidate_pages"] + snap["dump_after"]["candidate_pages"]
    assert m["counts"]["documents_in"] == candidates  # every candidate page the indexes list entered the job
    by = m["counts"]["by_label_bucket"]
    assert by["member"] == by["nonmember"] and sum(by["member"].values()) > 100
    defects = m["text_defects"]  # every released passage measured for holes and markup
    assert defects["passages"] == m["counts"]["rows_out"] and defects["max_share"] == 0.03
    assert defects == manifest(tmp_path / "local")["text_defects"]


def test_a_corrupt_stream_is_quarantined_and_the_counts_reconcile(ray_session, dumps, tmp_path: Path):
    before = Path(dumps["dump_before"]["path"])
    broken = tmp_path / before.name
    data = bytearray(before.read_bytes())
    offsets = sorted({parse_index_line(line)[0] for line in open_index(dumps["dump_before"]["index"])})
    data[offsets[3] + 40:offsets[3] + 400] = bytes(360)
    broken.write_bytes(bytes(data))
    cfg = config(dumps)
    cfg["source"]["dump_before"] = {"path": str(broken), "index": dumps["dump_before"]["index"]}
    build_benchmark.build(cfg, tmp_path / "out", runner="ray")
    m = manifest(tmp_path / "out")
    counts = m["counts"]
    lost = counts["dropped_by_reason"]["stream_unreadable"]
    assert 30 <= lost <= 40  # the candidates of one 40-page stream
    # ~10% of the generated articles open a table mid-line: dropped from their text and counted, the articles kept
    assert counts["source_repairs"].get("table_mid_line", 0) > 10
    assert "wikitext_residue" not in counts["dropped_by_reason"]
    # Every candidate the (intact) indexes list still enters the job: the lost ones as quarantine rows.
    assert counts["documents_in"] == sum(m["source"][r]["candidate_pages"] for r in ("dump_before", "dump_after"))
