"""Benchmark build configs: YAML + `--set key=value` overrides with types, and the shipped example configs."""
from __future__ import annotations

from pathlib import Path

import pytest

from curation.config import ConfigError, load_config
from curation.sources import source_config

CONFIGS = Path(__file__).resolve().parents[2] / "jobs" / "configs"
BASE = ["source.kind=stackexchange", "source.path=/data/coffee", "cutoffs.member_before=2015-02-01",
        "cutoffs.nonmember_after=2015-03-01"]


def test_overrides_keep_yaml_types_and_dates_become_iso_strings():
    cfg = load_config(None, BASE + ["buckets=[64, 32]", "per_bucket=50", "seed=3", "balance=false",
                                    "filters.languages=[en, de]", "dedup.threshold=0.9", "cutoffs.per_month=null",
                                    "source.requester_pays=true", "source.custom.nested=1"])
    assert cfg["cutoffs"]["member_before"] == "2015-02-01"  # YAML read a date; the manifest needs a string
    assert cfg["buckets"] == [32, 64] and cfg["per_bucket"] == 50 and cfg["seed"] == 3
    assert cfg["balance"] is False and cfg["filters"]["languages"] == ["en", "de"]
    assert cfg["dedup"]["threshold"] == 0.9 and cfg["cutoffs"]["per_month"] is None
    assert cfg["source"]["requester_pays"] is True and cfg["source"]["custom"] == {"nested": 1}


def test_file_then_overrides(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("source: {kind: files, path: a}\ncutoffs: {member_before: 2017-01-01, nonmember_after: "
                    "2023-01-01}\nbuckets: [32]\n")
    cfg = load_config(path, ["cutoffs.nonmember_after=2023-06-01", "source.path=s3://b/p/"])
    assert cfg["cutoffs"] == {**cfg["cutoffs"], "member_before": "2017-01-01", "nonmember_after": "2023-06-01"}
    assert cfg["source"]["path"] == "s3://b/p/" and cfg["buckets"] == [32]


@pytest.mark.parametrize("overrides, message", [
    (["cutoff.member_before=2015-01-01"], "unknown config key 'cutoff'"),
    (["filters.min_word=3"], "unknown config key 'filters.min_word'"),
    (["buckets=[0, 32]"], "buckets"),
    (["cutoffs.member_before=2016-01-01"], "member_before must not be later"),
    (["cutoffs.member_before=soon"], "not an ISO date"),
    (["source.kind=ftp"], "source.kind"),
    (["bucket_mode=all"], "bucket_mode"),
    (["per_bucket=-1"], "per_bucket"),
    (["novalue"], "key=value"),
])
def test_mistakes_fail_loudly(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, BASE + overrides)


@pytest.mark.parametrize("name, kind", [("stackmia", "stackexchange"), ("wikimia", "wikipedia"), ("arxiv", "arxiv")])
def test_shipped_configs_load(name, kind):
    cfg = load_config(CONFIGS / f"{name}.yaml")
    assert cfg["source"]["kind"] == kind and cfg["cutoffs"]["member_before"] and cfg["buckets"]


def test_source_config_carries_the_cutoffs():
    cfg = load_config(None, BASE)
    src = source_config(cfg)
    assert src["member_cutoff"] == "2015-02-01" and src["cutoffs"]["nonmember_after"] == "2015-03-01"
    assert "member_cutoff" not in cfg["source"]  # the config itself is left as written
