"""Text measures of the generation detectors: where a passage is cut, how its words are counted, how much of a
continuation repeats the true one (n-gram coverage, Hallinan et al.) and how many of its words it recalls
(ROUGE-1 recall, SaMIA).

The cut: whitespace words, `keep = max(1, min(int(L * prefix), L - 1))` of the L words go to the prompt (SaMIA's
`int(L * ratio)`, guarded so both sides have a word); the prompt is the text up to the end of its last word, the
reference is the rest without its leading whitespace: nothing of the text is lost or re-spaced.

Coverage tokens: words (`\\w+`, with an apostrophe tail such as "don't") and every other non-space character as
its own token, each NFKD-folded (accents dropped, as unidecode does for Latin text), case kept (the
reference code's casual_tokenize on unidecoded text, without its emoticon and URL rules). A generation token is
covered when it lies inside a run of at least n consecutive generation tokens that also occurs, token for token,
in the reference. This is a token-level match: the reference code detokenizes each window and looks for it as a
substring of the reference string, which can also match inside a word ("the cat" in "bathe cat"); here it
cannot. With `unique`, a matched n-gram covers only at its first occurrence in the generation (the reference
code's unique spans), so a model that repeats one remembered phrase is not paid for each repeat.
"""
from __future__ import annotations

import re
import unicodedata
import zlib
from collections import Counter
from typing import Sequence

_WS_WORD = re.compile(r"\S+")
_TOKEN = re.compile(r"\w+(?:'\w+)?|[^\w\s]", re.UNICODE)


def split_passage(text: str, prefix: float) -> tuple[str, str, int]:
    """(prompt, reference, words in the prompt). A text of fewer than 2 words has no reference: ("", "", 0)."""
    words = list(_WS_WORD.finditer(text))
    n = len(words)
    if n < 2:
        return "", "", 0
    keep = max(1, min(int(n * prefix), n - 1))
    cut = words[keep - 1].end()
    return text[:cut], text[cut:].lstrip(), keep


def fold(text: str) -> str:
    """Accents and compatibility forms folded to ASCII where they have an ASCII base (é -> e, ﬁ -> fi)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def tokens(text: str) -> list[str]:
    """The coverage tokens of `text`: cut on the text as written, each folded (so a token's position in the text is
    known, for marking spans)."""
    return [fold(t) for t in _TOKEN.findall(text or "")]


def covered_mask(gen: Sequence[str], ref: Sequence[str], n: int, unique: bool = False) -> list[bool]:
    """For each generation token: inside a matched run of >= n tokens (see the module docstring)."""
    mask = [False] * len(gen)
    if n < 1 or len(gen) < n or len(ref) < n:
        return mask
    ref_grams = {tuple(ref[i:i + n]) for i in range(len(ref) - n + 1)}
    seen: set = set()
    for i in range(len(gen) - n + 1):
        gram = tuple(gen[i:i + n])
        if gram in ref_grams and not (unique and gram in seen):
            for j in range(i, i + n):
                mask[j] = True
        seen.add(gram)
    return mask


def coverage(gen_text: str, ref_text: str, n: int, unique: bool = False) -> float:
    """The share of the generation's tokens covered by runs of >= n tokens of the reference (0 for a generation
    shorter than n tokens, as the reference code's `too_short`)."""
    gen = tokens(gen_text)
    if len(gen) < n:
        return 0.0
    mask = covered_mask(gen, tokens(ref_text), n, unique)
    return sum(mask) / len(gen)


def creativity_index(gen_text: str, ref_text: str, min_n: int = 2, max_n: int = 12, unique: bool = False) -> float:
    """Hallinan et al.'s modified creativity index: the sum of the coverages at n = min_n..max_n (higher = more
    copied; Lu et al.'s original sums 1 - coverage)."""
    gen, ref = tokens(gen_text), tokens(ref_text)
    total = 0.0
    for n in range(min_n, max_n + 1):
        if len(gen) >= n:
            total += sum(covered_mask(gen, ref, n, unique)) / len(gen)
    return total


def covered_spans(gen_text: str, ref_text: str, n: int, unique: bool = False) -> list[tuple[int, int]]:
    """Character spans of `gen_text` that coverage counts as covered (merged), for marking them in a report."""
    found = [(m.start(), m.end()) for m in _TOKEN.finditer(gen_text)]
    mask = covered_mask(tokens(gen_text), tokens(ref_text), n, unique)
    spans: list[tuple[int, int]] = []
    for (a, b), on in zip(found, mask):
        if not on:
            continue
        if spans and not gen_text[spans[-1][1]:a].strip():
            spans[-1] = (spans[-1][0], b)
        else:
            spans.append((a, b))
    return spans


def rouge1_recall(candidate: str, reference: str) -> float:
    """SaMIA's ROUGE-1 recall: clipped unigram overlap / reference words; whitespace words, case and punctuation
    kept, as the reference code splits them. 0 when either side is empty."""
    cand, ref = (candidate or "").split(), (reference or "").split()
    if not cand or not ref:
        return 0.0
    overlap = Counter(cand) & Counter(ref)
    return sum(overlap.values()) / len(ref)


def zlib_size(text: str) -> int:
    """SaMIA*zlib's weight: the zlib-compressed size in bytes of the candidate's words joined by spaces."""
    return len(zlib.compress(" ".join((text or "").split()).encode("utf-8")))


def word_count(text: str) -> int:
    return len(_WS_WORD.findall(text or ""))
