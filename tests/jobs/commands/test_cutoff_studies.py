"""`tidemark cutoff`'s controlled studies (bench/cutoff_bench.py, small): models trained on every month or on none
find no cutoff (their own answers, and p on many re-drawn null sets); the versions estimator recovers the version
month a model was trained on; a text-only run over the loopback sampling server recovers the month its model
memorised up to. End-to-end studies: `make test-slow`."""
from __future__ import annotations

import numpy as np
import pytest

from bench import cutoff_bench

pytestmark = pytest.mark.heavy
CFG = {**cutoff_bench.QUICK, "null_seeds": (0, 1), "redraws": 40}


def test_models_that_read_every_month_or_none_find_no_cutoff(tmp_path):
    res = cutoff_bench.nulls(CFG, tmp_path)
    own = res["own"]
    assert len(own) == 2 * 2 * 2 * 2 * 2  # seeds x models x scores x sources x detectors
    found = [a for a in own if a["cutoff"] is not None]
    assert len(found) <= 2, found  # alpha 0.01: about 1% of the answers would be, were p exact
    pooled = {}
    for r in res["redrawn"]:
        pooled.setdefault(r["scores"], []).extend(r["p_values"])
    diff, alone = np.asarray(pooled["target minus reference"]), np.asarray(pooled["target alone"])
    assert (diff < 0.05).mean() <= 0.10 and (diff < 0.01).mean() <= 0.03
    assert (alone < 0.01).mean() <= 0.05


def test_versions_recover_the_trained_month(tmp_path):
    runs = cutoff_bench.versions(CFG, tmp_path)
    trained = [r for r in runs if r["truth"]]
    assert trained and all(abs(r["months_off"]) <= 1 and r["ci_covers"] for r in trained)
    assert all(r["p"] < 0.01 for r in trained if r["detector"].startswith("min_k_pp"))
    # a model that read no version (versions drawn alike, so the within-group shuffle is exact): at alpha 0.01, at
    # most one of its four answers (two detectors, alone and minus a reference) may report a month by chance
    untrained = [r for r in runs if not r["truth"]]
    assert len(untrained) == 4 and sum(r["cutoff"] is not None for r in untrained) <= 1


def test_text_only_run_recovers_the_memorised_months(tmp_path):
    runs = cutoff_bench.text_only(CFG, tmp_path)
    assert len(runs) == 1 and runs[0]["detector"].startswith("ngram_coverage")
    assert runs[0]["cutoff"] is not None and abs(runs[0]["months_off"]) <= 1 and runs[0]["ci_covers"]
