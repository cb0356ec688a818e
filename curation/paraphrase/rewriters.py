"""Paraphrase a benchmark row by replacing about a share `rate` of its content words (WikiMIA's paraphrased
setting, made deterministic): with WordNet synonyms (`wordnet`) or a local masked LM's fill-in (`mlm:PATH`).

The rule, the same for every rewriter (docs/paraphrase.md):
- *words* are maximal runs of letters (`[^\\W\\d_]+`: Unicode letters, no digits or `_`);
- a *content word* is a word of at least 3 letters, not in FUNCTION_WORDS, not touching a digit or `_` (codes such
  as "B12", "mp3") and not part of a contraction (the tail after an apostrophe, "o'clock"; the head of a negative
  contraction, "don't", "won't");
- per row, target = round-half-up(rate x content words). The row's content words are walked in a seeded random
  order (numpy's PCG64 seeded with `stable_seed("paraphrase", seed, row id)`, so a row's result depends on its id
  and text only, never on which other rows share its part) and each word that has a substitute is replaced, until
  `target` words are replaced. Words without a substitute are skipped, so fewer than `target` may change: the job
  measures and records the share actually changed;
- a substitute takes the original's capitalisation (`scoring.lm.mlm.match_case`) and is swapped in by character span,
  so everything else in the text (spacing, punctuation, other words) stays byte-identical.

Substitutes:
- `wordnet`: the word (lower-cased) is looked up as a lemma in every part of speech; if it is none, as the regular
  "-s" form of a noun or verb ("cities" -> "city", "boxes" -> "box", "runs" -> "run"). Of the parts of speech it
  has, the one with the most senses tagged in SemCor (`tagsense_cnt`) is taken (ties: noun, verb, adj, adv); in it,
  the most frequent synset (the index's first); in that synset, the first lemma (WordNet's order) that is a single
  word (no `_`), alphabetic and different from the word and its base form, ignoring case. An "-s" form's substitute
  gets the same ending by `plural_s`. Irregular forms ("went", "children") are not lemmas and not "-s" forms: they
  have no substitute (a substitute would need its own irregular form).
- `mlm:PATH`: a content word the MLM holds as one token (`scoring.lm.mlm.MaskedLM.encode`'s slots) is masked on its own
  in the original text and filled in; the substitute is the MLM's most probable whole word that is itself a
  content word (among its `MLM_TOP` best), so a content word is never replaced by "the".
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from scoring.lm.mlm import match_case
from scoring.lm.views import stable_seed

MIN_LETTERS = 3
MLM_TOP = 50  # whole-word candidates searched for a content word (a weak MLM ranks "the", "of" first)
_WORD = re.compile(r"[^\W\d_]+")
_APOSTROPHES = "'’"
_OPENERS = "\"'“‘«([{"
_SENTENCE_ENDS = ".!?:…\n\r"

# English function words of 3+ letters (shorter words are never content words): determiners, pronouns,
# prepositions, conjunctions, auxiliaries and modals, and a few adverbs that carry no content of their own.
FUNCTION_WORDS = frozenset("""
the and but for nor yet not are was were been being has have had having does did doing will would shall should
can could may might must this that these those there here where when what which who whom whose why how than then
thus also such some any all each every both either neither none few many much more most less least own other
another same very just only even too our ours your yours his her hers its their theirs him she they them you
itself himself herself themselves ourselves yourself yourselves myself about above across after against along
among amongst around before behind below beneath beside besides between beyond during except from into inside
near off onto out outside over since through throughout till toward towards under underneath until upon with
within without via although because though unless whereas whether while whilst once per let yes
""".split())


@dataclass(frozen=True)
class Word:
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Swap:
    start: int  # character span in the original text
    end: int
    old: str
    new: str


@dataclass(frozen=True)
class RewriteResult:
    text: str
    words: int
    content_words: int
    changed: int
    swaps: tuple[Swap, ...]


def find_words(text: str) -> list[Word]:
    return [Word(m.start(), m.end(), m.group()) for m in _WORD.finditer(text)]


def is_content_word(word: str) -> bool:
    """The word on its own (no context): long enough and not a function word."""
    return len(word) >= MIN_LETTERS and word.lower() not in FUNCTION_WORDS


def is_content(text: str, w: Word) -> bool:
    """A content word in its place in `text` (see the module docstring)."""
    before, after = text[max(0, w.start - 2):w.start], text[w.end:w.end + 2]
    if before[-1:].isdigit() or before[-1:] == "_":
        return False
    if len(before) == 2 and before[1] in _APOSTROPHES and before[0].isalpha():
        return False  # the tail of a contraction or elision: o'clock, rock'n'roll (a quoted 'word' is content)
    if after[:1].isdigit() or after[:1] == "_":
        return False
    if len(after) == 2 and after[0] in _APOSTROPHES and after[1] in "tT" and not text[w.end + 2:w.end + 3].isalpha():
        return False  # don't, isn't, won't: the head of a negative contraction
    if any(c.isupper() for c in w.text[1:]) or (w.text[0].isupper() and not _starts_sentence(text, w.start)):
        return False  # a name or an acronym: no synonym stands in for "March", "Lincoln" or "NATO"
    return is_content_word(w.text)


def _starts_sentence(text: str, i: int) -> bool:
    """Only spaces, opening quotes or brackets between `i` and the start of the text, a line break or [.!?:…]."""
    i -= 1
    while i >= 0 and (text[i] in " \t" or text[i] in _OPENERS):
        i -= 1
    return i < 0 or text[i] in _SENTENCE_ENDS


def check_rate(rate: float) -> float:
    rate = float(rate)
    if not 0.0 < rate <= 1.0:  # also refuses NaN
        raise ValueError(f"rate must be in (0, 1] (the share of each row's content words to replace), got {rate}")
    return rate


def target_count(rate: float, content_words: int) -> int:
    """round-half-up(rate x n): Python's round() would send 2.5 to 2 but 3.5 to 4."""
    return min(content_words, int(math.floor(rate * content_words + 0.5)))


def plural_s(word: str) -> str:
    """The regular "-s" form: box -> boxes, city -> cities, day -> days, car -> cars."""
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if len(word) > 1 and word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def plural_bases(word: str) -> list[str]:
    """The words whose `plural_s` is `word`, tried in this order: -ies -> -y, -es, -s."""
    cands = [word[:-3] + "y"] if word.endswith("ies") else []
    cands += [word[:-2]] if word.endswith("es") else []
    cands += [word[:-1]] if word.endswith("s") else []
    return [b for b in cands if len(b) >= 2 and plural_s(b) == word]


class Rewriter:
    """Replace about `rate` of a row's content words, deterministically in (seed, row id, text)."""

    kind = "base"

    def __init__(self, seed: int, rate: float):
        self.seed, self.rate = int(seed), check_rate(rate)

    def rewrite(self, rid: str, text: str) -> RewriteResult:
        words = find_words(text)
        content = [w for w in words if is_content(text, w)]
        target = target_count(self.rate, len(content))
        order = np.random.default_rng(stable_seed("paraphrase", self.seed, rid)).permutation(len(content))
        swaps = sorted(self.choose(text, [content[i] for i in order], target) if target else [],
                       key=lambda s: s.start)
        out = text
        for s in reversed(swaps):  # right to left: the spans before a swap stay valid
            out = out[:s.start] + s.new + out[s.end:]
        return RewriteResult(out, len(words), len(content), len(swaps), tuple(swaps))

    def choose(self, text: str, walk: Sequence[Word], target: int) -> list[Swap]:
        """Walk the content words in order; replace each that has a substitute until `target` are replaced."""
        out = []
        for w in walk:
            if len(out) == target:
                break
            new = self.substitute(w.text)
            if new:
                out.append(Swap(w.start, w.end, w.text, new))
        return out

    def substitute(self, word: str) -> str | None:
        raise NotImplementedError


class WordNetRewriter(Rewriter):
    kind = "wordnet"

    def __init__(self, seed: int, rate: float, wordnet_dir: str | Path | None = None):
        from curation.paraphrase.wordnet import WordNet, locate

        super().__init__(seed, rate)
        self.wordnet = WordNet(locate(wordnet_dir)[0])
        self._cache: dict[str, str | None] = {}

    def substitute(self, word: str) -> str | None:
        lower = word.lower()
        if lower not in self._cache:
            self._cache[lower] = self._synonym(lower)
        new = self._cache[lower]
        return None if new is None else match_case(new, word)

    def _synonym(self, lower: str) -> str | None:
        from curation.paraphrase.wordnet import POS

        base, inflect, entries = lower, False, self.wordnet.entries(lower)
        if not entries:
            for b in plural_bases(lower):
                entries = {p: e for p, e in self.wordnet.entries(b).items() if p in ("noun", "verb")}
                if entries:
                    base, inflect = b, True
                    break
        if not entries:
            return None
        pos = max(entries, key=lambda p: (entries[p].tagged, -POS.index(p)))
        for lemma in self.wordnet.synset_words(pos, entries[pos].offsets[0]):
            if "_" in lemma or not lemma.isalpha() or lemma.lower() in (lower, base):
                continue
            new = plural_s(lemma) if inflect else lemma
            if new.lower() != lower:
                return new
        return None


class MlmRewriter(Rewriter):
    kind = "mlm"

    def __init__(self, seed: int, rate: float, path: str, device: str = "cpu", threads: int | None = None):
        from scoring.lm.mlm import MaskedLM

        super().__init__(seed, rate)
        if threads:
            import torch

            torch.set_num_threads(int(threads))
        self.mlm = MaskedLM(check_mlm_path(path), device=device)

    def choose(self, text: str, walk: Sequence[Word], target: int) -> list[Swap]:
        """Fill in only as many slots as are still needed, in walk order: one MLM pass per slot, batched."""
        ids, slots = self.mlm.encode(text)
        by_span = {(s.start, s.end): s for s in slots}
        eligible = [(w, by_span[(w.start, w.end)]) for w in walk if (w.start, w.end) in by_span]
        out, k = [], 0
        while len(out) < target and k < len(eligible):
            chunk = eligible[k:k + target - len(out)]
            k += len(chunk)
            for (w, _), cands in zip(chunk, self.mlm.substitutes(ids, [s for _, s in chunk], top=MLM_TOP,
                                                                  mode="mask")):
                pick = next((c.word for c in cands if is_content_word(c.word)), None)
                if pick:
                    out.append(Swap(w.start, w.end, w.text, pick))
        return out


REWRITERS = {"wordnet": WordNetRewriter, "mlm": MlmRewriter}


def parse_spec(spec: str) -> tuple[str, str | None]:
    """`wordnet` -> ("wordnet", None); `mlm:PATH` -> ("mlm", PATH)."""
    kind, sep, arg = str(spec).partition(":")
    if kind == "wordnet" and not sep:
        return kind, None
    if kind == "mlm" and arg:
        return kind, arg
    raise ValueError(f"unknown rewriter {spec!r}: use `wordnet` or `mlm:PATH` (a local masked LM directory)")


def check_mlm_path(path: str) -> str:
    p = Path(path)
    if not p.is_dir() or not (p / "config.json").is_file():
        raise FileNotFoundError(f"mlm:{path}: not a local masked LM directory (need config.json and a fast "
                                "tokenizer, e.g. a saved BERT/RoBERTa/DistilBERT)")
    return str(p)


def describe_rewriter(spec: str, wordnet_dir: str | None = None) -> dict:
    """What the manifest records about the rewriter; cheap (no table or model is loaded), so the driver calls it to
    refuse a bad spec, a missing MLM or missing WordNet data before anything is written."""
    kind, arg = parse_spec(spec)
    if kind == "wordnet":
        from curation.paraphrase.wordnet import describe

        return {"spec": spec, "kind": kind, "wordnet": describe(wordnet_dir)}
    return {"spec": spec, "kind": kind, "path": str(Path(check_mlm_path(arg)).resolve())}


def make_rewriter(spec: str, seed: int, rate: float, wordnet_dir: str | None = None, *, device: str = "cpu",
                  threads: int | None = None) -> Rewriter:
    kind, arg = parse_spec(spec)
    if kind == "wordnet":
        return WordNetRewriter(seed, rate, wordnet_dir)
    return REWRITERS[kind](seed, rate, arg, device=device, threads=threads)
