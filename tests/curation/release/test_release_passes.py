"""The partitioned global steps against the first version's single pass (tests/reference_release.py), on seeded
corpora made to hit every rule: ids reused with equal dates, exact copies, near-duplicate chains (A~B, B~C, A!~C),
members and non-members over many months, per-month caps. Partitions and blocks are cut as the Ray runner cuts them
(hash of the key; rows spread over blocks), without Ray."""
from __future__ import annotations

import random
import zlib
from collections import Counter

import pyarrow as pa
import pytest
from reference_release import balanced_sample as reference_sample
from reference_release import duplicate_decisions
from sampling_passes import balanced_sample

from curation.stages import dedup
from curation.stages import sampling
from curation.release.output import EXCLUDED_ROWS_PER_PART, excluded_file_name, excluded_part_count
from curation.release.passes import excluded_partition
from curation.text import exact_key

WORDS = [f"w{i}" for i in range(400)]


def corpus(seed: int, n: int = 400) -> list[dict]:
    rng = random.Random(seed)
    hasher = dedup.MinHasher()
    days = [f"2015-{m:02d}-{d:02d}T00:00:00+00:00" for m in (1, 2, 3) for d in (1, 2, 3)]
    rows = [{"id": f"d{i}", "created_at": rng.choice(days), "text": " ".join(rng.choices(WORDS, k=60))}
            for i in range(n)]
    for i in range(n // 5):  # exact copies and reused ids, often on the same day as the original
        src = rng.choice(rows)
        rows.append({"id": f"c{i}" if i % 2 else src["id"], "created_at": src["created_at"] if i % 3 else
                     rng.choice(days), "text": src["text"] if i % 4 else " ".join(rng.choices(WORDS, k=60))})
    for i in range(n // 5):  # chains of small edits
        words = rng.choice(rows)["text"].split()
        for step in range(3):
            words = [rng.choice(WORDS) if rng.random() < 0.06 else w for w in words]
            rows.append({"id": f"n{i}.{step}", "created_at": rng.choice(days), "text": " ".join(words)})
    rng.shuffle(rows)
    for n_, r in enumerate(rows):
        r.update(row_no=n_, exact_key=exact_key(r["text"]), minhash=hasher.signature(r["text"]))
    return rows


def partitioned_drops(rows: list[dict], partitions: int, *, exact: bool, near: bool) -> list[dict]:
    """dedup as the Ray runner runs it: each check over hash partitions of its key, near pairs over band
    partitions, one resolve."""
    def split(items, key):
        parts = [[] for _ in range(partitions)]
        for item in items:
            value = item[key]
            parts[zlib.crc32(value if isinstance(value, bytes) else value.encode()) % partitions].append(item)
        return parts

    drops, kept = [], rows
    for check, key in [(dedup.duplicate_ids, "id")] + ([(dedup.exact_duplicates, "exact_key")] if exact else []):
        survivors = []
        for part in split(kept, key):
            k, d = check(part)
            survivors += k
            drops += d
        kept = survivors
    if near:
        edges = [e for part in split(list(dedup.band_entries(kept, 16)), "band") for e in dedup.near_edges(part, 0.8)]
        drops += dedup.resolve_near(edges)
    return drops


@pytest.mark.parametrize("seed,partitions", [(0, 1), (1, 3), (2, 7)])
@pytest.mark.parametrize("exact,near", [(True, True), (False, True), (True, False), (False, False)])
def test_partitioned_dedup_equals_the_single_oldest_first_pass(seed, partitions, exact, near):
    rows = corpus(seed)
    reference = duplicate_decisions(rows, exact=exact, near=near, threshold=0.8, bands=16)
    expected = {rows[i]["row_no"]: d for i, d in enumerate(reference) if d is not None}
    got = {d["row_no"]: (d["reason"], d["detail"]) for d in partitioned_drops(rows, partitions, exact=exact, near=near)}
    assert got == expected
    reasons = Counter(r for r, _ in got.values())
    assert reasons["duplicate_id"] and (reasons["exact_duplicate"] or not exact) and (reasons["near_duplicate"] or not near)


def test_a_near_duplicate_chain_keeps_the_far_end():
    """A~B and B~C but A!~C: B goes (similar to A), so C is compared with A alone and stays."""
    rows = [{"id": "a", "created_at": "2015-01-01T00:00:00+00:00", "sig": [0] * 100},
            {"id": "b", "created_at": "2015-01-02T00:00:00+00:00", "sig": [0] * 85 + [1] * 15},
            {"id": "c", "created_at": "2015-01-03T00:00:00+00:00", "sig": [0] * 70 + [1] * 30}]
    for n, r in enumerate(rows):
        r.update(row_no=n, exact_key=r["id"], minhash=pa.array(r["sig"], pa.uint32()).to_numpy().tobytes())
    drops = dedup.dedup_drops(rows, exact=True, near=True, threshold=0.8, bands=100)
    assert [(d["id"], d["detail"]) for d in drops] == [("b", "similar to a (jaccard~0.85)")]


def sample_rows(seed: int) -> list[dict]:
    rng = random.Random(seed)
    months = [f"2023-{m:02d}" for m in range(1, 9)]
    rows = []
    for i in range(600):
        label = int(rng.random() < 0.45)
        for bucket in rng.sample([32, 64, 128], rng.randint(1, 3)):
            rows.append({"id": f"d{i}@{bucket}", "document_id": f"d{i}", "bucket": bucket, "label": label,
                         "month": "2014-05" if label else rng.choice(months[: rng.randint(1, 8)])})
    return rows


@pytest.mark.parametrize("options", [
    {"per_bucket": 50}, {"per_bucket": None}, {"per_bucket": None, "balance": False},
    {"per_bucket": 40, "monthly_nonmembers": True}, {"per_bucket": None, "monthly_nonmembers": True, "per_month": 7},
    {"per_bucket": 1000, "monthly_nonmembers": True, "per_month": 3, "balance": False},
    {"per_bucket": 0},
])
@pytest.mark.parametrize("blocks", [1, 5])
def test_sampling_from_counts_and_ranks_equals_sorting_every_bucket(options, blocks):
    rows = sample_rows(3)
    seed = 11
    kept, dropped = reference_sample(rows, seed=seed, **options)
    got_kept, got_dropped = balanced_sample(rows, seed=seed, blocks=blocks, **options)
    assert {r["id"] for r in got_kept} == {r["id"] for r in kept}
    assert {r["id"]: (reason, detail) for r, reason, detail in got_dropped} == {
        r["id"]: (reason, detail) for r, reason, detail in dropped}


def test_round_robin_takes_whole_rounds_then_months_in_order():
    assert sampling._round_robin_takes([5, 1, 3], 7) == [3, 1, 3]
    assert sampling._round_robin_takes([5, 1, 3], 6) == [3, 1, 2]
    assert sampling._round_robin_takes([5, 1, 3], 100) == [5, 1, 3]
    assert sampling._round_robin_takes([], 4) == []


def test_excluded_parts_are_stable_and_named_as_before_when_one():
    assert excluded_part_count(10, 5) == 1 and excluded_file_name(0, 1) == "excluded/excluded.parquet"
    assert excluded_part_count(EXCLUDED_ROWS_PER_PART, 1) == 2
    assert excluded_file_name(3, 12) == "excluded/part-00003-of-00012.parquet"
    parts = Counter(excluded_partition(f"stackexchange:so:{i}", 8) for i in range(8000))
    assert set(parts) == set(range(8)) and min(parts.values()) > 800  # spread evenly, by id alone
    assert excluded_partition("x", 1) == 0
