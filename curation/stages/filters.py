"""Curation stages: small, typed steps over document rows, testable without Ray.

A *row* here is a Document dict (curation/document.py) that stages annotate with computed fields. A row-level stage
declares what it reads (`requires`; a stage that reads a meta key a source derives from the text, such as
has_code, requires "text": a deferred document gets its text only past the leading stages that read none,
pipeline.annotate_documents) and adds (`provides`), computes its fields in `annotate` (scores), and decides in
`decide` (datatrove style: `True`, or `(False, reason)`, or `(False, reason, detail)`). Keeping the two apart means
a release can record why a row was dropped from the same numbers that dropped it.

Row-level stages, in build order (`document_stages(cfg)`):
    source        quarantine documents a source yielded itself (meta.quarantine), kept with their own stage name
    cutoff        label from the time cutoffs: member / non-member / dropped (corpus sources: the side, then
                  `cutoff.overlap` drops non-members that share too many n-grams with the training corpus)
    title         title patterns ("^List of", "^Timeline of")
    words         min/max words
    code_formula  posts with code or formulas
    language      language ID (py3langid), when `filters.languages` is set
    dedup         keys for exact and near-duplicate removal (the decision is global: curation/stages/dedup.py)
Then the global steps, as passes over blocks (curation/release/passes.py): dedup decisions (curation/stages/dedup.py),
`bucket_rows` (length buckets with truncation) and the balanced sample (curation/stages/sampling.py). Every drop has a
reason; curation/stages/counts.py counts them.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Iterable, Mapping, Union

from curation.stages.dedup import MinHasher
from curation.document import QuarantineRow, utc
from curation.text import exact_key, looks_like_code, looks_like_formula, truncate_words, word_count

Verdict = Union[bool, tuple]  # True | (False, reason) | (False, reason, detail)
Row = dict[str, Any]

MEMBER, NONMEMBER = 1, 0


class Stage:
    name: str = "stage"
    requires: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()

    def annotate(self, row: Row) -> dict[str, Any]:
        return {}

    def decide(self, row: Row) -> Verdict:
        return True

    def stage_name(self, row: Row) -> str:
        return self.name

    def __call__(self, row: Row) -> Verdict:
        row.update(self.annotate(row))
        return self.decide(row)


def run_row_stages(row: Row, stages: Iterable[Stage]) -> QuarantineRow | None:
    """Annotate `row` in place through `stages`; the first drop ends it and is returned as a quarantine row."""
    for stage in stages:
        verdict = stage(row)
        if verdict is True:
            continue
        keep, reason, detail = _unpack(verdict)
        if not keep:
            return QuarantineRow(id=row["id"], stage=stage.stage_name(row), reason=reason, detail=detail)
    return None


def _unpack(verdict: Verdict) -> tuple[bool, str, str]:
    if verdict is False:
        raise ValueError("a drop needs a reason: return (False, reason) or (False, reason, detail)")
    keep, reason = bool(verdict[0]), str(verdict[1])
    return keep, reason, str(verdict[2]) if len(verdict) > 2 else ""


# ---------------------------------------------------------------- row-level stages

class SourceQuarantine(Stage):
    """Items a source rejected itself (an unparsable paper, a missing page) arrive as documents with
    meta.quarantine = {stage, reason, detail}; they leave here, under the source's own stage name."""

    name = "source"
    requires = ("meta",)

    def decide(self, row: Row) -> Verdict:
        q = (row.get("meta") or {}).get("quarantine")
        return True if not q else (False, q.get("reason") or "quarantined", q.get("detail") or "")

    def stage_name(self, row: Row) -> str:
        q = (row.get("meta") or {}).get("quarantine") or {}
        return q.get("stage") or self.name


class TimeCutoff(Stage):
    """Members: created before `member_before` with no thread activity from then on (`meta.activity_at`, where a
    source knows it: answers and edits for Stack Exchange). Non-members: created on or after `nonmember_after`
    (and before `nonmember_before` when set). Everything else is dropped with the reason why.

    A source that dates documents by evidence rather than by a creation time (the Wikipedia dump source: "in the
    dump before the cutoff", "new since it") restricts each document to the label that evidence supports with
    `meta.label_allowed` (1 or 0). A document whose created_at would give it the other label is dropped
    (`contradicts_source_dating`), never relabelled."""

    name = "cutoff"
    requires = ("created_at", "meta")
    provides = ("label", "month")

    def __init__(self, member_before: str | datetime, nonmember_after: str | datetime,
                 nonmember_before: str | datetime | None = None):
        self.member_before = utc(member_before)
        self.nonmember_after = utc(nonmember_after)
        self.nonmember_before = utc(nonmember_before) if nonmember_before else None

    def _time_label(self, row: Row, created: datetime) -> int | None:
        if created < self.member_before:
            return MEMBER if self._activity(row, created) < self.member_before else None
        if created >= self.nonmember_after and (self.nonmember_before is None or created < self.nonmember_before):
            return NONMEMBER
        return None

    def annotate(self, row: Row) -> dict[str, Any]:
        created = row.get("created_at")
        if created is None:
            return {"label": None, "month": ""}
        created = utc(created)
        label = self._time_label(row, created)
        allowed = (row.get("meta") or {}).get("label_allowed")
        if allowed is not None and label is not None and label != int(allowed):
            label = None
        # strftime("%Y-%m") costs ~1 us a row; the same text for years from 1000 on (%Y does not pad shorter ones)
        month = f"{created.year}-{created.month:02d}" if created.year >= 1000 else created.strftime("%Y-%m")
        return {"label": label, "month": month}

    @staticmethod
    def _activity(row: Row, created: datetime) -> datetime:
        activity = (row.get("meta") or {}).get("activity_at")
        return max(created, utc(activity)) if activity else created

    def decide(self, row: Row) -> Verdict:
        if row["label"] is not None:
            return True
        created = row.get("created_at")
        if created is None:
            return False, "missing_date"
        created = utc(created)
        if self._time_label(row, created) is not None:  # only a source's label_allowed turns a label down
            allowed = (row.get("meta") or {}).get("label_allowed")
            return False, "contradicts_source_dating", f"label_allowed={allowed}, created_at={created.isoformat()}"
        if created < self.member_before:
            return False, "member_active_after_cutoff", f"activity_at={self._activity(row, created).isoformat()}"
        if created < self.nonmember_after:
            return False, "between_cutoffs", f"created_at={created.isoformat()}"
        return False, "after_window", f"created_at={created.isoformat()}"


class TrainingOverlap(Stage):
    """A `kind: corpus` source's non-members (held-out text) whose released passage shares more than `max_overlap`
    of its n-grams with the whole training corpus (`meta.train_overlap`, measured by the source) are not
    non-members that can be trusted: dropped as `overlaps_training_corpus` (MIMIR's ngram_13_0.2). Counted under
    the cutoff step: it is part of deciding the label."""

    name = "cutoff.overlap"
    requires = ("label", "meta")

    def __init__(self, max_overlap: float):
        self.max_overlap = float(max_overlap)

    def decide(self, row: Row) -> Verdict:
        share = (row.get("meta") or {}).get("train_overlap")
        if row.get("label") == NONMEMBER and share is not None and share > self.max_overlap:
            return False, "overlaps_training_corpus", f"share={share:.4f} > {self.max_overlap:g}"
        return True


class TitlePattern(Stage):
    name = "title"
    requires = ("title",)

    def __init__(self, patterns: Iterable[str]):
        self.patterns = [re.compile(p) for p in patterns]

    def decide(self, row: Row) -> Verdict:
        title = row.get("title") or ""
        for pattern in self.patterns:
            if pattern.search(title):
                return False, "title_pattern", pattern.pattern
        return True


class WordRange(Stage):
    name = "words"
    requires = ("text",)
    provides = ("word_count",)

    def __init__(self, min_words: int | None = None, max_words: int | None = None):
        self.min_words, self.max_words = min_words, max_words

    def annotate(self, row: Row) -> dict[str, Any]:
        return {"word_count": word_count(row.get("text") or "")}

    def decide(self, row: Row) -> Verdict:
        n = row["word_count"]
        if self.min_words is not None and n < self.min_words:
            return False, "too_few_words", f"{n} < {self.min_words}"
        if self.max_words is not None and n > self.max_words:
            return False, "too_many_words", f"{n} > {self.max_words}"
        return True


class CodeOrFormula(Stage):
    """Uses the source's flags when it has them (HTML sources see <pre>/<code>), else text heuristics."""

    name = "code_formula"
    requires = ("text", "meta")
    provides = ("has_code", "has_formula")

    def __init__(self, drop_code: bool, drop_formula: bool):
        self.drop_code, self.drop_formula = drop_code, drop_formula

    def annotate(self, row: Row) -> dict[str, Any]:
        meta, text = row.get("meta") or {}, row.get("text") or ""
        has_code = meta["has_code"] if "has_code" in meta else looks_like_code(text)
        has_formula = meta["has_formula"] if "has_formula" in meta else looks_like_formula(text)
        return {"has_code": bool(has_code), "has_formula": bool(has_formula)}

    def decide(self, row: Row) -> Verdict:
        if self.drop_code and row["has_code"]:
            return False, "has_code"
        if self.drop_formula and row["has_formula"]:
            return False, "has_formula"
        return True


class Language(Stage):
    """py3langid (a pure-Python/numpy langid.py with its model bundled: offline and deterministic), its table widened
    to float32 once for speed with the same scores (curation/stages/language_id.py)."""

    name = "language"
    requires = ("text",)
    provides = ("language", "language_score")

    def __init__(self, languages: Iterable[str], min_score: float = 0.0):
        self.languages = set(languages)
        self.min_score = float(min_score)
        self._identifier = None

    def annotate(self, row: Row) -> dict[str, Any]:
        if self._identifier is None:  # loaded on first use, so that building the stage list stays cheap
            from curation.stages.language_id import shared_identifier

            self._identifier = shared_identifier()  # one per process, whatever the number of stage lists
        lang, prob = self._identifier.classify(row.get("text") or "")
        return {"language": str(lang), "language_score": float(prob)}

    def decide(self, row: Row) -> Verdict:
        if row["language"] not in self.languages or row["language_score"] < self.min_score:
            return False, "language", f"{row['language']}:{row['language_score']:.2f}"
        return True


class DedupKeys(Stage):
    """Scores only: the exact-duplicate key and the MinHash signature. Decisions need every row (dedup.py)."""

    name = "dedup"
    requires = ("text",)
    provides = ("exact_key", "minhash")

    def __init__(self, near: bool, ngram: int = 5, permutations: int = 128):
        self.hasher = MinHasher(ngram=ngram, permutations=permutations) if near else None

    def annotate(self, row: Row) -> dict[str, Any]:
        text = row.get("text") or ""
        return {"exact_key": exact_key(text), "minhash": self.hasher.signature(text) if self.hasher else b""}


def document_stages(cfg: Mapping[str, Any]) -> list[Stage]:
    """The row-level stages a config asks for, in build order."""
    cut, flt, dd = cfg["cutoffs"], cfg["filters"], cfg["dedup"]
    stages: list[Stage] = [
        SourceQuarantine(),
        TimeCutoff(cut["member_before"], cut["nonmember_after"], cut.get("nonmember_before")),
    ]
    if cfg["source"].get("kind") == "corpus":
        stages.append(TrainingOverlap(float(cfg["source"].get("max_overlap", 0.2))))
    if flt["title_patterns"]:
        stages.append(TitlePattern(flt["title_patterns"]))
    stages.append(WordRange(flt["min_words"], flt["max_words"]))
    stages.append(CodeOrFormula(bool(flt["drop_code"]), bool(flt["drop_formula"])))
    if flt["languages"]:
        stages.append(Language(flt["languages"], flt["min_language_score"]))
    if dd["exact"] or dd["near"]:
        stages.append(DedupKeys(bool(dd["near"]), int(dd["ngram"]), int(dd["permutations"])))
    return stages


# ---------------------------------------------------------------- buckets

def bucket_rows(row: Row, buckets: Iterable[int], mode: str = "every") -> list[Row]:
    """Benchmark rows for one labelled document, its text truncated to each bucket's word count.

    mode "every" (WikiMIA): one row per bucket the text is long enough for, so a 150-word text gives 32, 64 and
    128-word rows. mode "largest": only the largest such bucket, so buckets are disjoint (one row per document).
    Row ids are `<document id>@<bucket>`, unique in the release, because scores are joined on id. A document
    given without its text (the Ray runner keeps texts on the workers) gets `input` None, filled after sampling."""
    n = row["word_count"] if row.get("word_count") is not None else word_count(row.get("text") or "")
    fits = [b for b in sorted(buckets) if n >= b]
    if mode == "largest":
        fits = fits[-1:]
    return [
        {
            "id": f"{row['id']}@{b}",
            "input": truncate_words(row["text"], b) if "text" in row else None,  # None: filled once sampled
            "label": int(row["label"]),
            "bucket": int(b),
            "source": row["source"],
            "created_at": utc(row["created_at"]),
            "url": row.get("url") or "",
            "document_id": row["id"],
            "month": row.get("month") or "",
        }
        for b in fits
    ]
