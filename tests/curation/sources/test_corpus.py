"""The corpus source (ground-truth membership): passages as released, the training-overlap share of held-out
documents, and the cutoff step's overlap rule."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from curation.sources import corpus, source_config
from curation.stages.filters import NONMEMBER, MEMBER, TrainingOverlap

WORDS = [f"w{i}" for i in range(400)]


def text(start: int, n: int) -> str:
    return " ".join(WORDS[start:start + n])


@pytest.fixture()
def split(tmp_path: Path) -> dict:
    (tmp_path / "train").mkdir()
    (tmp_path / "heldout").mkdir()
    (tmp_path / "train" / "t.jsonl").write_text(json.dumps({"id": "t1", "text": text(0, 100)}) + "\n{bad\n")
    (tmp_path / "heldout" / "h.jsonl").write_text(
        json.dumps({"id": "clean", "text": text(200, 70)}) + "\n"
        + json.dumps({"id": "copy", "text": text(10, 70)}) + "\n"  # all of it is training text
        + json.dumps({"id": "tail", "text": text(300, 40) + " " + text(0, 30)}) + "\n")  # training text after 40 words
    return {"kind": "corpus", "train": str(tmp_path / "train"), "heldout": str(tmp_path / "heldout"),
            "cutoffs": {"member_before": "2000-01-02", "nonmember_after": "2000-01-02"},
            "buckets": [32, 64], "bucket_mode": "every", "max_overlap": 0.2, "ngram": 13}


def test_passages_are_what_the_release_would_cut():
    t = text(0, 70)
    assert [len(p.split()) for p in corpus.passage(t, [32, 64, 128], "every")] == [32, 64]
    assert [len(p.split()) for p in corpus.passage(t, [32, 64, 128], "largest")] == [64]
    assert corpus.passage(text(0, 20), [32], "every") == []


def test_held_out_documents_carry_the_largest_share_of_their_passages(split):
    docs = {d["id"].split(":")[-1]: d for d in corpus.iter_documents(split)}
    assert docs["t1"]["meta"]["label_allowed"] == MEMBER and "train_overlap" not in docs["t1"]["meta"]
    assert docs["clean"]["meta"]["train_overlap"] == 0.0
    assert docs["copy"]["meta"]["train_overlap"] == 1.0
    # "tail": its 32-word passage is clean; its 64-word passage ends with 24 training words: 12 of 52 13-grams
    assert docs["tail"]["meta"]["train_overlap"] == pytest.approx(12 / 52)
    assert docs["clean"]["created_at"] > docs["t1"]["created_at"]
    bad = [d for d in docs.values() if d["meta"].get("quarantine")]
    assert [d["meta"]["quarantine"]["reason"] for d in bad] == ["bad_json"]


def test_the_overlap_rule_drops_only_non_members_over_the_threshold():
    stage = TrainingOverlap(0.2)
    assert stage({"label": NONMEMBER, "meta": {"train_overlap": 0.2}}) is True
    assert stage({"label": NONMEMBER, "meta": {"train_overlap": 0.25}})[1] == "overlaps_training_corpus"
    assert stage({"label": MEMBER, "meta": {"train_overlap": 1.0}}) is True
    assert stage({"label": NONMEMBER, "meta": {}}) is True


def test_the_job_gives_the_source_the_buckets_it_checks():
    cfg = {"source": {"kind": "corpus"}, "cutoffs": {}, "buckets": [32, 128], "bucket_mode": "largest"}
    assert source_config(cfg)["buckets"] == [32, 128] and source_config(cfg)["bucket_mode"] == "largest"
    assert "buckets" not in source_config({"source": {"kind": "files"}, "cutoffs": {}, "buckets": [32]})
