"""Reading a corpus index (jobs/parts/corpus_index.py), shared by `tidemark overlap --index` and `tidemark trace`:
the index made local (an s3:// index is copied to a cache once: infini-gram's engine memory-maps its files), the
engine over some or all of its parts, where an occurrence lies (document, word offset), and the documents' text.

An occurrence is a rank in a shard's suffix array (what the engine's `find` returns as a segment per shard). Its
document and the word it starts at are read from the shard's files directly (the table's pointer, the documents'
byte offsets): the engine's own document call returns a window whose start it does not say.
"""
from __future__ import annotations

import hashlib
import json
import re
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

WORD = re.compile(r"\w+")  # the words of scoring/overlap/ngrams.words, found in the original text for snippets


def local_index(idx: str) -> tuple[Path, dict]:
    """(a local directory holding the index's shards, index.json). Refuses an incomplete index."""
    from curation.io.outputs import Location
    from jobs.parts.corpus_index import SHARDS, check_index_path, require_index_packages

    require_index_packages()
    where = Location(idx)
    if not where.exists("_SUCCESS"):
        raise FileNotFoundError(f"{idx} is not a complete index (no _SUCCESS): run `tidemark index-corpus` to the end")
    meta = where.read_json("index.json")
    local = where.root if not where.s3 else Path(tempfile.gettempdir()) / "tidemark-index" / \
        hashlib.sha256(where.uri.encode()).hexdigest()[:16]
    if where.s3:
        for rel in where.list(SHARDS):
            if not (local / rel).exists():
                where.download(rel, local / rel)
    check_index_path(str(local))
    return Path(local), meta


def part_dirs(local: Path) -> list[str]:
    """The index's part directories that hold documents, in corpus order."""
    from jobs.parts.corpus_index import SHARDS

    return sorted(str(d) for d in (local / SHARDS).iterdir() if any(d.glob("tokenized.*")))


def engine_over(dirs: list[str]):
    from infini_gram.engine import InfiniGramEngine

    return InfiniGramEngine(index_dir=list(dirs), eos_token_id=0, vocab_size=2**32 - 1, token_dtype="u32",
                            version=4)


def open_index(idx: str):
    """(the infini-gram engine over every shard, index.json)."""
    local, meta = local_index(idx)
    dirs = part_dirs(local)
    if not dirs:
        raise ValueError(f"{idx} holds no indexed document")
    return engine_over(dirs), meta


@dataclass(frozen=True)
class Occurrence:
    doc_id: str  # the corpus's own id
    file: str | None  # the corpus file it came from (None in indexes built before the text store)
    shard: int  # the shard file number within its part directory
    n: int  # its ordinal in the shard
    word_offset: int  # where the occurrence starts, in the document's words
    doc_words: int


class PartReader:
    """One index part directory: the engine over its shards, occurrences and the documents' text."""

    def __init__(self, part_dir: str):
        self.dir = Path(part_dir)
        self.engine = engine_over([part_dir])
        self._shard_of: dict[int, int] = {}  # engine shard number -> shard file number (from the metadata)

    def occurrence(self, s: int, rank: int) -> Occurrence:
        d = self.engine.get_doc_by_rank(s=s, rank=rank, max_disp_len=1)
        meta = json.loads(d["metadata"])
        k = int(meta.get("shard", s))
        self._shard_of[s] = k
        n = int(meta.get("n", d["doc_ix"]))
        ptr = _pointer(self.dir, k, rank)
        start = int(_doc_offsets(str(self.dir), k)[n])
        return Occurrence(str(meta["id"]), meta.get("file"), k, n, (ptr - start) // 4 - 1, int(d["doc_len"]))

    def occurrences(self, found: dict, limit: int) -> list[Occurrence]:
        """The first `limit` occurrences of a `find` result, in corpus order (shard, then document, then offset);
        at most `limit` read per shard."""
        out: list[Occurrence] = []
        for s, (lo, hi) in enumerate(found["segment_by_shard"]):
            if hi > lo:
                out += sorted((self.occurrence(s, r) for r in range(lo, min(hi, lo + limit))),
                              key=lambda o: (o.n, o.word_offset))
            if len(out) >= limit:
                break
        return out[:limit]

    def text(self, shard: int, n: int) -> str | None:
        """The document's text from the index's text store (None where the index has none)."""
        return _document_text(str(self.dir), shard, n)


def _pointer(where: Path, k: int, rank: int) -> int:
    """The byte position in tokenized.KKK of the suffix at `rank` (the table's little-endian pointer)."""
    table, ratio = _table(str(where), k)
    raw = table[rank * ratio:(rank + 1) * ratio]
    return int.from_bytes(raw.tobytes(), "little")


@lru_cache(maxsize=64)
def _table(where: str, k: int) -> tuple[np.memmap, int]:
    size = (Path(where) / f"tokenized.{k:03d}").stat().st_size
    ratio = max(1, int(np.ceil(np.log2(max(2, size)) / 8)))  # as corpus_index.build_table writes it
    return np.memmap(Path(where) / f"table.{k:03d}", dtype=np.uint8, mode="r"), ratio


@lru_cache(maxsize=64)
def _doc_offsets(where: str, k: int) -> np.memmap:
    return np.memmap(Path(where) / f"offset.{k:03d}", dtype="<u8", mode="r")


@lru_cache(maxsize=64)
def _text_positions(where: str, k: int) -> np.ndarray | None:
    path = Path(where) / f"textpos.{k:03d}"
    return np.fromfile(path, dtype="<u8") if path.exists() else None


@lru_cache(maxsize=256)
def _text_block(where: str, k: int, block: int) -> tuple[str, ...]:
    import zstandard

    pos = _text_positions(where, k)
    with open(Path(where) / f"text.{k:03d}", "rb") as fh:
        fh.seek(int(pos[block]))
        frame = fh.read(int(pos[block + 1] - pos[block]))
    return tuple(json.loads(zstandard.ZstdDecompressor().decompress(frame)))


def _document_text(where: str, k: int, n: int) -> str | None:
    from jobs.parts.corpus_index import TEXT_BLOCK

    if _text_positions(where, k) is None:
        return None
    return _text_block(where, k, n // TEXT_BLOCK)[n % TEXT_BLOCK]


def snippet(text: str, word_start: int, word_end: int, context: int) -> dict:
    """The passage of `text` from `context` words before word `word_start` to `context` words after `word_end`
    (words as `tidemark overlap` counts them), with where the match lies in it (character offsets in the
    snippet). Text whose lowercasing changes its words is cut from its lowercased form."""
    from scoring.overlap.ngrams import words

    spans = [m.span() for m in WORD.finditer(text)]
    if len(spans) != len(words(text)):
        text = text.lower()
        spans = [m.span() for m in WORD.finditer(text)]
    if not spans or word_start >= len(spans):
        return {"snippet": "", "match_start": 0, "match_end": 0}
    word_end = min(max(word_end, word_start + 1), len(spans))
    lo = spans[max(0, word_start - context)][0]
    hi = spans[min(len(spans), word_end + context) - 1][1]
    return {"snippet": text[lo:hi], "match_start": spans[word_start][0] - lo,
            "match_end": spans[word_end - 1][1] - lo}
