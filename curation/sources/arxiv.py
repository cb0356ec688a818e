"""arXiv papers from the bulk source tars on S3 (bucket `arxiv`, requester pays), cleaned RedPajama-style.

Layout (arXiv "Bulk Data Access: S3"): `src/arXiv_src_manifest.xml` lists every `src/arXiv_src_YYMM_NNN.tar`
with its md5, size and `yymm`. Each tar holds one member per paper, `YYMM/<id>.gz` (or `.pdf` when the paper was
submitted as PDF only). A `.gz` is either a gzipped tar of the paper's files or a single gzipped .tex.

Tars and papers are untrusted input. Each outer tar is streamed from S3 (`tarfile` stream mode over the response
body: nothing is written to disk), each paper is decompressed in memory under `max_decompressed_bytes`, and
member names are never used as paths: a paper tar with an absolute or `..` member name is quarantined whole
(real submissions never have one), and `\\input`/`\\include` resolve only against the in-memory member map.

Cleaning (as RedPajama's arXiv subset): drop `%` comments (not `\\%`), inline the `\\input`/`\\include` files, drop
everything before the first `\\section` (or `\\chapter`), and everything from the bibliography (`\\bibliography`,
`\\begin{thebibliography}`, `\\printbibliography`) or `\\end{document}` on. Macros are not expanded.

`created_at` is the first day of the month in the arXiv id (the month of the first version). Dropped papers
become quarantine documents (empty text, `meta.quarantine = {stage, reason, detail}`), so the job counts them.

source_cfg keys: `path` ("s3://arxiv/src/"), `yymm_from`/`yymm_to` (inclusive), `tars_per_month`, `max_tars`, `requester_pays`
(true), `region` ("us-east-1"), `endpoint_url`, `max_member_bytes` (one compressed paper; 64 MiB, above arXiv's
50 MB submission limit), `max_decompressed_bytes` (256 MiB), `verify_md5` (true), `max_papers`.

`shards(cfg)` reads the manifest once and returns one source_cfg per selected tar (the entry under `tar`), which
`iter_documents` streams without reading the manifest again: the Ray job parses one tar per task.
"""
from __future__ import annotations

import hashlib
import io
import posixpath
import re
import tarfile
import zlib
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping
from xml.etree import ElementTree

from curation.document import Document
from curation.io import storage

STAGE = "source.arxiv"
MANIFEST = "arXiv_src_manifest.xml"
TAR_NAME = re.compile(r"^arXiv_src_(\d{4})_(\d{3})\.tar$")
NEW_ID = re.compile(r"^(\d{4})\.(\d{4,5})(?:v\d+)?$")  # 0704.0001, 2303.01234
OLD_ID = re.compile(r"^([a-z][a-z\-]*(?:\.[A-Z]{2})?)(\d{7})(?:v\d+)?$")  # hep-th9901001 -> hep-th/9901001
TEX_SUFFIXES = (".tex", ".ltx", ".latex")
MiB = 1 << 20


class Quarantine(Exception):
    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


# ---------------------------------------------------------------- S3 and the manifest

def _bucket_prefix(path: str) -> tuple[str, str]:
    if not path.startswith("s3://"):
        raise ValueError(f"arxiv source path must be s3://bucket/prefix/, got {path!r}")
    bucket, _, prefix = path[5:].partition("/")
    return bucket, (prefix.rstrip("/") + "/") if prefix else ""


def make_client(cfg: Mapping[str, Any]):
    """The arXiv bucket's client (curation/io/storage.s3_client), in us-east-1 unless `region` says otherwise."""
    return storage.s3_client({"region": cfg.get("region", "us-east-1"), "endpoint_url": cfg.get("endpoint_url")})


def _payer(cfg: Mapping[str, Any]) -> dict:
    # The arxiv bucket refuses anonymous and owner-pays reads: every call must carry RequestPayer (the default).
    return storage.request_payer({"requester_pays": cfg.get("requester_pays", True)})


def yymm_key(yymm: str) -> int:
    """Chronological sort key: arXiv yymm starts at 9108, so "9912" comes before "0001"."""
    yy, mm = int(yymm[:2]), int(yymm[2:4])
    return (1900 + yy if yy >= 91 else 2000 + yy) * 100 + mm


def read_manifest(s3, cfg: Mapping[str, Any]) -> tuple[list[dict], dict]:
    """All manifest entries, and {key, etag, md5} of the manifest itself."""
    bucket, prefix = _bucket_prefix(cfg.get("path", "s3://arxiv/src/"))
    key = prefix + MANIFEST
    resp = s3.get_object(Bucket=bucket, Key=key, **_payer(cfg))
    raw = resp["Body"].read()
    # The manifest is the bucket owner's, and ElementTree neither resolves external entities nor (with the
    # bundled expat >= 2.4) expands entity bombs.
    root = ElementTree.fromstring(raw)
    entries = []
    for f in root.iter("file"):
        e = {child.tag: (child.text or "").strip() for child in f}
        for k in ("size", "num_items", "seq_num"):
            if e.get(k, "").isdigit():
                e[k] = int(e[k])
        entries.append(e)
    return entries, {"key": key, "etag": resp.get("ETag", "").strip('"'), "md5": hashlib.md5(raw).hexdigest()}


def select_tars(entries: list[dict], cfg: Mapping[str, Any]) -> list[dict]:
    """Entries whose yymm lies in [yymm_from, yymm_to], in time then sequence order; at most `tars_per_month` of
    each month (so a sample spans the whole range, both sides of a cutoff), then at most `max_tars`."""
    # zfill: an unquoted YAML 0001 arrives as the integer 1.
    lo = yymm_key(str(cfg["yymm_from"]).zfill(4)) if cfg.get("yymm_from") is not None else 0
    hi = yymm_key(str(cfg["yymm_to"]).zfill(4)) if cfg.get("yymm_to") is not None else 10**9
    chosen = []
    for e in entries:
        m = TAR_NAME.match(posixpath.basename(e.get("filename", "")))
        if m and lo <= yymm_key(m.group(1)) <= hi:  # the file name is what gets fetched, so it decides
            chosen.append({**e, "yymm": m.group(1)})
    chosen.sort(key=lambda e: (yymm_key(e["yymm"]), e["filename"]))
    if cfg.get("tars_per_month"):
        taken: dict[str, int] = {}
        sampled = []
        for e in chosen:
            taken[e["yymm"]] = taken.get(e["yymm"], 0) + 1
            if taken[e["yymm"]] <= cfg["tars_per_month"]:
                sampled.append(e)
        chosen = sampled
    return chosen[: cfg["max_tars"]] if cfg.get("max_tars") else chosen


# ---------------------------------------------------------------- one paper, in memory

def gunzip_capped(data: bytes, cap: int) -> bytes:
    """Decompress (possibly concatenated) gzip members, refusing to produce more than `cap` bytes."""
    out, total = [], 0
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = d.decompress(data, cap - total + 1)
        except zlib.error as exc:
            raise Quarantine("corrupt_gzip", str(exc)) from exc
        total += len(chunk)
        if total > cap:
            raise Quarantine("too_large", f"decompresses to more than {cap} bytes")
        if not d.eof:
            raise Quarantine("corrupt_gzip", "truncated gzip stream")
        out.append(chunk)
        data = d.unused_data.lstrip(b"\0")  # some gzip writers pad with zeros after the last member
    return b"".join(out)


def _safe_name(name: str) -> str | None:
    """The normalised member name, or None when it is absolute or climbs out with `..`."""
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or "\\" in name:
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _decode(raw: bytes) -> str:
    # Older submissions are often Latin-1; latin-1 decodes any byte string, so nothing is lost to errors.
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def paper_files(raw: bytes) -> dict[str, str]:
    """name -> text for the TeX-like files of a paper: a gzipped tar's regular files, or one single file."""
    is_tar = len(raw) >= 512 and raw[257:262] == b"ustar"
    try:
        tf = tarfile.open(fileobj=io.BytesIO(raw), mode="r:")
    except tarfile.TarError as exc:
        if is_tar:
            raise Quarantine("corrupt_tar", str(exc)) from exc
        return {"main.tex": _decode(raw)}  # a single gzipped file (the .tex itself)
    files = {}
    with tf:
        try:
            members = tf.getmembers()
        except tarfile.TarError as exc:
            raise Quarantine("corrupt_tar", str(exc)) from exc
        for m in members:
            name = _safe_name(m.name)
            if name is None:
                raise Quarantine("unsafe_member_name", m.name[:200])
            # Links and devices are never followed; only regular files are read, and only TeX-like ones kept.
            if m.isfile() and (name.lower().endswith(TEX_SUFFIXES + (".bbl",)) or "." not in posixpath.basename(name)):
                files[name] = _decode(tf.extractfile(m).read())
    return files


# ---------------------------------------------------------------- LaTeX cleaning

_COMMENT_PREFIX = re.compile(r"(?:[^\\%]|\\.)*")  # up to the first % that is not escaped (`\\%` is a comment)
_INPUT = re.compile(r"\\(?:input|include)(?![A-Za-z@])\s*(?:\{([^{}]*)\}|([^\s{}\\%]+))")
_DOCCLASS = re.compile(r"\\document(?:class|style)(?![A-Za-z])")
_SECTION = re.compile(r"\\(?:section|chapter)(?![A-Za-z])")
_END = re.compile(r"\\bibliography(?![A-Za-z])|\\begin\s*\{thebibliography\}|\\printbibliography(?![A-Za-z])"
                  r"|\\end\s*\{document\}")


def strip_comments(tex: str) -> str:
    """Drop `%` comments; a line that was only a comment goes entirely, as TeX reads it."""
    out = []
    for line in tex.splitlines():
        cut = _COMMENT_PREFIX.match(line).end()
        if cut < len(line) and line[cut] == "%":
            if not line[:cut].strip():
                continue
            line = line[:cut].rstrip()
        out.append(line)
    return "\n".join(out)


def main_file(files: dict[str, str]) -> str:
    """The main .tex: it has \\documentclass (or LaTeX 2.09's \\documentstyle); prefer one with
    \\begin{document}, then the longest."""
    candidates = [(r"\begin{document}" in strip_comments(text), len(text), name)
                  for name, text in files.items()
                  if not name.lower().endswith(".bbl") and _DOCCLASS.search(strip_comments(text))]
    if not candidates:
        raise Quarantine("no_main_tex", f"{len(files)} TeX-like files, none with \\documentclass")
    return max(candidates)[2]


def resolve_inputs(name: str, files: dict[str, str], report: dict, stack: tuple[str, ...] = ()) -> str:
    """`name`'s comment-free text with \\input/\\include inlined from `files` (never from the file system).
    Cycles and nesting deeper than 10 are left out and reported as unresolved."""
    stack = stack or (name,)
    text = strip_comments(files[name])

    def sub(m: re.Match) -> str:
        ref = (m.group(1) or m.group(2) or "").strip()
        target = _safe_name(ref)
        if target is None:
            report["refused_inputs"].append(ref)
            return ""
        found = next((c for c in (target, target + ".tex") if c in files), None)
        if found is None or found in stack or len(stack) > 10:
            report["unresolved_inputs"].append(ref)
            return ""
        report["inputs"].append(found)
        return resolve_inputs(found, files, report, stack + (found,))

    return _INPUT.sub(sub, text)


def title_of(tex: str) -> str:
    """The argument of \\title{...} (balanced braces), flattened to one line; '' when absent."""
    m = re.search(r"\\title\s*(?:\[[^\]]*\])?\s*\{", tex)
    if not m:
        return ""
    level, i = 1, m.end()
    while i < len(tex) and level:
        level += {"{": 1, "}": -1}.get(tex[i], 0) if tex[i - 1] != "\\" else 0
        i += 1
    return re.sub(r"\s+", " ", tex[m.end(): i - 1].replace("\\\\", " ")).strip()


def clean_tex(tex: str) -> str:
    """RedPajama's cut: from the first \\section to the bibliography; `tex` is already comment-free."""
    start = _SECTION.search(tex)
    if start is None:
        return ""
    body = tex[start.start():]
    end = _END.search(body)
    body = body[: end.start()] if end else body
    body = re.sub(r"\\bibliographystyle\s*\{[^}]*\}", "", body)
    return re.sub(r"\n{3,}", "\n\n", body).strip()


# ---------------------------------------------------------------- ids, documents, tars

def arxiv_id(member_name: str) -> str | None:
    """`2303/2303.01234.gz` -> `2303.01234`; `0001/hep-th0001001.gz` -> `hep-th/0001001`; None if neither."""
    stem = posixpath.basename(member_name)
    stem = stem[: -len(".gz")] if stem.endswith(".gz") else stem[: -len(".pdf")] if stem.endswith(".pdf") else stem
    if NEW_ID.match(stem):
        return NEW_ID.sub(r"\1.\2", stem)
    m = OLD_ID.match(stem)
    return f"{m.group(1)}/{m.group(2)}" if m else None


def created_from_id(aid: str) -> datetime:
    yymm = aid[:4] if NEW_ID.match(aid) else aid.split("/")[1][:4]
    yy, mm = int(yymm[:2]), int(yymm[2:])
    return datetime(1900 + yy if yy >= 91 else 2000 + yy, mm, 1, tzinfo=timezone.utc)


def _doc(aid: str, text: str, title: str, meta: dict) -> Document:
    return Document(id=f"arxiv:{aid}", source="arxiv", title=title, text=text, created_at=created_from_id(aid),
                    url=f"https://arxiv.org/abs/{aid}", meta=meta)


def _quarantined(doc_id: str, created: datetime, reason: str, detail: str, meta: dict) -> Document:
    return Document(id=doc_id, source="arxiv", title="", text="", created_at=created, url="",
                    meta={**meta, "quarantine": {"stage": STAGE, "reason": reason, "detail": detail[:500]}})


def paper_document(aid: str, compressed: bytes, cfg: Mapping[str, Any], meta: dict) -> Document:
    """One paper's Document; raises Quarantine with a short reason when it cannot give clean text."""
    files = paper_files(gunzip_capped(compressed, int(cfg.get("max_decompressed_bytes", 256 * MiB))))
    main = main_file(files)
    report: dict[str, list] = {"inputs": [], "unresolved_inputs": [], "refused_inputs": []}
    full = resolve_inputs(main, files, report)
    text = clean_tex(full)
    if not text:
        raise Quarantine("no_section", f"{main}: nothing from a \\section to the bibliography")
    return _doc(aid, text, title_of(full), {**meta, "main_file": main, **report, "created_at_precision": "month"})


class _HashingReader:
    """Wraps the S3 body so the streamed tar's md5 can be checked against the manifest without a second read."""

    def __init__(self, body):
        self.body, self.md5, self.size = body, hashlib.md5(), 0

    def read(self, n: int = -1) -> bytes:
        chunk = self.body.read() if n is None or n < 0 else self.body.read(n)
        self.md5.update(chunk)
        self.size += len(chunk)
        return chunk

    def drain(self) -> None:
        while self.read(MiB):
            pass


def iter_tar(s3, entry: dict, cfg: Mapping[str, Any]) -> Iterator[Document]:
    """Documents and quarantine documents for one manifest entry, streaming the tar from S3."""
    bucket, prefix = _bucket_prefix(cfg.get("path", "s3://arxiv/src/"))
    tar_name = posixpath.basename(entry["filename"])  # keys hang off our prefix, whatever the manifest's root
    key = prefix + tar_name
    max_member = int(cfg.get("max_member_bytes", 64 * MiB))
    body = _HashingReader(s3.get_object(Bucket=bucket, Key=key, **_payer(cfg))["Body"])
    with tarfile.open(fileobj=body, mode="r|") as outer:
        for index, m in enumerate(outer):
            if not m.isfile():
                continue
            aid = arxiv_id(m.name)
            meta = {"tar": tar_name, "member": m.name[:200], "yymm": entry.get("yymm")}
            if aid is None or _safe_name(m.name) is None:
                yield _quarantined(f"arxiv:unparsed:{tar_name}:{index}", datetime(1970, 1, 1, tzinfo=timezone.utc),
                                   "unexpected_member", m.name[:200], meta)
                continue
            meta["arxiv_id"] = aid
            if m.name.endswith(".pdf"):
                yield _quarantined(f"arxiv:{aid}", created_from_id(aid), "pdf_only", "no TeX source", meta)
            elif m.size > max_member:
                yield _quarantined(f"arxiv:{aid}", created_from_id(aid), "too_large",
                                   f"{m.size} compressed bytes > {max_member}", meta)
            else:
                try:
                    yield paper_document(aid, outer.extractfile(m).read(), cfg, meta)
                except Quarantine as q:
                    yield _quarantined(f"arxiv:{aid}", created_from_id(aid), q.reason, q.detail, meta)
    body.drain()  # tarfile stops at the end-of-archive blocks; the md5 covers the whole object
    expected = entry.get("md5sum")
    if cfg.get("verify_md5", True) and expected and body.md5.hexdigest() != expected:
        yield _quarantined(f"arxiv:tar:{tar_name}", datetime(1970, 1, 1, tzinfo=timezone.utc), "tar_md5_mismatch",
                           f"manifest {expected}, streamed {body.md5.hexdigest()}", {"tar": tar_name})


def shards(source_cfg: Mapping[str, Any], s3=None) -> list[dict]:
    """One source_cfg per selected tar, each carrying its manifest entry under `tar` (plain, picklable values)."""
    cfg = dict(source_cfg)
    entries, _ = read_manifest(s3 or make_client(cfg), cfg)
    return [{**cfg, "tar": entry} for entry in select_tars(entries, cfg)]


def iter_documents(source_cfg: Mapping[str, Any], s3=None) -> Iterator[Document]:
    """Every paper in the selected tars (or in the one shard's `tar`), in manifest order; `max_papers` caps the
    yield for smoke runs."""
    cfg = dict(source_cfg)
    s3 = s3 or make_client(cfg)
    selected = [cfg["tar"]] if cfg.get("tar") else select_tars(read_manifest(s3, cfg)[0], cfg)
    n = 0
    for entry in selected:
        for doc in iter_tar(s3, entry, cfg):
            yield doc
            n += 1
            if cfg.get("max_papers") and n >= cfg["max_papers"]:
                return


def snapshot(source_cfg: Mapping[str, Any], s3=None) -> dict:
    """What the release manifest records: the manifest's etag/md5 and each selected tar with its md5."""
    cfg = dict(source_cfg)
    s3 = s3 or make_client(cfg)
    entries, manifest = read_manifest(s3, cfg)
    keep = ("filename", "md5sum", "size", "yymm", "seq_num", "num_items", "first_item", "last_item", "timestamp")
    return {
        "kind": "arxiv",
        "path": cfg.get("path", "s3://arxiv/src/"),
        "manifest": manifest,
        "yymm_from": str(cfg["yymm_from"]).zfill(4) if cfg.get("yymm_from") is not None else None,
        "yymm_to": str(cfg["yymm_to"]).zfill(4) if cfg.get("yymm_to") is not None else None,
        "tars": [{k: e[k] for k in keep if k in e} for e in select_tars(entries, cfg)],
        "cleaning": "redpajama: comments, inputs inlined, first \\section to bibliography",
    }
