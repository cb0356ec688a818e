"""Benchmark build configs: a YAML file, then `--set key=value` overrides, checked against the known keys.

Every key can be overridden from the command line, so a scheduled job moves the window without editing files:
    --set cutoffs.member_before=2015-02-01 --set buckets=[32,64] --set source.path=s3://bucket/dumps/
A value is read with yaml.safe_load, so numbers, booleans, lists and null keep their types; dates are stored back
as ISO strings (the manifest is JSON). Keys outside `source` must be known (a typo fails instead of silently doing
nothing); `source` takes any key, since each source kind has its own (see curation/sources/).
"""
from __future__ import annotations

import copy
from datetime import date, datetime
from pathlib import Path
from typing import Any, Iterable

import yaml

from curation.shift.debias import DEBIAS_DEFAULTS
from curation.document import utc
from curation.shift.audit import AUDIT_DEFAULTS

DEFAULTS: dict[str, Any] = {
    "name": "benchmark",
    "description": "",
    "source": {"kind": None, "path": None},
    "cutoffs": {
        "member_before": None,  # members: created (and, where known, last active) before this
        "nonmember_after": None,  # non-members: created on or after this
        "nonmember_before": None,  # optional end of the non-member window
        "monthly_nonmembers": False,  # slice non-members by month of creation and sample the months evenly
        "per_month": None,  # optional cap on non-members per month per bucket (with monthly_nonmembers)
    },
    "filters": {
        "title_patterns": [],  # regexes searched in the title, e.g. "^List of"
        "min_words": None,
        "max_words": None,
        "drop_code": False,
        "drop_formula": False,
        "languages": [],  # ISO 639-1 codes to keep; empty keeps every language
        "min_language_score": 0.0,  # with languages: the detector's probability must reach this
    },
    "dedup": {
        "exact": True,
        "near": False,
        "threshold": 0.8,  # estimated Jaccard similarity of word shingles at which two texts are near-duplicates
        "ngram": 5,
        "permutations": 128,
        "bands": 16,
    },
    "buckets": [32, 64, 128, 256],
    "bucket_mode": "every",  # "every": a text goes to each bucket it is long enough for (WikiMIA); "largest": one
    "per_bucket": 1000,  # max rows per label per bucket; null = no cap
    "balance": True,  # equal members and non-members per bucket
    "seed": 0,
    # Blind-baseline audit of the release, stored in manifest["shift_audit"] (curation/shift/audit.py).
    "shift_audit": dict(AUDIT_DEFAULTS),
    # Debiased release mode, off by default (curation/shift/debias.py); its report goes to manifest["debias"].
    "debias": dict(DEBIAS_DEFAULTS),
    # Holes and markup in the released text (curation/release/text_defects.py), in manifest["text_defects"]; a
    # release with a larger share of defective passages than this warns.
    "text_defects": {"max_share": 0.03},
}

BUCKET_MODES = ("every", "largest")


class ConfigError(ValueError):
    pass


def load_config(path: str | Path | None, overrides: Iterable[str] = ()) -> dict:
    """DEFAULTS, then the file, then each `key=value` override; validated and normalized."""
    cfg = copy.deepcopy(DEFAULTS)
    if path is not None:
        loaded = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: a config is a mapping, got {type(loaded).__name__}")
        _merge(cfg, loaded, prefix="")
    for item in overrides:
        apply_override(cfg, item)
    return validate(cfg)


def _merge(base: dict, update: dict, prefix: str) -> None:
    for key, value in update.items():
        dotted = f"{prefix}{key}"
        _check_known(base, key, dotted)
        if isinstance(base.get(key), dict) and isinstance(value, dict):
            _merge(base[key], value, prefix=dotted + ".")
        else:
            base[key] = value


def _check_known(section: dict, key: str, dotted: str) -> None:
    if dotted.startswith("source."):
        return
    if key not in section:
        known = ", ".join(sorted(section))
        raise ConfigError(f"unknown config key {dotted!r} (known here: {known})")


def apply_override(cfg: dict, item: str) -> None:
    """Set one `dotted.key=value` in place; the value is parsed as YAML."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set takes key=value, got {item!r}")
    parts = key.split(".")
    section = cfg
    for depth, part in enumerate(parts[:-1]):
        dotted = ".".join(parts[: depth + 1])
        _check_known(section, part, dotted)
        if not isinstance(section.get(part), dict):
            if dotted.startswith("source.") and part not in section:
                section[part] = {}
            else:
                raise ConfigError(f"--set {key}: {dotted!r} is not a section")
        section = section[part]
    _check_known(section, parts[-1], key)
    section[parts[-1]] = yaml.safe_load(raw) if raw.strip() else None


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def validate(cfg: dict) -> dict:
    from curation.sources import SOURCE_MODULES

    cfg = _jsonable(cfg)
    kind = cfg["source"].get("kind")
    if kind not in SOURCE_MODULES:
        raise ConfigError(f"source.kind must be one of {sorted(SOURCE_MODULES)}, got {kind!r}")

    cut = cfg["cutoffs"]
    for key in ("member_before", "nonmember_after"):
        if not cut.get(key):
            raise ConfigError(f"cutoffs.{key} is required (an ISO date)")
    times = {k: _parse_time(k, cut[k]) for k in ("member_before", "nonmember_after", "nonmember_before") if cut.get(k)}
    if times["member_before"] > times["nonmember_after"]:
        raise ConfigError("cutoffs.member_before must not be later than cutoffs.nonmember_after")
    if "nonmember_before" in times and times["nonmember_before"] <= times["nonmember_after"]:
        raise ConfigError("cutoffs.nonmember_before must be later than cutoffs.nonmember_after")
    _optional_positive_int(cut, "per_month", "cutoffs.per_month")

    buckets = cfg["buckets"]
    if not isinstance(buckets, list) or not buckets or not all(_positive_int(b) for b in buckets):
        raise ConfigError(f"buckets must be a non-empty list of positive word counts, got {buckets!r}")
    cfg["buckets"] = sorted(set(buckets))
    if cfg["bucket_mode"] not in BUCKET_MODES:
        raise ConfigError(f"bucket_mode must be one of {BUCKET_MODES}, got {cfg['bucket_mode']!r}")
    _optional_positive_int(cfg, "per_bucket", "per_bucket")
    if not isinstance(cfg["seed"], int) or isinstance(cfg["seed"], bool):
        raise ConfigError(f"seed must be an integer, got {cfg['seed']!r}")

    filters = cfg["filters"]
    for key in ("min_words", "max_words"):
        _optional_positive_int(filters, key, f"filters.{key}")
    for key in ("title_patterns", "languages"):
        if isinstance(filters[key], str):
            filters[key] = [filters[key]]
        if not isinstance(filters[key], list):
            raise ConfigError(f"filters.{key} must be a list")
    dedup = cfg["dedup"]
    if not 0 < float(dedup["threshold"]) <= 1:
        raise ConfigError("dedup.threshold must be in (0, 1]")
    if int(dedup["permutations"]) % int(dedup["bands"]):
        raise ConfigError("dedup.permutations must be a multiple of dedup.bands")
    return cfg


def _parse_time(key: str, value: Any) -> datetime:
    try:
        return utc(str(value))
    except ValueError as exc:
        raise ConfigError(f"cutoffs.{key}: not an ISO date: {value!r}") from exc


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _optional_positive_int(section: dict, key: str, dotted: str) -> None:
    if section.get(key) is not None and not _positive_int(section[key]):
        raise ConfigError(f"{dotted} must be a positive integer or null, got {section[key]!r}")
