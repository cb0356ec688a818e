"""Stack Exchange questions from a data dump's Posts.xml: a site directory, a Posts.xml file, a per-site .7z, a
directory of those, or the same under an s3:// prefix.

What a document is: one question (PostTypeId=1). Its `text` is the question body (the latest revision: dumps carry
no history) with HTML stripped; answers are never part of it. `title` is the question title.

Streaming, in two passes over the XML, with memory that does not grow with the text:
1. answers only: the latest answer CreationDate per question id, kept in a flat uint32 array of whole epoch
   seconds indexed by post id (4 bytes per post id: ~20 MB for a 5M-post site). A question cannot be judged
   before every answer has been seen, and answers can sit anywhere in the file, hence the first pass.
2. questions: each <row> is parsed, turned into a Document and freed (a plain Posts.xml line by line, so that a
   broken row is quarantined alone; a .7z stream with lxml iterparse, the element and its earlier siblings
   cleared, and a dump that fails to decompress or parse becomes one `broken_dump` quarantine document).
A .7z is decompressed twice, streamed through a bounded queue from py7zr's writer callback (nothing is extracted
to disk; an s3:// .7z is first copied to a temporary file because 7z needs to seek). A plain Posts.xml larger than
`range_bytes` is instead cut into byte ranges that parse in parallel, with the answers' pass as a partitioned
aggregation (ranges.py). Reading the files: dump.py; what a post becomes: posts.py.

Thread activity (`meta.activity_at`, which the cutoff stage uses for members): the latest of the question's
CreationDate, its LastEditDate and every answer's CreationDate. Why these: the body in the dump is the latest
revision, so an edit after the cutoff means the text may not be what existed before it; a later answer means the
thread was still active (StackMIA's rule: the post and all its answers dated before the cutoff). LastActivityDate
is recorded in meta but not used: it also moves for answer edits and community bumps that change neither.
Dates are UTC: the dump writes them without a zone.

Flags: `meta.has_code` (<pre> or <code> in the body), `meta.has_formula` (MathJax markup or TeX in the text).
Tags parse in both dump formats, `<a><b>` (older dumps) and `|a|b|` (2024 on).

source_cfg keys: `path` (required), `site` (the domain, e.g. "coffee.stackexchange.com", when the path does not
name it), `dump_date` (the dump's release date, recorded in the manifest), `requester_pays`, `endpoint_url`,
`region` (for s3://), `range_bytes` (the byte-range size for parallel parsing; default 64 MiB), `staging` (a
directory or s3:// prefix every worker can read: a .7z is decompressed there once, then split into ranges; the Ray
job uses a temporary one of the run on a single-node cluster).
"""
from __future__ import annotations

import os
import posixpath
from typing import Any, Iterator, Mapping

from curation.document import Deferred, Document
from curation.io import storage
from curation.sources.stackexchange.dump import iter_post_rows, open_posts
from curation.sources.stackexchange.posts import latest_answer_times, question_document, QUESTION



TEXT_ON_REQUEST = True  # iter_documents(..., deferred=True) yields Deferred questions (curation/sources/__init__.py)


# ---------------------------------------------------------------- which files are sites

def is_posts_file(path: str) -> bool:
    """Posts.xml, or a .7z that holds it: a whole-site archive (coffee.stackexchange.com.7z) or Stack Overflow's
    per-table stackoverflow.com-Posts.7z (its Users/Comments/... siblings are skipped)."""
    name = storage.basename(path).lower()
    if name == "posts.xml":
        return True
    return name.endswith(".7z") and ("-" not in name or name.endswith("-posts.7z"))


def site_files(path: str, **opts: Any) -> list[str]:
    files = [f for f in storage.list_files(path, **opts) if is_posts_file(f)]
    if not files:
        raise FileNotFoundError(f"no Posts.xml or site .7z under {path}")
    return files


def shards(source_cfg: Mapping[str, Any]) -> list[dict]:
    """One shard per site file, and a plain Posts.xml larger than `range_bytes` (default 64 MiB) cut into byte
    ranges that parse in parallel (curation/sources/stackexchange/ranges.py); a .7z stays one shard (it streams)."""
    from curation.sources.stackexchange import ranges as se_ranges

    opts = storage.s3_options(source_cfg)
    range_bytes = int(source_cfg.get("range_bytes") or se_ranges.RANGE_BYTES)
    staging = source_cfg.get("staging")
    out = []
    for f in site_files(source_cfg["path"], **opts):
        domain = site_domain(f, source_cfg.get("site"))
        xml = f
        if f.lower().endswith(".7z") and staging:  # decompressed once, then split like a plain Posts.xml
            try:
                xml = se_ranges.stage_archive(f, staging, domain, **opts)
            except Exception as exc:  # noqa: BLE001 - a truncated or corrupt archive: one quarantine document
                out.append({**source_cfg, "path": f, "site": domain,
                            "broken_dump": f"{type(exc).__name__}: {exc}"[:500]})
                continue
        ranges = se_ranges.byte_ranges(storage.file_size(xml, **opts), range_bytes) \
            if xml.lower().endswith(".xml") else [None]
        if len(ranges) == 1 and xml == f:
            out.append({**source_cfg, "path": f})
            continue
        out += [{**source_cfg, "path": xml, "site": domain, "byte_range": r, "site_key": xml} for r in ranges]
    return out


def aggregations(shards_: list[dict]) -> list[dict]:
    """The answers' pass of every range-split site: {key, items (the site's range shards), partitions}. The job
    runs `aggregation_scan` per item and `aggregation_merge` per partition (se_ranges.py), and hands each range
    shard its site's partition arrays."""
    from curation.sources.stackexchange import ranges as se_ranges

    by_site: dict[str, list[dict]] = {}
    for shard in shards_:
        if "byte_range" in shard:
            by_site.setdefault(shard["site_key"], []).append(shard)
    return [{"key": key, "items": items, "partitions": se_ranges.partitions_for(len(items))}
            for key, items in by_site.items()]


def aggregation_scan(item: Mapping[str, Any], partitions: int):
    from curation.sources.stackexchange.ranges import scan_answers

    return scan_answers(item, partitions)


def aggregation_merge(*pieces):
    """One partition's pieces; with one partition a scan's result is its whole list of one array (Ray returns
    the value itself when num_returns is 1), hence the flattening."""
    from curation.sources.stackexchange.ranges import merge_answers

    return merge_answers(*[a for piece in pieces for a in (piece if isinstance(piece, (list, tuple)) else [piece])])


def site_domain(path: str, configured: str | None = None) -> str:
    """coffee.stackexchange.com from .../coffee.stackexchange.com/Posts.xml or .../coffee.stackexchange.com.7z."""
    if configured:
        return configured
    name = storage.basename(path)
    if name.lower() == "posts.xml":
        parent = posixpath.dirname(path.rstrip("/")) if storage.is_s3(path) else _local_parent(path)
        name = storage.basename(parent)
    elif name.lower().endswith(".7z"):
        name = name[:-3]
        if name.lower().endswith("-posts"):
            name = name[: -len("-posts")]
    return name if "." in name else f"{name}.stackexchange.com"


def _local_parent(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))


# ---------------------------------------------------------------- one site, as the Source reads it

def iter_site(path: str, domain: str | None = None, *, deferred: bool = False,
              **opts: Any) -> Iterator[Document | Deferred]:
    """Every question of one site file, in file order (`deferred`: posts.question_document)."""
    from curation.sources.stackexchange import ranges as se_ranges

    domain = site_domain(path, domain)
    if not path.lower().endswith(".7z"):  # a plain Posts.xml: line by line, so a broken row costs only itself
        whole = {**opts, "path": path, "site": domain, "byte_range": [0, storage.file_size(path, **opts)]}
        lookup = se_ranges.AnswerLookup([se_ranges.merge_answers(*se_ranges.scan_answers(whole, 1))])
        yield from se_ranges.iter_range_documents(whole, lookup, deferred)
        return
    try:  # the first pass reads the whole file: a truncated or corrupt dump fails here, before any document
        with open_posts(path, **opts) as stream:
            latest = latest_answer_times(iter_post_rows(stream))
    except Exception as exc:  # noqa: BLE001 - py7zr, lzma and lxml raise their own types
        yield se_ranges.broken_dump_document(path, domain, f"{type(exc).__name__}: {exc}"[:500])
        return
    with open_posts(path, **opts) as stream:
        for row in iter_post_rows(stream):
            if row.get("PostTypeId") == QUESTION:
                yield question_document(row, domain, latest.get(int(row["Id"])), deferred)


def iter_documents(source_cfg: Mapping[str, Any], aggregated=None,
                   deferred: bool = False) -> Iterator[Document | Deferred]:
    """Every question of the configured sites; for a range shard, the questions of its range, looking answers up
    in `aggregated` (its site's partition arrays; computed here by scanning the whole file when not given). With
    `deferred`, questions come as Deferred documents (TEXT_ON_REQUEST, curation/sources/__init__.py)."""
    from curation.sources.stackexchange import ranges as se_ranges

    opts = storage.s3_options(source_cfg)
    if source_cfg.get("broken_dump"):
        yield se_ranges.broken_dump_document(source_cfg["path"], source_cfg["site"], source_cfg["broken_dump"])
        return
    if "byte_range" in source_cfg:
        if aggregated is None:
            whole = {**source_cfg, "byte_range": [0, storage.file_size(source_cfg["path"], **opts)]}
            aggregated = [se_ranges.merge_answers(*se_ranges.scan_answers(whole, 1))]
        yield from se_ranges.iter_range_documents(source_cfg, se_ranges.AnswerLookup(aggregated), deferred)
        return
    for path in site_files(source_cfg["path"], **opts):
        yield from iter_site(path, source_cfg.get("site"), deferred=deferred, **opts)


def snapshot(source_cfg: Mapping[str, Any]) -> dict:
    """Dump name and date, and each site file's size and md5 (ETag on S3), for the release manifest."""
    opts = storage.s3_options(source_cfg)
    files = site_files(source_cfg["path"], **opts)
    domains = [site_domain(f, source_cfg.get("site")) for f in files]
    return {
        "kind": "stackexchange",
        "path": str(source_cfg["path"]),
        "dump_name": domains[0] if len(domains) == 1 else storage.basename(source_cfg["path"]),
        "dump_date": str(source_cfg["dump_date"]) if source_cfg.get("dump_date") else None,
        "sites": domains,
        "files": [storage.describe(f, **opts) for f in files],
        "activity_rule": "max(question CreationDate, question LastEditDate, answers' CreationDate)",
    }
