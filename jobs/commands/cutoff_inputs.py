"""`tidemark cutoff`'s dated input: --texts as given, or a dated set built from a build-benchmark recipe's source
(--config RECIPE --months FIRST..LAST) into OUT/dated/, a release the cutoff job then reads like any other.

- Documents by creation month (Stack Exchange, arXiv, Wikipedia, a corpus): the recipe's own build, with its
  filters, dedup and length buckets, and with the cutoffs turned into one window: every document created in the
  months is a candidate, none is a member, and `--per-month` of them per month and bucket are sampled in a seeded
  order (the builder's monthly non-member sampling: round-robin over months, so the months stay balanced).
  Wikipedia articles take their text as of the end of their creation month (`text_as_of: creation_month_end`): a
  dated article should read as it was written, not with years of later edits.
- Wikipedia versions (--versions): the same articles (created before the range) as of each month's end, through
  the MediaWiki API the source already calls (curation/sources/wikipedia/versions.py); group = the article.
A built set is kept in OUT/dated/ and reused by a rerun of the same command (its manifest records the recipe,
the overrides and the months). By creation month, a set built from another resolved recipe (other months, --set,
--seed or recipe file) is refused before anything is built, with what differs; versions with other settings are
crawled again. A window that leaves no document, or a crawl that leaves no version, is refused in one line.
"""
from __future__ import annotations

import json

import typer

DATED = "dated"
EARLIEST = "1900-01-01"  # "members before" a date no document has: the window holds non-members only
VERSIONS_PER_FILE = 2000


def dated_input(cfg, dest, months: tuple[int, int] | None) -> tuple[str, dict | None]:
    """(the dated texts to stage, what was built or None for --texts)."""
    if cfg.texts:
        return cfg.texts, None
    from curation.io.outputs import Location

    where = Location(dest.child(DATED))
    if cfg.versions:
        return where.uri, _versions(cfg, where, months)
    return where.uri, _by_creation_month(cfg, where, months)


def window_overrides(recipe: dict, months: tuple[int, int], per_month: int) -> list[str]:
    """The --set overrides that make a recipe's build a dated set of the months (module docstring)."""
    from scoring.cutoff.periods import month_label, month_start

    first, last = months
    sets = [f"cutoffs.member_before={EARLIEST}", f"cutoffs.nonmember_after={month_start(first).date().isoformat()}",
            f"cutoffs.nonmember_before={month_start(last + 1).date().isoformat()}",
            "cutoffs.monthly_nonmembers=true", f"cutoffs.per_month={per_month}", "balance=false", "per_bucket=null",
            "shift_audit.enabled=false",  # no members: nothing for a blind classifier to tell apart
            # one row per document, in its longest bucket: with `every`, a document's copies at 32, 64, ... words
            # would count as several documents of its month (and the bootstrap would resample them as independent)
            "bucket_mode=largest"]
    source = recipe.get("source") or {}
    if source.get("kind") == "wikipedia":
        sets.append("source.text_as_of=creation_month_end")
        if source.get("category_months"):
            sets.append("source.category_months=" + json.dumps([{"from": month_label(first), "to": month_label(last)}]))
        if "prefilter_by_cutoffs" in source:
            sets.append("source.prefilter_by_cutoffs=true")
    return sets


def _recipe(path: str) -> dict:
    import yaml
    from pathlib import Path

    return yaml.safe_load(Path(path).read_text()) or {}


def _by_creation_month(cfg, where, months) -> dict:
    from curation.config import ConfigError, load_config
    from jobs.commands.build_benchmark import build

    # --seed first: the dated set's sampling follows it, unless a --set seed=N says otherwise
    overrides = [f"seed={cfg.seed}", *(cfg.overrides or []), *window_overrides(_recipe(cfg.config), months,
                                                                             cfg.per_month)]
    try:
        recipe = load_config(cfg.config, overrides)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config/--set") from None
    other = _built_with_other_settings(where, recipe)
    if other:
        raise typer.BadParameter(f"{where.uri} holds a dated set built with other settings ({other}); remove it or "
                                 "choose another --out", param_hint="--out")
    runner = "local" if cfg.runner == "local" else "ray"
    manifest = build(recipe, where.uri, overrides=tuple(overrides), runner=runner, skip_existing=True,
                     overwrite=True, resume=cfg.resume, progress=cfg.progress)
    counts = manifest.get("counts", {})
    if not counts.get("rows_out"):
        raise typer.BadParameter(f"no document of {cfg.config}'s source was created in {cfg.months} and kept by its "
                                 f"filters ({_drops(counts)}): nothing to date", param_hint="--months")
    return {"kind": "creation_month", "recipe": cfg.config, "overrides": overrides, "rows": counts["rows_out"]}


def _built_with_other_settings(where, recipe: dict) -> str | None:
    """None when `where` holds no complete set or one built from this resolved recipe (a rerun reuses it); else
    what differs, in a few words. The recipe, not the overrides, is compared: --set in another order, or the same
    key set in the recipe file instead, builds the same set; an edited recipe file or another --seed does not."""
    from curation.io import publish
    from jobs.kit.redact import redact, secret_values

    if publish.release_state(where) != "complete" or not where.exists("manifest.json"):
        return None  # absent, or partial: build() builds it (again)
    built = where.read_json("manifest.json")
    if "config" not in built:
        return f"a {built.get('kind', 'different')} set, not a build of a recipe"
    want = _dotted(redact(json.loads(json.dumps(recipe, default=str)), secret_values(recipe)))  # as written
    have = _dotted(built["config"])
    keys = sorted(k for k in want.keys() | have.keys() if want.get(k) != have.get(k))
    if not keys:
        return None
    shown = ", ".join(f"{k}: {have.get(k)!r} -> {want.get(k)!r}" for k in keys[:3])
    return shown + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def _dotted(value, prefix: str = "") -> dict:
    """A nested mapping as {dotted.key: leaf value}."""
    if isinstance(value, dict) and value:
        out = {}
        for k, v in value.items():
            out.update(_dotted(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _drops(counts: dict) -> str:
    """The build's steps that dropped documents, e.g. `cutoff: between_cutoffs=50`."""
    steps = [f"{s['step']}: " + ", ".join(f"{k}={v}" for k, v in s["dropped"].items())
             for s in counts.get("steps", []) if s.get("dropped")]
    return "; ".join(steps) or "the source had none"


def _versions(cfg, where, months) -> dict:
    """The versions set: OUT/dated/data/part-*.parquet (one file per article chunk), OUT/dated/excluded.parquet
    (what could not be fetched) and OUT/dated/manifest.json, written last: a set without it is crawled again."""
    from collections import Counter

    import pyarrow as pa

    from curation.config import ConfigError, load_config
    from curation.io.ledger import quarantine_table
    from curation.sources.wikipedia.versions import iter_versions, versions_snapshot
    from jobs.kit.log import log

    settings = {"recipe": cfg.config, "overrides": list(cfg.overrides or []), "months": cfg.months,
                "articles": cfg.articles, "words": cfg.words, "seed": cfg.seed}
    built = where.read_json("manifest.json") if where.exists("manifest.json") else None
    if built is not None and built.get("settings") == settings:
        log(f"{where.uri} already holds these versions; reusing them")
        return built
    try:
        recipe = load_config(cfg.config, [*(cfg.overrides or []), f"cutoffs.member_before={EARLIEST}",
                                          f"cutoffs.nonmember_after={EARLIEST}"])
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config/--set") from None
    if recipe["source"].get("kind") != "wikipedia":
        raise typer.BadParameter(f"--versions needs a Wikipedia recipe; {cfg.config} reads "
                                 f"{recipe['source'].get('kind')!r}", param_hint="--config")
    if built is not None and built.get("kind") != "versions":  # versions with other settings are crawled again
        raise typer.BadParameter(f"{where.uri} holds a dated set built by creation month, not versions; remove it "
                                 "or choose another --out", param_hint="--out")
    where.delete_tree("")
    rows, bad, written = [], [], 0
    keys = ("id", "text", "date", "group", "source", "title", "revid", "url")

    def flush() -> None:  # a part file every VERSIONS_PER_FILE rows: the driver holds one file's rows at most
        nonlocal written
        if rows:
            where.write_parquet(f"data/part-{written // VERSIONS_PER_FILE:05d}.parquet",
                                pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows]))
            written += len(rows)
            rows.clear()

    for item in iter_versions(recipe["source"], *months, articles=cfg.articles, words=cfg.words, seed=cfg.seed):
        (bad if "reason" in item else rows).append(item)
        if len(rows) >= VERSIONS_PER_FILE:
            flush()
    flush()
    where.write_parquet("excluded.parquet", quarantine_table(bad))
    if not written:  # no manifest: a rerun crawls again (and a directory of excluded.parquet alone is no input)
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(Counter(b["reason"] for b in bad).items()))
        raise typer.BadParameter(f"no version of any article of {cfg.config}'s categories could be taken for "
                                 f"{cfg.months} ({reasons or 'no pages listed'}; {where.child('excluded.parquet')})",
                                 param_hint="--config")
    manifest = {"kind": "versions", "settings": settings, "rows": written, "excluded": len(bad),
                "snapshot": versions_snapshot(recipe["source"], *months, cfg.articles, cfg.words, cfg.seed)}
    where.write_json("manifest.json", manifest)
    return manifest
