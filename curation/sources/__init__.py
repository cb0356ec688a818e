"""Source registry: `source.kind` -> the module that turns a dump, a directory or an API into Documents.

Every source module provides
    iter_documents(source_cfg: dict) -> Iterator[Document]
and may provide
    snapshot(source_cfg: dict) -> dict        what the release manifest records about the input (files, md5s, dates)
    shards(source_cfg: dict) -> list[dict]    independent pieces (one per site/file/tar, or byte range); each is a
                                              source_cfg that iter_documents accepts. The Ray job parses one shard
                                              per task.
    aggregations(shards) -> list[dict]        keyed global inputs that some shards need before they can parse
                                              ({key, items, partitions}; a shard names its key as `site_key`): the
                                              job runs module.aggregation_scan(item, partitions) per item and
                                              module.aggregation_merge(*pieces) per partition on the workers, then
                                              iter_documents(shard, partition arrays). Stack Exchange's answers pass.

`source_cfg` is the config's `source` section. The job adds two read-only keys to it (unless the section sets them):
`cutoffs` (the config's `cutoffs` section) and `member_cutoff` (= cutoffs.member_before), so that an API source can
narrow its queries or fetch text as of the member cutoff when the window moves with `--set cutoffs.*`; a `corpus`
source also gets `buckets` and `bucket_mode` (it checks the passage the release would take).
The Ray job also sets `staging` (unless the section does) to a temporary directory of the run on a single-node
cluster: where a source may decompress an archive once so that it can be split (Stack Exchange's .7z).

A module with `TEXT_ON_REQUEST = True` also takes iter_documents(..., deferred=True): it may then yield a
`Deferred(head, rest)` (curation/document.py) for an item whose text is costly to make, where `head` is the document
without title, text and the meta keys derived from the text, and `rest()` makes those. The build completes only the
documents that get past the row-level stages that read neither text nor title (curation/stages/pipeline.
annotate_documents): a document one of them drops is annotated the same without its text, so a source skips its
most expensive step (Stack Exchange: the body's HTML) for every document the time cutoff drops.

A source that rejects an item itself yields a *quarantine document*: empty text and
`meta["quarantine"] = {"stage": ..., "reason": ..., "detail": ...}`. The job excludes it with that reason, so every
item the source saw is counted. Modules are imported lazily: a Stack Exchange build never imports the HTTP client.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Iterator, Mapping, Protocol, runtime_checkable

from curation.document import Document

SOURCE_MODULES = {
    "stackexchange": "curation.sources.stackexchange.source",
    "files": "curation.sources.files",
    "arxiv": "curation.sources.arxiv",
    "wikipedia": "curation.sources.wikipedia.api",
    "wikipedia_dump": "curation.sources.wikipedia.dump",
    "corpus": "curation.sources.corpus",
}


@runtime_checkable
class Source(Protocol):
    """The contract of a source module (the module docstring above): `iter_documents` is required; `snapshot`,
    `shards` and `aggregations` are optional; a module with `aggregations` must also have AGGREGATION_STEPS."""

    def iter_documents(self, source_cfg: dict, aggregated: Any = None) -> Iterator[Document]: ...


AGGREGATION_STEPS = ("aggregation_scan", "aggregation_merge")


def source_module(kind: str) -> ModuleType:
    """The registered module of `kind`, checked against the Source contract when it is imported."""
    if kind not in SOURCE_MODULES:
        raise ValueError(f"unknown source.kind {kind!r}; known: {', '.join(sorted(SOURCE_MODULES))}")
    module = importlib.import_module(SOURCE_MODULES[kind])
    if not isinstance(module, Source):
        raise TypeError(f"{SOURCE_MODULES[kind]} is registered as source {kind!r} but has no iter_documents")
    if hasattr(module, "aggregations") and not all(hasattr(module, f) for f in AGGREGATION_STEPS):
        raise TypeError(f"{SOURCE_MODULES[kind]} declares aggregations without aggregation_scan/aggregation_merge")
    return module


def source_config(cfg: Mapping[str, Any]) -> dict:
    """The `source` section of a full config, with the cutoffs a source may read (see the module docstring)."""
    source = dict(cfg["source"])
    cutoffs = dict(cfg.get("cutoffs") or {})
    source.setdefault("cutoffs", cutoffs)
    source.setdefault("member_cutoff", cutoffs.get("member_before"))
    if source.get("kind") == "corpus":  # it measures overlap on the passage the release would take
        source.setdefault("buckets", list(cfg.get("buckets") or []))
        source.setdefault("bucket_mode", cfg.get("bucket_mode") or "every")
    return source


def iter_documents(source_cfg: Mapping[str, Any], aggregated=None, deferred: bool = False) -> Iterator[Document]:
    """The source's documents; with `deferred`, Deferred ones where the source offers them (TEXT_ON_REQUEST)."""
    module = source_module(source_cfg["kind"])
    if deferred and getattr(module, "TEXT_ON_REQUEST", False):
        return module.iter_documents(dict(source_cfg), aggregated, deferred=True)
    if aggregated is not None:
        return module.iter_documents(dict(source_cfg), aggregated)
    return module.iter_documents(dict(source_cfg))


def aggregations(source_cfg: Mapping[str, Any], shards_: list[dict]) -> list[dict]:
    module = source_module(source_cfg["kind"])
    return module.aggregations(shards_) if hasattr(module, "aggregations") else []


def shards(source_cfg: Mapping[str, Any]) -> list[dict]:
    module = source_module(source_cfg["kind"])
    return list(module.shards(dict(source_cfg))) if hasattr(module, "shards") else [dict(source_cfg)]


def snapshot(source_cfg: Mapping[str, Any]) -> dict:
    module = source_module(source_cfg["kind"])
    if hasattr(module, "snapshot"):
        return module.snapshot(dict(source_cfg))
    return {"kind": source_cfg["kind"], "path": source_cfg.get("path")}
