"""`tidemark impact` on the controlled study (bench/impact_bench.py, small): tiny GPT-2s learn a word-problem task;
the target also trained on half the benchmark's items verbatim, its twin did not. The measured gap and
difference-in-differences against the truth (the leaked items' gain over the twin), the clean score against the
twin's, the twin's difference-in-differences near zero, and the easy items' gap explained by the references.
An end-to-end study: `make test-slow`."""
from __future__ import annotations

import pytest

from bench import impact_bench

pytestmark = pytest.mark.heavy


def test_the_study_measures_the_inflation_that_is_there(tmp_path):
    res = impact_bench.run_bench(impact_bench.QUICK, tmp_path)
    truth, target, twin = res["truth"], res["target"], res["twin"]
    assert truth["gain_on_leaked"] > 0.15  # the leak took: the target answers its leaked items far better
    assert target["p_value"] < 0.01 and target["gap"] > 0
    assert res["checks"]["did_ci_covers_true_gain"] and res["checks"]["target_clean_ci_covers_twin_full"]
    assert res["checks"]["twin_did_ci_covers_0"] and twin["p_value"] > 0.01
    assert res["checks"]["confound_did_ci_covers_0"]  # easy items: a gap the references share
    assert res["confound"]["gap"] > 0
    # ConStat, with no evidence: the target's whole-benchmark inflation (its score minus the twin's) found
    assert res["checks"]["constat_ci_covers_true_full_gain"] and target["constat_p"] < 0.05
    assert twin["constat_p"] >= 0.05 and res["constat_null"]["p_below_0.05"] <= 0.15
