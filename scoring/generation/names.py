"""Name cloze's passages (Chang et al., "Speak, Memory"): a passage qualifies when it names exactly one person with
a one-word proper name, names no other proper noun, and does not repeat the name; the name is then masked.

Which words are names:
- `spacy` (used by `auto` where spaCy and en_core_web_sm are installed): PERSON entities of one token are the
  candidates; every other entity whose text is capitalised counts as another proper name (the original used
  BookNLP's PROP mentions, which spaCy approximates);
- `rule` (the fallback): a capitalised word that does not start a sentence (Tag&Tab's fallback rule) is a proper
  name; a sentence-initial capitalised word counts only where the same word also occurs inside a sentence. Words
  in the original's stop list (god, dad, mother, ...) and the pronoun "I" are not names.
A passage with 0 or several names, or with its name twice, does not qualify: the reason says which, and the job
records it for the row (not_scored in run.json), or quarantines the row when no other method scores it.
"""
from __future__ import annotations

from dataclasses import dataclass

from scoring.lm.ner import WORD, sentences, spacy_pipeline

# The original's stop list: words that BookNLP tags as names but a reader would not.
NOT_NAMES = frozenset({"god", "dad", "mother", "father", "mama", "daddy", "ma", "papa", "mum", "jesus", "christ",
                       "pa", "mom", "kid", "i"})
MASK = "[MASK]"


@dataclass(frozen=True)
class Cloze:
    name: str | None
    masked: str | None
    reason: str | None  # why the passage does not qualify (None when it does)


def _rule_names(text: str) -> list[tuple[int, int]]:
    inside, initial = [], []
    for a, b in sentences(text):
        for k, m in enumerate(WORD.finditer(text, a, b)):
            w = m.group()
            if not w[0].isupper() or not w.isalpha() or w.lower() in NOT_NAMES:
                continue
            (initial if k == 0 else inside).append((m.start(), m.end()))
    seen_inside = {text[a:b] for a, b in inside}
    return sorted(inside + [(a, b) for a, b in initial if text[a:b] in seen_inside])


def _spacy_names(nlp, text: str) -> tuple[list[tuple[int, int]], int]:
    """(one-token PERSON spans, count of other capitalised entities)."""
    persons, others = [], 0
    for e in nlp(text).ents:
        if e.label_ == "PERSON" and len(e) == 1 and e.text.lower() not in NOT_NAMES:
            persons.append((e.start_char, e.end_char))
        elif e.text[:1].isupper():
            others += 1
    return persons, others


def resolve_ner(ner: str) -> str:
    """`auto` → spacy where installed, else rule; `spacy` where it is not installed is an error."""
    if ner not in ("auto", "spacy", "rule"):
        raise ValueError(f"name_cloze ner must be auto, spacy or rule; got {ner!r}")
    if ner == "rule":
        return "rule"
    if spacy_pipeline() is not None:
        return "spacy"
    if ner == "spacy":
        raise RuntimeError("name_cloze ner=spacy asked for, but spaCy or en_core_web_sm is not installed")
    return "rule"


def cloze(text: str, ner: str = "auto") -> Cloze:
    """The passage's one name and the passage with it masked, or why it does not qualify."""
    how = resolve_ner(ner)
    if how == "spacy":
        spans, others = _spacy_names(spacy_pipeline(), text)
    else:
        spans, others = _rule_names(text), 0
    names = [text[a:b] for a, b in spans]
    distinct = sorted(set(names), key=names.index)
    if not distinct:
        return Cloze(None, None, "no_single_name: no proper name found")
    if len(distinct) > 1 or others:
        shown = ", ".join(distinct[:4]) + (f" and {others} other proper noun(s)" if others else "")
        return Cloze(None, None, f"no_single_name: {len(distinct) + others} proper names found ({shown})")
    name = distinct[0]
    lowered = text.lower()
    if len(names) > 1 or sum(1 for m in WORD.finditer(lowered) if m.group() == name.lower()) > 1:
        return Cloze(None, None, f"no_single_name: the name {name!r} occurs more than once")
    a, b = spans[0]
    return Cloze(name, text[:a] + MASK + text[b:], None)


def parse_name(answer: str) -> str:
    """The name in an answer: inside <name>...</name> where the tags are, else the answer without tags and outer
    whitespace (as the original reads it)."""
    import re

    text = answer or ""
    m = re.search(r"<name>(.*?)</name>", text, re.S)
    if m:
        return m.group(1).strip()
    m = re.search(r"<name>(.*)", text, re.S)  # a stop at </name> leaves the tag open
    if m:
        return m.group(1).strip()
    return re.sub(r"<[^>]*>", "", text).strip()


def name_matches(answer: str, name: str) -> bool:
    """Exact match, case-insensitive (the released GPT-4 outputs reproduce the paper's accuracies only so)."""
    return parse_name(answer).lower() == (name or "").strip().lower()
