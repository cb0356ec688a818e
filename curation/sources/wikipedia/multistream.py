"""The MediaWiki multistream dump format: `*-pages-articles-multistream.xml.bz2` plus its `*-index.txt.bz2`.

The dump is many bz2 streams back to back: the first holds `<mediawiki>` and `<siteinfo>`, each following one holds
up to 100 `<page>` elements, the last closes `</mediawiki>`. The index has one line per page, `offset:page_id:title`,
where offset is the byte at which the page's stream starts. So a reader can seek to any stream and decompress it
alone: the unit of parallel work. Pages come in page-id order, and page ids are allocated in creation order.

This module reads (index lines, one stream, the siteinfo's namespaces) and writes (`write_multistream`, used by the
tests and the bench to build dumps of any size, and by users to make fixtures) that format; it knows nothing of
documents or releases (see wikipedia_dump.py).
"""
from __future__ import annotations

import bz2
import io
from typing import Any, BinaryIO, Iterable, Iterator, Mapping
from xml.sax.saxutils import escape

from curation.io import storage

READ_CHUNK = 1 << 20
EXPORT_NS = "http://www.mediawiki.org/xml/export-0.11/"


class StreamError(ValueError):
    """A bz2 stream that cannot be read whole (corrupt data, or the file ends inside it)."""


def open_index(path: str, **opts: Any) -> Iterator[str]:
    """The index's lines, streamed (bz2 or plain text), without their newline."""
    with storage.open_binary(path, **opts) as raw:
        stream: BinaryIO = bz2.open(raw) if str(path).endswith(".bz2") else raw  # type: ignore[assignment]
        for line in io.TextIOWrapper(stream, encoding="utf-8"):
            line = line.rstrip("\n")
            if line:
                yield line


def parse_index_line(line: str) -> tuple[int, int, str]:
    """(stream offset, page id, title); titles may contain colons, offsets and ids never do."""
    offset, page_id, title = line.split(":", 2)
    return int(offset), int(page_id), title


def read_stream(fh: BinaryIO, length: int | None = None) -> bytes:
    """The decompressed bytes of the one bz2 stream that starts at `fh`'s position (reading `length` bytes when the
    next stream's offset is known, else until the stream ends). `fh` need not seek: an S3 ranged GET works."""
    dec = bz2.BZ2Decompressor()
    out = []
    left = length
    try:
        while not dec.eof:
            chunk = fh.read(READ_CHUNK if left is None else min(READ_CHUNK, left))
            if not chunk:
                raise StreamError("the file ends inside the bz2 stream")
            if left is not None:
                left -= len(chunk)
            out.append(dec.decompress(chunk))
    except (OSError, EOFError) as exc:  # bz2 reports corrupt data as OSError("Invalid data stream")
        raise StreamError(f"corrupt bz2 data: {exc}") from None
    return b"".join(out)


def siteinfo(head: bytes) -> dict:
    """What the first stream says about the wiki: {namespaces: {key: name}, dbname, base}."""
    from lxml import etree

    start, end = head.find(b"<siteinfo>"), head.find(b"</siteinfo>")
    if start < 0 or end < 0:
        raise StreamError("the dump's first stream has no <siteinfo>")
    info = etree.fromstring(head[start:end + len(b"</siteinfo>")], etree.XMLParser(resolve_entities=False))
    namespaces = {int(ns.get("key")): (ns.text or "") for ns in info.iter("namespace")}
    return {"namespaces": namespaces, "dbname": info.findtext("dbname") or "", "base": info.findtext("base") or ""}


def namespace_of(title: str, prefixes: Mapping[str, int]) -> int:
    """A title's namespace from its prefix ("Talk:X" -> 1); a colon that names no namespace is part of the title."""
    prefix, sep, _ = title.partition(":")
    return prefixes.get(prefix, 0) if sep else 0


def namespace_prefixes(namespaces: Mapping[int, str]) -> dict[str, int]:
    return {name: key for key, name in namespaces.items() if key != 0 and name}


# ---------------------------------------------------------------- writing a dump (tests, bench, fixtures)

def _page_xml(page: Mapping[str, Any]) -> str:
    redirect = f'    <redirect title="{escape(page["redirect"], {chr(34): "&quot;"})}" />\n' \
        if page.get("redirect") else ""
    text = page.get("text", "")
    return (f"  <page>\n    <title>{escape(page['title'])}</title>\n    <ns>{page.get('ns', 0)}</ns>\n"
            f"    <id>{page['id']}</id>\n{redirect}    <revision>\n      <id>{page.get('revid', page['id'])}</id>\n"
            f"      <timestamp>{page['timestamp']}</timestamp>\n      <model>wikitext</model>\n"
            f"      <format>text/x-wiki</format>\n"
            f'      <text bytes="{len(text.encode())}" xml:space="preserve">{escape(text)}</text>\n'
            f"    </revision>\n  </page>\n")


def write_multistream(dump_path: str, index_path: str, pages: Iterable[Mapping[str, Any]],
                      namespaces: Mapping[int, str] | None = None, dbname: str = "enwiki",
                      pages_per_stream: int = 100, compresslevel: int = 9) -> int:
    """Write `pages` ({id, title, ns, text, timestamp, revid?, redirect?}, in id order) as a multistream dump and
    its bz2 index, as the Wikimedia dumps are laid out. Returns the number of pages written."""
    namespaces = dict(namespaces or {0: "", 1: "Talk", 2: "User", 4: "Wikipedia", 6: "File", 10: "Template",
                                     14: "Category"})
    ns_xml = "".join(f'      <namespace key="{k}" case="first-letter"' + (f">{escape(v)}</namespace>\n" if v else
                                                                            " />\n")
                     for k, v in sorted(namespaces.items()))
    head = (f'<mediawiki xmlns="{EXPORT_NS}" version="0.11" xml:lang="en">\n  <siteinfo>\n'
            f"    <sitename>Wikipedia</sitename>\n    <dbname>{dbname}</dbname>\n"
            f"    <base>https://en.wikipedia.org/wiki/Main_Page</base>\n    <namespaces>\n{ns_xml}"
            f"    </namespaces>\n  </siteinfo>\n")
    written = 0
    index_lines: list[str] = []
    with open(dump_path, "wb") as dump:
        dump.write(bz2.compress(head.encode(), compresslevel))
        batch: list[Mapping[str, Any]] = []

        def flush() -> None:
            offset = dump.tell()
            dump.write(bz2.compress("".join(_page_xml(p) for p in batch).encode(), compresslevel))
            index_lines.extend(f"{offset}:{p['id']}:{p['title']}" for p in batch)
            batch.clear()

        for page in pages:
            batch.append(page)
            written += 1
            if len(batch) >= pages_per_stream:
                flush()
        if batch:
            flush()
        dump.write(bz2.compress(b"</mediawiki>\n", compresslevel))
    with bz2.open(index_path, "wt", encoding="utf-8") as index:
        index.write("\n".join(index_lines) + ("\n" if index_lines else ""))
    return written
