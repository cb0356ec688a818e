"""`evaluate --compare-to`: the original's AUC beside each AUC (scoring/stats/comparison.py), by hand."""
from __future__ import annotations

import math

from scoring.stats.comparison import attach_original, comparison_table


def rec(column, bucket, auc):
    return {"method": column.split("@")[0], "column": column, "bucket": bucket, "auc": auc, "auc_ci": [auc - .1, auc + .1]}


def test_original_auc_and_change_sit_beside_each_record():
    here = [rec("loss", "all", 0.70), rec("loss", "64", 0.65), rec("min_k@k=0.2", "all", 0.80), rec("zlib", "all", float("nan"))]
    original = [rec("loss", "all", 0.90), rec("min_k@k=0.2", "all", 0.85), rec("zlib", "all", 0.6)]
    out = attach_original(here, original)
    assert out[0]["original_auc"] == 0.90 and math.isclose(out[0]["auc_change"], 0.70 - 0.90)
    assert out[1]["original_auc"] is None and out[1]["auc_change"] is None  # the original had no bucket 64
    assert math.isclose(out[2]["auc_change"], -0.05)
    assert out[3]["original_auc"] == 0.6 and out[3]["auc_change"] is None  # NaN here: no change computed
    table = comparison_table(out).splitlines()
    assert table[2] == "| loss | 0.700 | 0.900 | -0.200 |"
    assert table[3] == "| min_k@k=0.2 | 0.800 | 0.850 | -0.050 |"
    assert table[4] == "| zlib | n/a | 0.600 |  |"
    assert len(table) == 5  # bucket 64 is not in the "all" table


def test_compare_to_a_benchmark_evaluates_it_first_with_the_same_settings(monkeypatch, tmp_path):
    import json

    from jobs.commands import evaluate as ev
    from curation.io.outputs import Location

    calls = []

    def fake_run(cfg):  # stands in for the nested evaluation: records its config, writes its metrics.json
        calls.append(cfg)
        Location(cfg.out).write_json("metrics.json", [rec("loss", "all", 0.9)])

    monkeypatch.setattr(ev, "run_evaluate", fake_run)
    bench = tmp_path / "original.jsonl"
    bench.write_text("{}\n")
    cfg = ev.EvaluateConfig(benchmark=str(tmp_path / "para"), model="m", out=str(tmp_path / "out"),
                            methods="loss", seed=3, compare_to=str(bench))
    records, info = ev.compare_with_original(cfg, [rec("loss", "all", 0.7)], Location(cfg.out))
    (nested,) = calls
    assert nested.benchmark == str(bench) and nested.out == str(tmp_path / "out" / "original")
    assert nested.compare_to is None and nested.seed == 3 and nested.model == "m" and nested.methods == "loss"
    assert records[0]["original_auc"] == 0.9 and info["original"] == str(bench)
    # an earlier evaluation's OUT is read as it is
    calls.clear()
    cfg.compare_to = str(tmp_path / "out" / "original")
    records, _ = ev.compare_with_original(cfg, [rec("loss", "all", 0.7)], Location(cfg.out))
    assert not calls and records[0]["original_auc"] == 0.9
    assert json.loads((tmp_path / "out" / "original" / "metrics.json").read_text())[0]["auc"] == 0.9
