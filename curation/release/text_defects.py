"""How much of a release's text is not the text a model read: holes where markup was dropped, and markup left in.

A passage is *defective* when it has any of:
- `empty_parens`: parentheses with no word inside ("Germany ()", "(; ;)", "(or)": two pronunciations dropped) or
  opened on punctuation ("(, ; and");
- `dangling_function_word`: a function word directly followed by punctuation ("is , containing", "altitude of .",
  "roughly ."), the trace of a dropped inline template such as {{convert}} or {{val}};
- `markup`: wikitext or HTML left in (`{{ }} '' <ref {| |} thumb|`, an HTML entity such as `&ndash;`). Brackets
  ("[[", "]]") are not counted: the renderer reads every well-formed link, and MediaWiki shows a broken one
  ("[[link]") as the text it is, which is what a model read.

`measure` gives the share of defective passages, counts per kind and a few examples: what the build records in
the manifest (`text_defects`) and warns about above `text_defects.max_share`.
"""
from __future__ import annotations

import re
from typing import Iterable

FUNCTION_WORDS = ("a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "with", "from", "into", "than", "as",
                  "is", "are", "was", "were", "be", "been", "and", "or", "nor", "about", "approximately", "roughly",
                  "around", "nearly", "over", "under", "exceed", "exceeds", "reached", "measures", "between")
_EMPTY_PARENS = re.compile(r"\((?:[^\w()]|\b(?:or|and)\b)*\)|\(\s*[,;:]")
_DANGLING = re.compile(r"\b(?:" + "|".join(FUNCTION_WORDS) + r")\s+[,.;:)](?!\.)", re.IGNORECASE)  # not "..."
_MARKUP = re.compile(r"\{\{|\}\}|''|<ref|\{\||\|\}|\bthumb\||&(?:[a-zA-Z]+|#\d+|#x[0-9a-fA-F]+);")
KINDS = {"empty_parens": _EMPTY_PARENS, "dangling_function_word": _DANGLING, "markup": _MARKUP}
_MATH = re.compile(r"\$[^$\n]*\$")  # a formula kept as $TeX$ (wikitext.py): its braces are not leftover markup
EXAMPLE_CHARS = 60


def defects(text: str) -> dict[str, str]:
    """{kind: the first match with some context} for each kind of defect the passage has."""
    out = {}
    text = _MATH.sub("$…$", text)
    for kind, pattern in KINDS.items():
        m = pattern.search(text)
        if m:
            out[kind] = text[max(0, m.start() - EXAMPLE_CHARS // 2):m.end() + EXAMPLE_CHARS // 2]
    return out


def measure(texts: Iterable[str], max_examples: int = 10) -> dict:
    """The share of defective passages, passages per kind, and the first examples (kind, context)."""
    n = bad = 0
    by_kind = {k: 0 for k in KINDS}
    examples: list[dict] = []
    for text in texts:
        n += 1
        found = defects(text)
        if found:
            bad += 1
            for kind, context in found.items():
                by_kind[kind] += 1
                if len(examples) < max_examples:
                    examples.append({"kind": kind, "context": context})
    return {"passages": n, "defective": bad, "share": bad / n if n else None, "by_kind": by_kind,
            "examples": examples}


def release_defects(stage, max_share: float, max_examples: int = 10) -> dict:
    """The defect measure of a staged release's passages (data/*.parquet `input`), with the configured bound and
    a warning when the share is above it: what manifest["text_defects"] holds."""
    from pathlib import Path

    import pyarrow.parquet as pq

    texts = (t for f in sorted((Path(stage) / "data").glob("*.parquet"))
             for t in pq.read_table(f, columns=["input"]).column("input").to_pylist())
    out = {**measure(texts, max_examples), "max_share": float(max_share)}
    if out["share"] is not None and out["share"] > max_share:
        out["warning"] = (f"{out['share']:.1%} of the released passages have holes or leftover markup (more than "
                          f"text_defects.max_share = {max_share:.1%}): see the examples")
    return out
