"""Wikipedia articles from two multistream dumps, dated by the dumps (the WikiMIA recipe at scale).

    members      namespace-0, non-redirect pages of `dump_before` (a dump taken before the model's cutoff); the text
                 is the revision in that dump, so it has no later edits; created_at = that revision's timestamp
                 (the page existed then; its creation is no later).
    non-members  namespace-0, non-redirect pages of `dump_after` whose page id is larger than every page id in
                 `dump_before`'s index; created_at = dump_before's date (the page was created after it).

Why an id threshold rather than "ids missing from the before dump": MediaWiki allocates page ids in creation order,
so an id above the before dump's largest was created after that dump. The set difference would also admit older
pages that were absent from the before dump only because they sat in another namespace then (a draft moved to
articles) or were deleted and restored, i.e. pages whose text may well be in the training data. The threshold is
one number where the set difference is a join over every id of both dumps.

Because non-members are only known to be created after dump_before's date, `cutoffs.nonmember_after` must not be
later than it (checked when planning). Members are restricted to the member label (`meta.label_allowed`) and
non-members to the non-member label, so the cutoff stage can drop a page whose dump dating contradicts the window
(a before-dump page last edited after member_before) but never relabel it.

Parallelism: planning (`shards`) reads both indexes once, streaming, and groups the bz2 streams that hold
candidate pages into shards of ~`pages_per_shard` pages; a worker decompresses its shard's streams one by one
(`multistream.read_stream`, a ranged read each) and parses their pages with lxml and mwparserfromhell
(wikitext.py). Streams of the after dump that hold no page above the threshold are never read.

Every candidate page the index lists leaves as a document or a quarantine document (stage `source.wikipedia_dump`):
`redirect`, `skip_template` (disambiguation pages and the like, `skip_templates`), `wikitext_unparsable`,
`wikitext_residue`, `empty_text`, `broken_page_xml`, `stream_unreadable` (a corrupt or truncated bz2 stream: one
row per page the index lists in it) and `missing_from_stream` (the index lists more candidate pages than the
stream holds). Pages of other namespaces are not candidates: planning counts them from the index titles and never
reads them as documents.

source_cfg keys: `dump_before` and `dump_after`, each {path, index (default: the Wikimedia name next to the dump),
date (default: the YYYYMMDD in the file name)}; `lang` ("en"); `pages_per_shard` (5,000); `skip_templates`; the
S3 options of storage.py.
"""
from __future__ import annotations

import re
from datetime import date, datetime, timezone
from typing import Any, Iterator, Mapping
from urllib.parse import quote

from curation.document import Document, utc
from curation.sources.wikipedia import multistream
from curation.io import storage
from curation.sources.wikipedia.wikitext import render

STAGE = "source.wikipedia_dump"
PAGES_PER_SHARD = 5_000
DEFAULT_SKIP_TEMPLATES = ("disambiguation", "disambig", "dab", "hndis", "geodis", "set index article",
                          "surname", "given name")
ROLES = ("dump_before", "dump_after")
_DUMP_DATE = re.compile(r"(?<!\d)(\d{4})(\d{2})(\d{2})(?!\d)")


# ---------------------------------------------------------------- configuration

def index_path(dump_path: str) -> str:
    """Wikimedia's name for a multistream dump's index: ...-multistream.xml.bz2 -> ...-multistream-index.txt.bz2."""
    if not str(dump_path).endswith(".xml.bz2"):
        raise ValueError(f"{dump_path}: set the index path (expected a *.xml.bz2 dump to derive it from)")
    return str(dump_path)[:-len(".xml.bz2")] + "-index.txt.bz2"


def dump_date(spec: Mapping[str, Any]) -> datetime:
    value = spec.get("date")
    if value in (None, ""):
        m = _DUMP_DATE.search(storage.basename(str(spec["path"])))
        if not m:
            raise ValueError(f"{spec['path']}: no YYYYMMDD in the file name; set the dump's `date`")
        value = date(int(m[1]), int(m[2]), int(m[3]))
    return utc(value)  # a YAML date or a date: its midnight UTC


def dumps(cfg: Mapping[str, Any]) -> dict[str, dict]:
    """{role: {path, index, date}} with defaults filled and the dates checked against each other and the cutoffs."""
    out = {}
    for role in ROLES:
        spec = cfg.get(role)
        if not isinstance(spec, Mapping) or not spec.get("path"):
            raise ValueError(f"wikipedia_dump needs source.{role}.path (a pages-articles-multistream.xml.bz2)")
        out[role] = {"path": str(spec["path"]), "index": str(spec.get("index") or index_path(spec["path"])),
                     "date": dump_date(spec)}
    before, after = out["dump_before"]["date"], out["dump_after"]["date"]
    if after <= before:
        raise ValueError(f"dump_after ({after.date()}) must be taken after dump_before ({before.date()})")
    nonmember_after = (cfg.get("cutoffs") or {}).get("nonmember_after")
    if nonmember_after and utc(nonmember_after) > before:
        raise ValueError(
            f"non-members are pages new since dump_before ({before.date()}), so they are only known to be created "
            f"after {before.date()}; cutoffs.nonmember_after={nonmember_after} is later, which would drop them all. "
            f"Set cutoffs.nonmember_after <= {before.date()}, or take dump_before on or after {nonmember_after}.")
    return out


# ---------------------------------------------------------------- planning: indexes -> shards of streams

def _streams(index: str, prefixes: Mapping[str, int], min_id: int, **opts: Any):
    """[offset, length, candidates, first id, last id] per stream of the index (length None for the last), where
    candidates are namespace-0 pages with id > min_id; plus the largest page id and the pages per namespace."""
    streams: list[list] = []
    largest, by_ns = 0, {}
    for line in multistream.open_index(index, **opts):
        offset, page_id, title = multistream.parse_index_line(line)
        largest = max(largest, page_id)
        ns = multistream.namespace_of(title, prefixes)
        by_ns[ns] = by_ns.get(ns, 0) + 1
        if not streams or streams[-1][0] != offset:
            if streams:
                streams[-1][1] = offset - streams[-1][0]
            streams.append([offset, None, 0, None, None])
        if ns == 0 and page_id > min_id:
            s = streams[-1]
            s[2] += 1
            s[3] = page_id if s[3] is None else min(s[3], page_id)
            s[4] = page_id if s[4] is None else max(s[4], page_id)
    return streams, largest, by_ns


def _namespaces(dump: str, first_offset: int, **opts: Any) -> dict[int, str]:
    with storage.open_binary(dump, 0, **opts) as fh:
        head = multistream.read_stream(fh, first_offset or None)
    return multistream.siteinfo(head)["namespaces"]


def plan(cfg: Mapping[str, Any]) -> dict:
    """Both dumps' candidate streams and the facts the manifest records (threshold, pages per namespace)."""
    opts = storage.s3_options(cfg)
    specs = dumps(cfg)
    out: dict[str, Any] = {"dumps": {}}
    threshold = -1
    for role in ROLES:
        spec = specs[role]
        first_offset = next((multistream.parse_index_line(line)[0] for line in
                             multistream.open_index(spec["index"], **opts)), 0)
        prefixes = multistream.namespace_prefixes(_namespaces(spec["path"], first_offset, **opts))
        streams, largest, by_ns = _streams(spec["index"], prefixes, threshold, **opts)
        if role == "dump_before":
            threshold = largest
        kept = [s for s in streams if s[2]]
        out["dumps"][role] = {**spec, "streams": kept, "streams_in_index": len(streams),
                              "pages_in_index": sum(by_ns.values()), "pages_by_namespace": by_ns,
                              "candidates": sum(s[2] for s in kept), "largest_page_id": largest}
    out["new_after_page_id"] = threshold
    return out


def shards(source_cfg: Mapping[str, Any]) -> list[dict]:
    """Runs of consecutive candidate streams, ~pages_per_shard candidate pages each, per dump."""
    cfg = dict(source_cfg)
    planned = plan(cfg)
    size = int(cfg.get("pages_per_shard") or PAGES_PER_SHARD)
    out = []
    for role in ROLES:
        dump = planned["dumps"][role]
        run: list[list] = []
        pages = 0
        for stream in dump["streams"]:
            run.append(stream)
            pages += stream[2]
            if pages >= size:
                out.append(_shard(cfg, role, dump, planned, run))
                run, pages = [], 0
        if run:
            out.append(_shard(cfg, role, dump, planned, run))
    return out


def _shard(cfg: Mapping[str, Any], role: str, dump: Mapping[str, Any], planned: Mapping[str, Any],
           streams: list) -> dict:
    keep = {k: v for k, v in cfg.items() if k not in ROLES}
    return {**keep, "shard": {"role": role, "path": dump["path"], "date": dump["date"].isoformat(),
                              "before_date": planned["dumps"]["dump_before"]["date"].isoformat(),
                              "min_id": planned["new_after_page_id"] if role == "dump_after" else -1,
                              "streams": [list(s) for s in streams]}}


# ---------------------------------------------------------------- parsing a shard

def _url(lang: str, title: str) -> str:
    return f"https://{lang}.wikipedia.org/wiki/{quote(title.replace(' ', '_'), safe='()_,:-.')}"


def _quarantine(doc_id: str, title: str, url: str, reason: str, detail: str,
                created_at: datetime | None = None) -> Document:
    return Document(id=doc_id, source="wikipedia", title=title, text="",
                    created_at=created_at or datetime(1970, 1, 1, tzinfo=timezone.utc), url=url,
                    meta={"quarantine": {"stage": STAGE, "reason": reason, "detail": detail[:500]}})


def _page_elements(data: bytes):
    """(element or None, raw bytes) per <page> of a decompressed stream. A stream whose XML does not parse as a
    whole is split at </page> and its pages parsed one by one, so one broken page costs only itself."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True, huge_tree=True)
    body = data.strip()
    if body.endswith(b"</mediawiki>"):  # the closing tag shares the last stream in some dumps
        body = body[:-len(b"</mediawiki>")]
    try:
        return [(page, None) for page in etree.fromstring(b"<pages>" + body + b"</pages>", parser)
                .iterfind("page")]
    except etree.XMLSyntaxError:
        pass
    out = []
    for piece in body.split(b"</page>"):
        start = piece.find(b"<page>")
        if start < 0:
            if piece.strip():
                out.append((None, piece))
            continue
        raw = piece[start:] + b"</page>"
        try:
            out.append((etree.fromstring(raw, parser), raw))
        except etree.XMLSyntaxError:
            out.append((None, raw))
    return out


def _raw_page_id(raw: bytes) -> str | None:
    m = re.search(rb"<id>(\d+)</id>", raw)
    return m[1].decode() if m else None


def iter_shard(cfg: Mapping[str, Any]) -> Iterator[Document]:
    shard = cfg["shard"]
    lang = cfg.get("lang", "en")
    role, min_id = shard["role"], int(shard["min_id"])
    skip = {t.lower() for t in cfg.get("skip_templates", DEFAULT_SKIP_TEMPLATES)}
    opts = storage.s3_options(cfg)
    dump_name = storage.basename(shard["path"])
    where = f"{role} ({dump_name})"
    for offset, length, expected, first_id, last_id in shard["streams"]:
        lost = f"{where}: bz2 stream at byte {offset}, which the index lists with {expected} candidate page(s), " \
               f"ids {first_id}..{last_id}"
        try:
            with storage.open_binary(shard["path"], offset, **opts) as fh:
                data = multistream.read_stream(fh, length)
        except (multistream.StreamError, OSError) as exc:
            for k in range(expected):
                yield _quarantine(f"wikipedia:{lang}:{role}@{offset}#{k}", "", "", "stream_unreadable",
                                  f"{lost}: {exc}")
            continue
        found = 0
        for n, (page, raw) in enumerate(_page_elements(data)):
            if page is None:
                page_id = _raw_page_id(raw)
                found += 1
                doc_id = f"wikipedia:{lang}:{page_id}" if page_id else f"wikipedia:{lang}:{role}@{offset}#broken{n}"
                yield _quarantine(doc_id, "", "", "broken_page_xml", f"{where}: stream at byte {offset}: {raw[:200]!r}")
                continue
            if page.findtext("ns") != "0" or int(page.findtext("id") or -1) <= min_id:
                continue  # not a candidate: planning counted it from the index and never expects it
            found += 1
            yield _page_document(page, lang, shard, skip, where)
        for k in range(max(0, expected - found)):
            yield _quarantine(f"wikipedia:{lang}:{role}@{offset}#missing{k}", "", "", "missing_from_stream",
                              f"{lost}: {found} found")


def _page_document(page, lang: str, shard: Mapping[str, Any], skip: set[str], where: str) -> Document:
    """A candidate page's document or quarantine document. created_at: a member's revision time (the page existed
    then), a non-member's lower bound (the before dump's date: it was created after)."""
    page_id, title = int(page.findtext("id")), page.findtext("title") or ""
    doc_id, url = f"wikipedia:{lang}:{page_id}", _url(lang, title)
    rev = page.find("revision")
    stamp = utc(rev.findtext("timestamp")) if rev is not None and rev.findtext("timestamp") else None
    member = shard["role"] == "dump_before"
    created = stamp if member else utc(shard["before_date"])
    if page.find("redirect") is not None:
        return _quarantine(doc_id, title, url, "redirect", f"{where}: redirect to {page.find('redirect').get('title')}",
                           created)
    if rev is None or stamp is None:
        return _quarantine(doc_id, title, url, "broken_page_xml", f"{where}: page without a dated revision")
    text, reason, detail, dropped = render(rev.findtext("text") or "", skip)
    if reason:
        return _quarantine(doc_id, title, url, reason, f"{where}: {detail}", created)
    revid = rev.findtext("id")
    return Document(
        id=doc_id, source="wikipedia", title=title, text=text, created_at=created, url=url,
        meta={"pageid": page_id, "lang": lang, "text_revid": int(revid) if revid else None,
              "text_timestamp": stamp.isoformat(), "dump": storage.basename(shard["path"]),
              "dump_date": shard["date"], "dating": "in_dump_before" if member else "new_since_dump_before",
              "label_allowed": 1 if member else 0, **({"markup_dropped": dropped} if dropped else {}),
              "revision_url": f"https://{lang}.wikipedia.org/w/index.php?oldid={revid}"})


def iter_documents(source_cfg: Mapping[str, Any]) -> Iterator[Document]:
    """One shard's documents; without a shard (the local runner), every shard's in order."""
    if "shard" in source_cfg:
        yield from iter_shard(source_cfg)
        return
    for shard in shards(source_cfg):
        yield from iter_shard(shard)


def snapshot(source_cfg: Mapping[str, Any]) -> dict:
    """Both dumps (files, dates, the index's pages per namespace) and the dating rule with its threshold. Reads the
    indexes again, streaming (planning ran in a worker); the dumps are described by size and md5 (storage.describe)."""
    cfg = dict(source_cfg)
    facts = plan(cfg)
    record = {"kind": "wikipedia_dump", "lang": cfg.get("lang", "en"),
              "new_after_page_id": facts["new_after_page_id"],
              "dating": "members: namespace-0 non-redirect pages of dump_before, text and created_at from its "
                        "revision; non-members: those of dump_after with page id > new_after_page_id (the largest "
                        "id in dump_before's index), created_at = dump_before's date (a lower bound)",
              "text_extraction": "wikitext -> mwparserfromhell -> curation/sources/wikipedia/wikitext.py (paragraphs and list "
                                 "items before See also/References; templates, refs, tables, files dropped)",
              "skip_templates": sorted({t.lower() for t in cfg.get("skip_templates", DEFAULT_SKIP_TEMPLATES)})}
    opts = storage.s3_options(cfg)
    for role in ROLES:
        d = facts["dumps"][role]
        record[role] = {"date": d["date"].date().isoformat(), "dump": storage.describe(d["path"], **opts),
                        "index": storage.describe(d["index"], **opts), "pages_in_index": d["pages_in_index"],
                        "pages_by_namespace": {str(k): v for k, v in sorted(d["pages_by_namespace"].items())},
                        "streams_in_index": d["streams_in_index"], "streams_read": len(d["streams"]),
                        "candidate_pages": d["candidates"], "largest_page_id": d["largest_page_id"]}
    return record
