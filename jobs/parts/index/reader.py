"""Reading a corpus index (jobs/parts/index/build.py), shared by `tidemark overlap --index` and `tidemark trace`:
the index made local (an s3:// index is copied to a cache once: the search memory-maps its files), a part's
shards searched in batches (jobs/parts/index/search.py), where an occurrence lies (document, word offset), and the
documents' text.

An occurrence is a rank in a shard's suffix array. Its document and the word it starts at are read from the
shard's files directly (the table's pointer, the documents' byte offsets).
"""
from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np


def local_index(idx: str, requester_pays: bool = False) -> tuple[Path, dict]:
    """(a local directory holding the index's shards, index.json). Refuses an incomplete index. `requester_pays`:
    an s3:// index in a requester-pays bucket (a shared, published index) is read with RequestPayer=requester."""
    from curation.io.outputs import Location
    from jobs.parts.index.build import SHARDS, check_index_path, require_index_packages

    require_index_packages()
    where = Location(idx, requester_pays=requester_pays)
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
    from jobs.parts.index.build import SHARDS

    return sorted(str(d) for d in (local / SHARDS).iterdir() if any(d.glob("tokenized.*")))


@dataclass(frozen=True)
class Occurrence:
    doc_id: str  # the corpus's own id
    file: str | None  # the corpus file it came from (None in indexes built before the text store)
    shard: int  # the shard file number within its part directory
    n: int  # its ordinal in the shard
    word_offset: int  # where the occurrence starts, in the document's words
    doc_words: int


class PartReader:
    """One index part directory, searched in batches (jobs/parts/index/search.py): the longest match at each of
    many starts, words' and spans' counts, a span's first documents, and the documents' text."""

    def __init__(self, part_dir: str):
        from jobs.parts.index.search import ShardSearch, shard_numbers

        self.dir = Path(part_dir)
        self.shards = [ShardSearch(self.dir, k) for k in shard_numbers(self.dir)]

    def longest_prefix(self, queries: list[np.ndarray]) -> np.ndarray:
        """Per query, its longest prefix that occurs in this part (the best over its shards)."""
        best = np.zeros(len(queries), dtype=np.int64)
        for sh in self.shards:
            np.maximum(best, sh.longest_prefix(queries), out=best)
        return best

    def counts(self, queries: list[np.ndarray]) -> np.ndarray:
        total = np.zeros(len(queries), dtype=np.int64)
        for sh in self.shards:
            total += sh.counts(queries)
        return total

    def span_hits(self, queries: list[np.ndarray], limit: int, max_fetch: int = 1000
                  ) -> list[tuple[int, list[Occurrence]]]:
        """Per query: (its count in this part, its first `limit` documents in corpus order, each with its first
        occurrence). At most `max_fetch` occurrences are read per shard to find them."""
        out: list[tuple[int, list[Occurrence]]] = [(0, []) for _ in queries]
        for sh in self.shards:
            lo, hi = sh.bounds(queries), sh.bounds(queries, upper=True)
            for r in np.flatnonzero(hi > lo):
                cnt, docs = out[r]
                if len(docs) < limit:
                    docs = docs + self._documents(sh, int(lo[r]), int(min(hi[r], lo[r] + max_fetch)),
                                                  limit - len(docs))
                out[r] = (cnt + int(hi[r] - lo[r]), docs)
        return out

    @staticmethod
    def _documents(sh, lo: int, hi: int, limit: int) -> list[Occurrence]:
        first: dict[int, tuple[int, int]] = {}
        for n, offset, words in sh.occurrences(lo, hi):
            first.setdefault(n, (offset, words))
        out = []
        for n, (offset, words) in list(first.items())[:limit]:
            meta = sh.metadata(n)
            out.append(Occurrence(str(meta["id"]), meta.get("file"), sh.k, n, offset, words))
        return out

    def text(self, shard: int, n: int) -> str | None:
        """The document's text from the index's text store (None where the index has none)."""
        return _document_text(str(self.dir), shard, n)


@lru_cache(maxsize=64)
def _text_positions(where: str, k: int) -> np.ndarray | None:
    path = Path(where) / f"textpos.{k:03d}"
    return np.fromfile(path, dtype="<u8") if path.exists() else None


@lru_cache(maxsize=64)
def _text_frame(where: str, k: int, block: int) -> bytes:
    import zstandard

    pos = _text_positions(where, k)
    with open(Path(where) / f"text.{k:03d}", "rb") as fh:
        fh.seek(int(pos[block]))
        frame = fh.read(int(pos[block + 1] - pos[block]))
    return zstandard.ZstdDecompressor().decompress(frame)


@lru_cache(maxsize=1024)
def _document_text(where: str, k: int, n: int) -> str | None:
    from jobs.parts.index.build import TEXT_BLOCK, unpack_text

    if _text_positions(where, k) is None:
        return None
    return unpack_text(_text_frame(where, k, n // TEXT_BLOCK), n % TEXT_BLOCK)


def snippet(text: str, word_start: int, word_end: int, context: int) -> dict:
    """The passage of `text` from `context` words before word `word_start` to `context` words after `word_end`
    (words as `tidemark overlap` counts them), with where the match lies in it (character offsets in the
    snippet). Only the words up to the passage's end are found; text whose lowercasing changes its words is cut
    from its lowercased form."""
    from scoring.overlap.ngrams import word_spans

    word_end = max(word_end, word_start + 1)
    spans = word_spans(text, word_end + context)
    if spans is None:
        text = text.lower()
        spans = word_spans(text, word_end + context) or []
    if word_start >= len(spans):
        return {"snippet": "", "match_start": 0, "match_end": 0}
    word_end = min(word_end, len(spans))
    lo = spans[max(0, word_start - context)][0]
    hi = spans[-1][1]
    return {"snippet": text[lo:hi], "match_start": spans[word_start][0] - lo,
            "match_end": spans[word_end - 1][1] - lo}
