"""Curation stages, dedup, sampling and the build's counting, in plain Python (no Ray)."""
from __future__ import annotations

import random
from datetime import datetime, timezone

import pytest
from sampling_passes import balanced_sample

from curation.stages import filters as st
from curation.stages.counts import Tally, count_steps, reconcile
from curation.document import ReconcileError
from curation.stages.dedup import MinHasher, dedup_drops
from curation.stages.pipeline import annotate_records, decide_release, numbered_records
from curation.text import exact_key, looks_like_formula, truncate_words, word_count

UTC = timezone.utc
WORDS = ("coffee beans roast grind water kettle filter brew cup milk sugar press pour bloom acid body aroma crema "
         "shot dose tamp basket burr blade scale timer mug foam steam latte mocha decaf origin farm").split()


def doc(i: int | str, created: str | None, text: str = "", **meta) -> dict:
    return {"id": f"t:{i}", "source": "test", "title": meta.pop("title", f"title {i}"), "text": text,
            "created_at": datetime.fromisoformat(created).replace(tzinfo=UTC) if created else None,
            "url": f"https://example.org/{i}", "meta": meta}


def prose(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


# ---------------------------------------------------------------- text helpers

def test_word_count_counts_the_word_pattern_runs():
    """word_count uses str.split(): the same count as the \\S+ words wherever str.isspace and re's \\s agree,
    which is every code point."""
    import re
    import sys

    space = re.compile(r"\s")
    assert [c for c in range(sys.maxunicode + 1) if (space.match(chr(c)) is not None) != chr(c).isspace()] == []
    rng = random.Random(5)
    alphabet = " \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u1680\u2003\u200b\u2028\u3000\ufeffab\u00e9\u4e2d."
    for text in ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))) for _ in range(2000)]:
        assert word_count(text) == len(re.findall(r"\S+", text))


def test_truncate_keeps_spacing_and_counts_words():
    text = "one two\nthree   four five"
    assert word_count(text) == 5
    assert truncate_words(text, 3) == "one two\nthree"
    assert truncate_words(text, 10) == text
    assert truncate_words(text, 0) == ""


def test_formula_heuristic_leaves_prices_alone():
    assert looks_like_formula(r"we have $\alpha + 1$ here")
    assert looks_like_formula("$$E = mc^2$$")
    assert looks_like_formula(r"\begin{equation} x \end{equation}")
    assert not looks_like_formula("it costs $5 and then $6, or $3000/lb")
    assert not looks_like_formula("funded by a $6 million grant (tens of billions($))")


# ---------------------------------------------------------------- row-level stages

CUT = st.TimeCutoff("2015-02-01", "2015-03-01")


@pytest.mark.parametrize("created, activity, label, reason", [
    ("2015-01-10T00:00:00", None, 1, None),
    ("2015-01-10T00:00:00", "2015-01-31T23:59:59+00:00", 1, None),
    ("2015-01-10T00:00:00", "2015-02-01T00:00:00+00:00", None, "member_active_after_cutoff"),
    ("2015-02-10T00:00:00", None, None, "between_cutoffs"),
    ("2015-02-28T23:59:59", None, None, "between_cutoffs"),
    ("2015-03-01T00:00:00", None, 0, None),
    (None, None, None, "missing_date"),
])
def test_time_cutoff(created, activity, label, reason):
    row = doc(1, created, activity_at=activity) if activity else doc(1, created)
    drop = st.run_row_stages(row, [CUT])
    assert row["label"] == label
    assert (drop["reason"] if drop else None) == reason
    if drop:
        assert drop["stage"] == "cutoff" and drop["id"] == "t:1"


def test_time_cutoff_window_end_and_naive_dates_are_utc():
    cut = st.TimeCutoff("2015-02-01", "2015-03-01", "2015-04-01")
    assert st.run_row_stages(doc(1, "2015-04-01T00:00:00"), [cut])["reason"] == "after_window"
    row = {"id": "x", "created_at": "2015-01-31T23:59:59", "meta": {}}  # an ISO string without a zone
    assert st.run_row_stages(row, [cut]) is None and row["label"] == 1


def test_filters_return_reasons():
    title = st.TitlePattern(["^List of", "^Timeline of"])
    assert st.run_row_stages(doc(1, None, title="List of roasters"), [title])["reason"] == "title_pattern"
    assert st.run_row_stages(doc(1, None, title="A list of roasters"), [title]) is None

    words = st.WordRange(min_words=3, max_words=5)
    assert st.run_row_stages(doc(1, None, "a b"), [words])["reason"] == "too_few_words"
    assert st.run_row_stages(doc(1, None, "a b c d e f"), [words])["detail"] == "6 > 5"
    assert st.run_row_stages(doc(1, None, "a b c"), [words]) is None

    cf = st.CodeOrFormula(drop_code=True, drop_formula=True)
    assert st.run_row_stages(doc(1, None, "plain", has_code=True), [cf])["reason"] == "has_code"
    assert st.run_row_stages(doc(1, None, "```\nx = 1\n```"), [cf])["reason"] == "has_code"  # heuristic
    assert st.run_row_stages(doc(1, None, r"so $\beta$ grows"), [cf])["reason"] == "has_formula"
    assert st.run_row_stages(doc(1, None, "costs $5 or $6"), [cf]) is None
    keep_code = st.CodeOrFormula(drop_code=False, drop_formula=True)
    assert st.run_row_stages(doc(1, None, "plain", has_code=True), [keep_code]) is None


def test_language_stage():
    lang = st.Language(["en"])
    en = doc(1, None, "I want to know how long roasted coffee beans stay fresh when kept in a jar.")
    de = doc(2, None, "Ich möchte wissen, wie lange geröstete Kaffeebohnen in einem Glas frisch bleiben.")
    assert st.run_row_stages(en, [lang]) is None and en["language"] == "en"
    drop = st.run_row_stages(de, [lang])
    assert drop["reason"] == "language" and drop["detail"].startswith("de:")


def test_first_drop_wins_and_a_drop_needs_a_reason():
    class NoReason(st.Stage):
        name = "bad"

        def decide(self, row):
            return False

    row = doc(1, "2015-02-10T00:00:00", "text")
    assert st.run_row_stages(row, [CUT, st.WordRange(min_words=100)])["stage"] == "cutoff"
    with pytest.raises(ValueError, match="reason"):
        st.run_row_stages(doc(1, None), [NoReason()])


def test_source_quarantine_keeps_the_source_stage_name():
    row = doc(1, None, quarantine={"stage": "source.arxiv", "reason": "pdf_only", "detail": "no TeX"})
    assert st.run_row_stages(row, [st.SourceQuarantine(), CUT]) == {
        "id": "t:1", "stage": "source.arxiv", "reason": "pdf_only", "detail": "no TeX"}


# ---------------------------------------------------------------- dedup

def test_exact_and_near_duplicates_keep_the_earliest():
    hasher = MinHasher(ngram=5, permutations=128)
    base = prose(1, 120)
    near = base.replace(base.split()[60], "zzz", 1)  # one word changed in 120
    rows = [
        {"id": "b", "created_at": "2015-01-02T00:00:00+00:00", "text": base.upper()},  # same text, other case
        {"id": "a", "created_at": "2015-01-01T00:00:00+00:00", "text": base},
        {"id": "c", "created_at": "2015-01-03T00:00:00+00:00", "text": near},
        {"id": "d", "created_at": "2015-01-04T00:00:00+00:00", "text": prose(2, 120)},
        {"id": "a", "created_at": "2015-01-05T00:00:00+00:00", "text": prose(3, 50)},  # a reused id
    ]
    for n, r in enumerate(rows):
        r["exact_key"], r["minhash"], r["row_no"] = exact_key(r["text"]), hasher.signature(r["text"]), n
    drops = {d["row_no"]: d for d in dedup_drops(rows, exact=True, near=True, threshold=0.8, bands=16)}
    assert [drops[n]["reason"] if n in drops else None for n in range(5)] == [
        "exact_duplicate", None, "near_duplicate", None, "duplicate_id"]
    assert drops[0]["detail"] == "same text as a" and drops[2]["detail"].startswith("similar to a")
    assert 2 not in {d["row_no"] for d in dedup_drops(rows[:4], exact=True, near=False)}  # near off: it survives


def test_minhash_is_deterministic_across_instances():
    text = prose(4, 80)
    assert MinHasher().signature(text) == MinHasher().signature(text)


# ---------------------------------------------------------------- buckets and sampling

def labelled(i: int, label: int, n_words: int, month: str = "2015-03") -> dict:
    return {"id": f"t:{i}", "source": "test", "text": prose(i, n_words), "created_at": f"{month}-02T00:00:00+00:00",
            "url": "", "label": label, "word_count": n_words, "month": month}


def test_bucket_rows_every_and_largest():
    row = labelled(1, 1, 150)
    every = st.bucket_rows(row, [32, 64, 128, 256], "every")
    assert [r["bucket"] for r in every] == [32, 64, 128]
    assert [word_count(r["input"]) for r in every] == [32, 64, 128]
    assert [r["id"] for r in every] == ["t:1@32", "t:1@64", "t:1@128"]
    assert all(row["text"].startswith(r["input"]) for r in every)
    assert [r["bucket"] for r in st.bucket_rows(row, [32, 64, 128, 256], "largest")] == [128]
    assert st.bucket_rows(labelled(2, 1, 20), [32, 64], "every") == []


def test_balanced_sample_is_seeded_balanced_and_order_free():
    rows = [r for i in range(40) for r in st.bucket_rows(labelled(i, int(i < 25), 70), [32, 64], "every")]
    kept, dropped = balanced_sample(rows, per_bucket=10, seed=7)
    counts = {(b, y): sum(r["bucket"] == b and r["label"] == y for r in kept) for b in (32, 64) for y in (0, 1)}
    assert counts == {(32, 0): 10, (32, 1): 10, (64, 0): 10, (64, 1): 10}
    assert len(kept) + len(dropped) == len(rows) and {d[1] for d in dropped} == {"not_sampled"}
    shuffled = rows[:]
    random.Random(0).shuffle(shuffled)
    again, _ = balanced_sample(shuffled, per_bucket=10, seed=7)
    assert sorted(r["id"] for r in again) == sorted(r["id"] for r in kept)
    other, _ = balanced_sample(rows, per_bucket=10, seed=8)
    assert sorted(r["id"] for r in other) != sorted(r["id"] for r in kept)
    # the same document ranks the same in every bucket: shorter buckets hold the longer buckets' documents
    docs = {b: {r["document_id"] for r in kept if r["bucket"] == b} for b in (32, 64)}
    assert docs[32] == docs[64]
    unbalanced, _ = balanced_sample(rows, per_bucket=None, seed=7, balance=False)
    assert len(unbalanced) == len(rows)
    balanced, _ = balanced_sample(rows, per_bucket=None, seed=7)
    assert sum(r["label"] == 1 for r in balanced) == sum(r["label"] == 0 for r in balanced) == 30


def test_monthly_nonmembers_are_taken_round_robin():
    months = ["2015-03"] * 12 + ["2015-04"] * 3 + ["2015-05"] * 5
    rows = [st.bucket_rows(labelled(i, 0, 40, m), [32], "every")[0] for i, m in enumerate(months)]
    rows += [st.bucket_rows(labelled(100 + i, 1, 40), [32], "every")[0] for i in range(9)]
    kept, dropped = balanced_sample(rows, per_bucket=None, seed=0, monthly_nonmembers=True)
    nonmember_months = sorted(r["month"] for r in kept if r["label"] == 0)
    assert nonmember_months == ["2015-03"] * 3 + ["2015-04"] * 3 + ["2015-05"] * 3
    kept, dropped = balanced_sample(rows, per_bucket=None, seed=0, balance=False, monthly_nonmembers=True,
                                       per_month=4)
    assert sorted(r["month"] for r in kept if r["label"] == 0) == ["2015-03"] * 4 + ["2015-04"] * 3 + ["2015-05"] * 4
    assert sorted(d[1] for d in dropped) == ["month_quota"] * 9


# ---------------------------------------------------------------- the build's counting

def small_config(**over) -> dict:
    from curation.config import load_config

    cfg = load_config(None, ["source.kind=files", "source.path=unused", "cutoffs.member_before=2015-02-01",
                             "cutoffs.nonmember_after=2015-03-01", "buckets=[8,16]", "per_bucket=null",
                             "dedup.near=true", "filters.title_patterns=['^List of']"])
    cfg.update(over)
    return cfg


def corpus() -> list[dict]:
    docs = [doc(i, f"2015-01-{1 + i:02d}T00:00:00", prose(i, 10 + i)) for i in range(12)]  # members
    docs += [doc(20 + i, f"2015-03-{1 + i:02d}T00:00:00", prose(20 + i, 12 + i)) for i in range(8)]  # non-members
    docs += [doc(40, "2015-02-10T00:00:00", prose(40, 30)),  # between the cutoffs
             doc(41, "2015-03-20T00:00:00", prose(41, 30), title="List of cups"),
             doc(42, "2015-03-21T00:00:00", "too short"),
             doc(43, "2015-03-22T00:00:00", prose(3, 13)),  # a repost of member t:3
             doc(44, None, prose(44, 30)),
             doc(45, None, "", quarantine={"stage": "source.files", "reason": "bad_json", "detail": "line 3"})]
    return docs


class Result:
    def __init__(self, excluded, sampled, tally: Tally, cfg):
        self.excluded, self.rows, self.tally = excluded.to_pylist(), sampled.sort_by("id").to_pylist(), tally
        self.counts = count_steps(tally, monthly=bool(cfg["cutoffs"]["monthly_nonmembers"]))


def run(cfg, docs):
    table = annotate_records(list(numbered_records(iter(docs))), cfg)
    assert table.num_rows == len(docs)
    excluded, sampled, tally, parts = decide_release(table, cfg)
    assert parts == 1
    result = Result(excluded, sampled, tally, cfg)
    reconcile(result.counts, tally, rows_written=len(result.rows), excluded_written=len(result.excluded))
    return result


def test_every_document_is_kept_or_excluded_with_a_reason():
    cfg = small_config()
    docs = corpus()
    result = run(cfg, docs)
    counts = result.counts
    assert counts["documents_in"] == len(docs)
    for step in counts["steps"]:
        assert step["in"] == step["kept"] + sum(step["dropped"].values())
    assert counts["dropped_by_reason"] == {
        "bad_json": 1, "between_cutoffs": 1, "exact_duplicate": 1, "missing_date": 1, "not_sampled": 6,
        "shorter_than_smallest_bucket": 1, "title_pattern": 1}
    assert sum(counts["dropped_by_reason"].values()) == len(result.excluded) == counts["excluded"]
    cutoff = next(s for s in counts["steps"] if s["step"] == "cutoff")
    assert cutoff["kept_by_label"] == {"member": 12, "nonmember": 11}
    assert {e["stage"] for e in result.excluded if e["reason"] == "bad_json"} == {"source.files"}
    # buckets 8 and 16, "every": members have 10..21 words (12 in bucket 8, 6 reach 16), non-members 12..19
    # (8 and 4); balanced per bucket: 8+8 and 4+4, so 4 + 2 member rows are not sampled
    assert counts["by_label_bucket"] == {"member": {"8": 8, "16": 4}, "nonmember": {"8": 8, "16": 4}}
    assert counts["rows_out"] == len(result.rows)
    assert [r["id"] for r in result.rows] == sorted(r["id"] for r in result.rows)


def test_reconcile_fails_loudly():
    cfg = small_config()
    result = run(cfg, corpus())
    with pytest.raises(ReconcileError, match="written"):
        reconcile(result.counts, result.tally, rows_written=len(result.rows) - 1,
                  excluded_written=len(result.excluded))
    with pytest.raises(ReconcileError, match="drops counted"):
        reconcile(result.counts, result.tally, rows_written=len(result.rows), excluded_written=0)
    with pytest.raises(ReconcileError, match="unknown stage"):
        Tally().exclude("nowhere", "lost", None)
    broken = Tally()
    broken += result.tally
    broken.bucketed_documents += 1
    with pytest.raises(ReconcileError, match="bucketed"):
        reconcile(count_steps(broken), broken, rows_written=len(result.rows), excluded_written=len(result.excluded))
