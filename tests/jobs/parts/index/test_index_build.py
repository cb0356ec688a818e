"""The index's suffix array against a brute-force sort of token suffixes, and its shard files' layout."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pydivsufsort")

from jobs.parts.index.build import _ShardWriter, build_table  # noqa: E402


def suffix_order(tokens: np.ndarray) -> list[int]:
    """Token positions sorted by the bytes of their suffix (the order infini-gram's engine searches)."""
    data = tokens.astype("<u4").tobytes()
    return sorted(range(tokens.size), key=lambda i: data[4 * i:])


def test_the_table_is_the_sorted_token_suffixes(tmp_path: Path):
    rng = np.random.default_rng(0)
    tokens = np.concatenate([[0xFFFFFFFF], rng.integers(0, 6, 300), [0xFFFFFFFF], rng.integers(0, 6, 200)])
    path = tmp_path / "tokenized.000"
    path.write_bytes(tokens.astype("<u4").tobytes())
    build_table(path, tmp_path / "table.000")
    ratio = int(np.ceil(np.log2(path.stat().st_size) / 8))
    raw = np.frombuffer((tmp_path / "table.000").read_bytes(), dtype=np.uint8).reshape(-1, ratio)
    pointers = np.zeros(raw.shape[0], dtype=np.uint64)
    for k in range(ratio):
        pointers |= raw[:, k].astype(np.uint64) << np.uint64(8 * k)
    assert (pointers // 4).tolist() == suffix_order(tokens)


def test_a_shard_holds_documents_behind_separators_with_their_ids(tmp_path: Path):
    w = _ShardWriter(tmp_path, 0)
    w.add("a", np.array([5, 6], dtype=np.uint32))
    w.add("b", np.array([7], dtype=np.uint32))
    w.close()
    tokens = np.frombuffer((tmp_path / "tokenized.000").read_bytes(), dtype="<u4").tolist()
    assert tokens == [0xFFFFFFFF, 5, 6, 0xFFFFFFFF, 7]
    assert np.frombuffer((tmp_path / "offset.000").read_bytes(), dtype="<u8").tolist() == [0, 12]
    lines = (tmp_path / "metadata.000").read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["a", "b"]
    empty = _ShardWriter(tmp_path, 1)
    empty.close()  # no document: no files (the engine cannot open an empty shard)
    assert not list(tmp_path.glob("*.001"))


def test_the_text_store_gives_back_each_document_s_text(tmp_path: Path):
    from jobs.parts.index.build import TEXT_BLOCK, pack_texts, unpack_text
    from jobs.parts.index.reader import _document_text

    texts = ["", "naïve café — 東京 🚀", "a\nb\tc", "x" * 5000]
    frame = pack_texts(texts)
    assert [unpack_text(frame, k) for k in range(len(texts))] == texts
    w = _ShardWriter(tmp_path, 0)
    many = [f"document {k} " + texts[k % len(texts)] for k in range(2 * TEXT_BLOCK + 3)]
    for k, t in enumerate(many):
        w.add(f"d{k}", np.array([k + 1], dtype=np.uint32), text=t, file="f.jsonl")
    w.close()
    assert [_document_text(str(tmp_path), 0, k) for k in range(len(many))] == many
