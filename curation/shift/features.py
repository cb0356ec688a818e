"""What the blind `dates` and `format` classifiers of the shift audit (curation/shift/audit.py) look at: years, full
dates and month names in a text (and where they fall against the cutoff), and length/formatting statistics. The
date patterns are shared with curation/shift/debias.py: masking must remove exactly what the date classifier sees."""
from __future__ import annotations

import functools
import re
import string
from typing import Iterable

import numpy as np


# --------------------------------------------------------------------------------------------------------------
# Dates: shared with curation.shift.debias (masking must remove exactly what the date classifier looks at).
# --------------------------------------------------------------------------------------------------------------
_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
# A year is 1500–2099 standing alone: not part of a longer number, a decimal, a price, "1,999" or "555-1999"
# ("s" allowed: 1990s; "mid-2024" and "pre-2017" count).
_YEAR = r"(?<![\d$£€.,:/])(?<!\d-)(?:1[5-9]\d\d|20\d\d)(?:s|'s)?(?![\d,.]\d|\d|:\d)"
YEAR_RE = re.compile(_YEAR)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_FULL_DATE = (
    rf"(?:(?:{_MONTHS})\.?\s+{_DAY},?\s+{_YEAR}"  # February 18, 2023
    rf"|{_DAY}\s+(?:{_MONTHS})\.?,?\s+{_YEAR}"  # 18 February 2023
    rf"|(?:{_MONTHS})\.?,?\s+{_YEAR}"  # February 2023
    r"|(?<!\d)(?:1[5-9]|20)\d\d-\d{1,2}-\d{1,2}(?!\d)"  # 2023-02-18
    r"|(?<!\d)\d{1,2}/\d{1,2}/(?:1[5-9]|20)\d\d(?!\d))"  # 02/18/2023
)
FULL_DATE_RE = re.compile(_FULL_DATE, re.IGNORECASE)
MONTH_RE = re.compile(rf"\b(?:{_MONTHS})\b")
# Removing "2024" from "in 2024," would leave "in ,"; the preposition goes with the date.
_PREP = r"(?:\b(?:in|on|of|since|by|during|until|till|from|to|before|after|as of|circa|around|early|late|mid)\s+)?"
DATE_ONLY_RE = re.compile(rf"(?:{_FULL_DATE}|{_YEAR})", re.IGNORECASE)  # for "[DATE]" masking: keeps prepositions
DATE_EXPR_RE = re.compile(  # + "mid-"/"pre-" prefixes and "2019–20" ranges, which would otherwise leave debris
    rf"{_PREP}(?:\b(?:mid|pre|post)-)?(?:{_FULL_DATE}|{_YEAR})(?:\s*[-–]\s*(?:\d{{2,4}}))?", re.IGNORECASE)


def years_in(text: str) -> list[int]:
    """Every year mentioned in `text` (as ints, decades as their first year: "1990s" -> 1990)."""
    return [int(m.group(0)[:4]) for m in YEAR_RE.finditer(text)]


def date_feature_dicts(texts: Iterable[str], cutoff_year: int | None = None) -> list[dict[str, float]]:
    """Date features per text, as dicts for a DictVectorizer (so the year vocabulary comes from the training fold).

    Year one-hots let the model learn *which* years are member-like; max/min year and "any year >= cutoff" carry
    the rule Das et al. used (a non-member mentions a date after the cutoff) without fixing a threshold."""
    return [dict(_date_features(text, cutoff_year)) for text in texts]


@functools.lru_cache(maxsize=1 << 17)
def _date_features(text: str, cutoff_year: int | None) -> dict[str, float]:
    # Cached: features are per text, and cross-validation transforms every text once per fold and classifier.
    ys = years_in(text)
    d: dict[str, float] = {
        "n_years": float(len(ys)),
        "has_year": float(bool(ys)),
        "n_full_dates": float(len(FULL_DATE_RE.findall(text))),
        "n_month_names": float(len(MONTH_RE.findall(text))),
    }
    for y in set(ys):
        d[f"year={y}"] = 1.0
        d[f"decade={y // 10 * 10}s"] = 1.0
    if ys:
        d["max_year"] = (max(ys) - 1900) / 100.0
        d["min_year"] = (min(ys) - 1900) / 100.0
    if cutoff_year is not None:
        n_after = sum(y >= cutoff_year for y in ys)
        d["n_years_ge_cutoff"] = float(n_after)
        d["any_year_ge_cutoff"] = float(n_after > 0)
    return d


# --------------------------------------------------------------------------------------------------------------
# Length and formatting
# --------------------------------------------------------------------------------------------------------------
FORMAT_FEATURES = (
    "n_chars", "n_words", "mean_word_len", "std_word_len", "frac_upper", "frac_digit", "frac_punct",
    "frac_space", "frac_non_ascii", "n_sentences", "words_per_sentence", "n_newlines", "frac_capitalised_words",
    "frac_numeric_words", "commas_per_word", "n_parens", "n_quotes", "ends_with_terminal", "starts_upper",
    "double_spaces", "edge_whitespace",
)
_PUNCT = set(string.punctuation)
_SENT_END_RE = re.compile(r"[.!?]+(?:\s|$)")


def format_features(texts: Iterable[str]) -> np.ndarray:
    """Length and formatting statistics, one row per text (columns: FORMAT_FEATURES)."""
    rows = [_format_row(t) for t in texts]
    return np.asarray(rows, dtype=np.float64).reshape(-1, len(FORMAT_FEATURES))


@functools.lru_cache(maxsize=1 << 17)
def _format_row(t: str) -> tuple[float, ...]:
    # Cached for the same reason as _date_features; map() over str methods is ~3x a generator per character.
    n = max(len(t), 1)
    words = t.split()
    nw = max(len(words), 1)
    wl = np.array([len(w) for w in words], dtype=np.float64) if words else np.zeros(1)
    n_sent = max(len(_SENT_END_RE.findall(t)), 1)
    return (
        len(t), len(words), wl.mean(), wl.std(),
        sum(map(str.isupper, t)) / n, sum(map(str.isdigit, t)) / n, sum(map(_PUNCT.__contains__, t)) / n,
        sum(map(str.isspace, t)) / n, sum(c > "\x7f" for c in t) / n,
        n_sent, len(words) / n_sent, t.count("\n"),
        sum(w[:1].isupper() for w in words) / nw, sum(not w.isalpha() and any(map(str.isdigit, w)) for w in words) / nw,
        t.count(",") / nw, t.count("("), t.count('"') + t.count("“") + t.count("”"),
        float(t.rstrip()[-1:] in ".!?\"'”)") if t.strip() else 0.0, float(t.lstrip()[:1].isupper()),
        t.count("  "), float(t != t.strip()),
    )
