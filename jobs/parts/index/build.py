"""`tidemark index-corpus`: a suffix-array index of a corpus's words, in the format of the field's tool, infini-gram
(Liu et al. 2024; its `infini-gram` package's engine can read it). Tidemark's queries are batched binary searches
of the suffix arrays in numpy (jobs/parts/index/search.py: `overlap --index` and `trace`).

    driver: one part per run of consecutive corpus files of about `part_bytes` together (curation/io/
            corpus_files.py): every query searches every shard, so fewer, larger shards answer faster
    worker (a Ray task per part, through the one part loop: resume, replanning, stall bound): stream the files'
            records, quarantine the bad ones, turn each document into 32-bit word ids (the words of `tidemark
            overlap`: lowercased `\\w+`; scoring/overlap/ngrams.word_ids), and write index shards of at most
            `max_shard_tokens` tokens, each five files, under IDX/shards/part-NNNNN/:
                tokenized.KKK  a 0xFFFFFFFF separator before every document, then its word ids (u32, little-endian)
                offset.KKK     the byte offset of each document (u64)
                metadata.KKK   one JSON line per document: {"id": ..., "file": its corpus file, "shard": KKK,
                               "n": its ordinal in the shard}
                metaoff.KKK    the byte offset of each metadata line (u64)
                table.KKK      the suffix array over token positions, ceil(log2(bytes)/8)-byte pointers
            (the layout infini-gram's indexer writes and its engine reads), and beside them the documents' text,
            which word ids cannot give back, for `tidemark trace`'s snippets (jobs/parts/index/reader.py):
                text.KKK       zstd frames, each TEXT_BLOCK consecutive documents' texts (pack_texts)
                textpos.KKK    the byte offset of each frame, and the end of the last (u64) The table is built with libdivsufsort
            (the `pydivsufsort` wheel) on the tokenized bytes, keeping token-aligned suffixes: the same table as the
            package's own indexer, which needs a Hugging Face tokenizer download and cannot build 32-bit tables in
            a few GB of memory. Built in a local temporary directory, then copied to IDX (local or s3://).
    driver: commit each part's marker (IDX/_parts/), then IDX/index.json and `_SUCCESS` last.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

SHARDS = "shards"
MAX_SHARD_TOKENS = 1 << 28  # 1 GiB of u32 tokens: libdivsufsort needs ~9x that while it sorts
BATCH_DOCS = 256
TEXT_BLOCK = 16  # documents per compressed frame of the text store: a snippet decompresses one frame (~50 KB)
TEXT_FILES = ("text", "textpos")  # not words the engine looks for (FORBIDDEN)
TASK_CPUS = 1.0
NOT_ISOLATED = ("a bad corpus record is quarantined by the reader; a failing part is a worker or node failure, "
                "which a rerun resumes")
FORBIDDEN = ("tokenized", "table", "offset", "metadata", "metaoff", "unigram")  # the engine finds files by these


def require_index_packages() -> None:
    """A clear error where the optional index packages are missing (they are the `index` extra)."""
    import importlib.util

    missing = [m for m in ("pydivsufsort", "bm25s") if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"{', '.join(missing)} not installed: pip install 'tidemark[index]' (libdivsufsort, bm25s)")


def check_index_path(path: str) -> None:
    """infini-gram's engine recognises a file by a word in its *whole path*: a directory named like one would
    make it misread the index (or crash)."""
    bad = [w for w in FORBIDDEN if w in str(path)]
    if bad:
        raise ValueError(f"{path}: an index path may not contain {bad[0]!r} (infini-gram's engine finds its files "
                         "by that word anywhere in the path); choose another directory name")


@dataclass(frozen=True)
class IndexPart:
    index: int
    paths: tuple[str, ...]
    root: str
    bytes: int


def plan_index_parts(corpus: str, opts: Mapping[str, Any], part_bytes: int) -> list[IndexPart]:
    """Consecutive corpus files grouped into parts of about `part_bytes` (a file larger than that is a part)."""
    from jobs.parts.overlap.corpus_scan import plan_corpus_parts

    groups: list[list] = []
    for f in plan_corpus_parts(corpus, opts):
        if not groups or sum(x.bytes for x in groups[-1]) + f.bytes > part_bytes:
            groups.append([])
        groups[-1].append(f)
    return [IndexPart(k, tuple(f.path for f in g), g[0].root, sum(f.bytes for f in g)) for k, g in enumerate(groups)]


def index_part_digest(part: IndexPart, opts: Mapping[str, Any]) -> str:
    from jobs.kit.identity import json_digest
    from jobs.parts.overlap.corpus_scan import CorpusPart, part_digest

    return json_digest([asdict(part)] + [part_digest(CorpusPart(part.index, f, part.root, 0), opts)
                                         for f in part.paths])


def part_dir(index: int) -> str:
    from jobs.plane.part_store import part_name

    return f"{SHARDS}/{part_name(index)}"


class _ShardWriter:
    """One index shard being written: the four data files, then its table."""

    def __init__(self, where: Path, k: int):
        self.where, self.k = where, k
        self.files = {name: open(where / f"{name}.{k:03d}", "wb") for name in ("tokenized", "offset", "metadata",
                                                                              "metaoff", *TEXT_FILES)}
        self.pos = self.meta_pos = self.tokens = self.documents = 0
        self.block: list[str] = []
        self.text_pos = 0

    def add(self, doc_id: str, ids: np.ndarray, text: str | None = None, file: str | None = None) -> None:
        from scoring.overlap.ngrams import SEPARATOR_ID

        data = np.concatenate([[SEPARATOR_ID], ids]).astype("<u4").tobytes()
        meta = (json.dumps({"id": doc_id, "file": file, "shard": self.k, "n": self.documents}) + "\n"
                ).encode("utf-8")
        self.block.append(text or "")
        if len(self.block) >= TEXT_BLOCK:
            self._flush_text()
        self.files["tokenized"].write(data)
        self.files["offset"].write(np.uint64(self.pos).tobytes())
        self.files["metadata"].write(meta)
        self.files["metaoff"].write(np.uint64(self.meta_pos).tobytes())
        self.pos += len(data)
        self.meta_pos += len(meta)
        self.tokens += ids.size + 1
        self.documents += 1

    def _flush_text(self) -> None:
        import zstandard

        if not self.block:
            return
        frame = zstandard.ZstdCompressor(level=3).compress(pack_texts(self.block))
        self.files["textpos"].write(np.uint64(self.text_pos).tobytes())
        self.files["text"].write(frame)
        self.text_pos += len(frame)
        self.block = []

    def close(self) -> None:
        self._flush_text()
        self.files["textpos"].write(np.uint64(self.text_pos).tobytes())
        for fh in self.files.values():
            fh.close()
        if not self.documents:  # an empty shard would divide by zero in the engine: leave none
            for name in self.files:
                (self.where / f"{name}.{self.k:03d}").unlink()
            return
        build_table(self.where / f"tokenized.{self.k:03d}", self.where / f"table.{self.k:03d}")


def pack_texts(texts: list[str]) -> bytes:
    """Texts as one frame's bytes: their count and UTF-8 byte lengths (u32 little-endian), then the texts."""
    raw = [t.encode("utf-8", "surrogatepass") for t in texts]
    return np.array([len(raw), *map(len, raw)], dtype="<u4").tobytes() + b"".join(raw)


def unpack_text(frame: bytes, k: int) -> str:
    """The k-th text of a frame made by pack_texts."""
    count = int(np.frombuffer(frame, dtype="<u4", count=1)[0])
    lengths = np.frombuffer(frame, dtype="<u4", count=count + 1, offset=0)[1:].astype(np.int64)
    start = 4 * (count + 1) + int(lengths[:k].sum())
    return frame[start:start + int(lengths[k])].decode("utf-8", "surrogatepass")


def build_table(tokenized: Path, table: Path, width: int = 4) -> None:
    """The suffix array of a tokenized file over token-aligned positions: byte suffixes sorted by libdivsufsort,
    those at multiples of the token width kept, written with ceil(log2(bytes)/8)-byte little-endian pointers."""
    from pydivsufsort import divsufsort

    data = np.fromfile(tokenized, dtype=np.uint8)
    ratio = max(1, int(np.ceil(np.log2(max(2, data.size)) / 8)))
    sa = divsufsort(data)
    sa = sa[sa % width == 0].astype(np.uint64)
    sa.view(np.uint8).reshape(-1, 8)[:, :ratio].tofile(table)


def index_part(part: dict, settings: Mapping[str, Any], dest_uri: str) -> dict:
    """One corpus file → its index shards under IDX/shards/part-NNNNN/ (a Ray task); returns the part's counts."""
    from curation.io import storage
    from curation.io.corpus_files import STAGE, read_records
    from curation.io.ledger import quarantine_record, quarantine_table, reason_counts
    from curation.io.outputs import Location
    from jobs.plane.part_store import part_name
    from scoring.overlap.ngrams import batch_words, word_ids

    t0 = time.perf_counter()
    p = IndexPart(**{**part, "paths": tuple(part["paths"])})
    dest = Location(dest_uri)
    bad, shards = [], []
    with tempfile.TemporaryDirectory(prefix="tidemark-index-") as tmp:
        where = Path(tmp)
        writer = _ShardWriter(where, 0)

        def flush(texts: list[str], ids: list[str], files: list[str]) -> None:
            nonlocal writer
            hashes, counts = batch_words(texts)
            for doc_id, doc_ids, text, file in zip(ids, np.split(word_ids(hashes), np.cumsum(counts)[:-1]), texts,
                                                   files):
                if writer.tokens and writer.tokens + doc_ids.size + 1 > settings["max_shard_tokens"]:
                    writer.close()
                    shards.append(writer)
                    writer = _ShardWriter(where, len(shards))
                writer.add(doc_id, doc_ids, text, file)

        texts: list[str] = []
        ids: list[str] = []
        files: list[str] = []
        for path in p.paths:
            rel = storage.relative(path, p.root) if path != p.root else storage.basename(path)
            for rid, text, problem in read_records(path, p.root, text_field=settings["text_field"],
                                                   id_field=settings["id_field"], opts=settings["opts"]):
                if problem:
                    bad.append(quarantine_record(rid, STAGE, *problem))
                    continue
                texts.append(text)
                ids.append(rid)
                files.append(rel)
                if len(texts) >= BATCH_DOCS:
                    flush(texts, ids, files)
                    texts, ids, files = [], [], []
        if texts:
            flush(texts, ids, files)
        writer.close()
        shards.append(writer)
        dest.delete_tree(part_dir(p.index))
        index_bytes = 0
        for f in sorted(os.listdir(where)):
            index_bytes += (where / f).stat().st_size
            dest.upload_file(where / f, f"{part_dir(p.index)}/{f}")
    dest.write_parquet(f"quarantine.parquet/{part_name(p.index)}.parquet", quarantine_table(bad))
    documents = sum(s.documents for s in shards)
    return {"index": p.index, "records": documents + len(bad), "documents": documents, "quarantined": len(bad),
            "reasons": reason_counts(bad), "bytes": p.bytes, "tokens": sum(s.tokens for s in shards),
            "shards": len(shards), "index_bytes": index_bytes, "build_s": round(time.perf_counter() - t0, 3)}


def run_pool(parts, settings: Mapping[str, Any], dest_uri: str, progress: bool) -> Iterator[dict]:
    """A Ray task per part, results as they finish, under the stall bound (jobs/plane/task_map.watched_tasks)."""
    from jobs.plane.task_map import watched_tasks

    yield from watched_tasks(index_part, [(asdict(p), dict(settings), dest_uri) for p in parts],
                             desc="index parts", num_cpus=TASK_CPUS, progress=progress)
