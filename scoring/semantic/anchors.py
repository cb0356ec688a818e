"""What of a text survives a rephrase or a translation: its anchors, the evidence verify.py looks for in a corpus
window.

A rephraser changes the wording but keeps what the item is about:
- numbers: a word problem's quantities. Normalised so that spellings of one value are equal ("1,200" = "1200",
  "3.50" = "3.5", "25%" = "25", "$4" = "4", "-3", a decimal comma "3,5" = "3.5" where it cannot be a list or a
  thousands group: between spaces, "[1,2]" is two numbers), and English number words too, since rephrasers spell
  numbers out ("twelve" = "12", "twenty-five" = "25"). Digits are the same in most languages, so numbers also
  survive a translation;
- entities: names, runs of capitalised words that do not start a sentence ("Oakwood Middle School" is one name;
  places, months), in any script with case; a name that only ever starts a sentence is missed (the first word of a
  question often is), and a German item's nouns count (harmless: the window side is matched case-blind);
- rare words: lowercased words that wordfreq puts below a zipf frequency (3.0: about once per million words), the
  topic words a rephrase keeps ("palindrome", "barrettes");
- code: identifiers with "_", camelCase or PascalCase inside, or called ("sort_by(", "getName", "parse("), and
  the contents of string literals: what survives a rephrase of a programming problem.
Each anchor belongs to one kind, the first that claims it in the order numbers, code, entities, rare words, so
verify.py never counts one word twice. Words are scoring/overlap/ngrams.py's (`\\w+` runs, lowercased), so a
window is read the same way as by the verbatim scan.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from scoring.overlap.ngrams import WORD, words

KINDS = ("numbers", "code", "entities", "rare_words")
RARE_ZIPF = 3.0
LANGUAGE = "en"

UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen").split()
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
NUMBER_WORDS = {w: i for i, w in enumerate(UNITS)} | TENS

# A digit number not glued to a word or to another number: an optional sign (ASCII or U+2212), thousands groups of
# exactly three digits, an optional decimal part. Lookbehind: "x2" or "v1.2" are not numbers, "5-3" is 5 and 3, and
# "[1,2,3]" is 1, 2 and 3 (a comma group that is not three digits is a list).
# "Glued" means to a Latin letter, a digit or "_": CJK text writes digits against its characters ("有1,050张"), and a
# translation's numbers must still be read.
LATIN = r"0-9A-Za-z_\u00c0-\u024f"
DIGITS = re.compile(rf"(?<![{LATIN}.])([-\u2212](?=\d))?(\d{{1,3}}(?:[,\u00a0\u202f\u2009]\d{{3}})+(?![\d,])|\d+)"
                    rf"(\.\d+)?(?![{LATIN}])")
# Thousands separators: a comma, or the no-break, narrow no-break and thin spaces that French, Russian or SI style
# write ("1\u202f050" = 1050), so a translated item's numbers equal the original's. A plain space is not one: "in 1 050
# ways" is rarer than "page 3 100 times".
THOUSANDS = "[,\u00a0\u202f\u2009]"
# A decimal comma only between blanks (or a currency sign and a blank): "3,5 kg" but not "[1,2]", "1,2,3" or "1,200".
DECIMAL_COMMA = re.compile(r"(?:(?<=\s)|(?<=^)|(?<=[$€£]))([-\u2212])?(\d+),(\d{1,2})(?=\s|$|[%.;:!?](?:\s|$))")
SPELLED = re.compile(r"\b(" + "|".join(TENS) + r")(?:[- ](" + "|".join(UNITS[1:10]) + r"))?\b|\b("
                     + "|".join(sorted(UNITS, key=len, reverse=True)) + r")\b", re.IGNORECASE)
# Where a sentence's first word starts: after . ! ? (and closing quotes or brackets) and blanks, or a line break.
SENTENCE_START = re.compile(r"(?:[.!?\u2026\u3002\uff01\uff1f]+[\"'\u201d\u2019\u00bb)\]]*\s+|\n\s*)"
                            r"[\"'\u201c\u2018\u00ab(\[]*")
CALLED = re.compile(r"([^\W\d]\w+)\(")
INNER_CAPITAL = re.compile(r"[^\W\d_]*[a-z\d][A-Z]\w*")  # camelCase, PascalCase: a capital after a lower letter
LITERAL = re.compile(r"\"([^\"\n]{2,80})\"|(?<!\w)'([^'\n]{2,80})'(?!\w)")


@dataclass(frozen=True)
class Anchors:
    numbers: frozenset[str] = frozenset()
    code: frozenset[str] = frozenset()  # identifiers, and string literals' contents
    entities: frozenset[str] = frozenset()  # as written; matched case-blind
    rare_words: frozenset[str] = frozenset()  # lowercased
    answer: frozenset[str] = frozenset()  # the answer's numbers, or its words when it has none

    def of(self, kind: str) -> frozenset[str]:
        return getattr(self, kind)


def normal_number(sign: str | None, integer: str, fraction: str = "") -> str | None:
    """One spelling per value: no thousands commas, no trailing zeros, no leading zeros, no "-0"."""
    try:
        value = Decimal(re.sub(THOUSANDS, "", integer) + (fraction or ""))
    except InvalidOperation:
        return None
    if sign and value:
        value = -value
    return format(value.normalize(), "f")


def numbers(text: str) -> frozenset[str]:
    """The normalised numbers of a text: digits (with the rules above) and English number words."""
    found = set()
    commas = []
    for m in DECIMAL_COMMA.finditer(text):
        found.add(normal_number(m.group(1), m.group(2), "." + m.group(3)))
        commas.append(m.span())
    for m in DIGITS.finditer(text):
        if not any(lo <= m.start() < hi for lo, hi in commas):
            found.add(normal_number(m.group(1), m.group(2), m.group(3) or ""))
    for m in SPELLED.finditer(text):
        if m.group(3):
            found.add(str(NUMBER_WORDS[m.group(3).lower()]))
        else:
            found.add(str(TENS[m.group(1).lower()] + (NUMBER_WORDS[m.group(2).lower()] if m.group(2) else 0)))
    found.discard(None)
    return frozenset(found)


def sentence_starts(text: str) -> set[int]:
    """Character offsets at which a sentence's first word begins (the text's first word included)."""
    starts = {m.end() for m in SENTENCE_START.finditer(text)}
    first = WORD.search(text)
    if first:
        starts.add(first.start())
    return starts


def code_tokens(text: str) -> frozenset[str]:
    """Identifiers that look like code (with "_", an inner capital, or called) and string literals' contents."""
    found = {m.group(1) for m in CALLED.finditer(text)}
    for m in WORD.finditer(text):
        w = m.group()
        if ("_" in w and any(c.isalpha() for c in w)) or INNER_CAPITAL.fullmatch(w):
            found.add(w)
    found.update(a or b for a, b in LITERAL.findall(text))
    return frozenset(found)


def entities(text: str, starts: set[int] | None = None) -> frozenset[str]:
    """Names: capitalised words (two letters or more, no digit or "_") that do not begin a sentence, a run of them
    separated by blanks only being one name as written ("Oakwood Middle School", "North Fork"): a rephrase that drops
    a school's name loses one name, not three, and a list ("Tomas, Elena and Kenji") stays three names."""
    starts = sentence_starts(text) if starts is None else starts
    runs: list[list[str]] = []
    prev_end = None
    for m in WORD.finditer(text):
        w = m.group()
        if m.start() in starts or len(w) < 2 or not w[0].isupper() or not w.isalpha():
            prev_end = None
            continue
        if prev_end is not None and text[prev_end:m.start()].isspace():
            runs[-1].append(w)
        else:
            runs.append([w])
        prev_end = m.end()
    return frozenset(" ".join(r) for r in runs)


@functools.lru_cache(maxsize=1 << 18)
def zipf(word: str, language: str = LANGUAGE) -> float:
    """wordfreq's zipf frequency (log10 of uses per billion words; 0 for a word it does not know), cached: a
    corpus of windows asks about the same few hundred thousand words over and over."""
    from wordfreq import zipf_frequency

    return zipf_frequency(word, language)


def rare_words(text: str, threshold: float = RARE_ZIPF, language: str = LANGUAGE) -> frozenset[str]:
    """Lowercased alphabetic words rarer than `threshold` (number words left to `numbers`)."""
    return frozenset(w for w in set(words(text))
                     if w.isalpha() and w not in NUMBER_WORDS and zipf(w, language) < threshold)


def answer_anchors(answer: str) -> frozenset[str]:
    """What of a benchmark row's target to look for: the final answer (after GSM8K's last "####", when there is
    one), as its numbers, or as its words when it has no number ("Paris" -> {"paris"})."""
    final = answer.rsplit("####", 1)[-1]
    return numbers(final) or frozenset(words(final))


def anchors(text: str, answer: str | None = None, rare_threshold: float = RARE_ZIPF,
            language: str = LANGUAGE) -> Anchors:
    """A text's anchors by kind, each anchor in one kind only (numbers, code, entities, rare words in that order),
    and the answer's when the row carries one."""
    nums = numbers(text)
    code = code_tokens(text) - nums
    taken = {c.lower() for c in code} | set(nums)
    # a name's words that another kind claimed are left out of it (a code token such as "HashMap" in a run)
    ents = frozenset(n for n in (" ".join(w for w in e.split() if w.lower() not in taken) for e in entities(text))
                     if n)
    taken |= {w.lower() for e in ents for w in e.split()}
    rare = frozenset(w for w in rare_words(text, rare_threshold, language) if w not in taken)
    return Anchors(nums, code, ents, rare, answer_anchors(answer) if answer is not None else frozenset())
