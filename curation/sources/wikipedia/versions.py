"""The same Wikipedia articles as of each month's end ("WikiSpan", Dated Data: Cheng et al., COLM 2024).

A model trained on a snapshot of month M has read the month-M versions of the articles, so comparing its
familiarity with each month's version *of the same article* dates its training data without the confound of
comparing different documents. This module produces those versions through the MediaWiki API calls the source
already makes (`curation/sources/wikipedia/api.py`), through an injected `fetch` (fixtures in tests):

1. candidates: the recipe's categories, listed exactly as the source lists them (`root_categories`, `depth`,
   `maxlag`, `max_pages` pages enumerated, `skip_title_patterns` applied before any request).
2. choice: the listed pages in a seeded order, sha256(f"{seed}\\x00{pageid}"), which does not depend on the order
   the API lists them in; pages are checked lazily in that order until `articles` are chosen. A page is chosen
   when it has a revision at or before the first month's end (it has a version at every month's end) and that
   version has text (not a redirect, not empty). The check is the first month's revision lookup itself, so a
   chosen article costs no extra request; a rejected one costs one more (`rvdir=newer`, its creation date) to
   say why: created inside the range, after it, or missing.
3. versions: for each chosen article and month, one `revision_as_of(month_end)`; a revision already rendered
   (the article was not edited that month) reuses its text without another `action=parse`, and is still yielded
   as a row: an unchanged month is data. Otherwise `parse_html(oldid)` -> `html_to_text`.
4. truncation: the first `words` words of each version (None = the whole text), whitespace kept, so the same
   span of every version is compared and versions differ only by the edits inside it.

Rows: {id: "wikipedia:{lang}:{pageid}@YYYY-MM", text, date: "YYYY-MM", group: "wikipedia:{lang}:{pageid}",
source: "wikipedia-versions", title, revid, timestamp (of the revision), url (its oldid link)}.
Problems yield quarantine records (`quarantine_record`, stage "versions": {id, stage, reason, detail}), with the
row id for a month's problem and the page id for a page's: title_skipped, page_missing, created_in_range,
created_after_range, fetch_failed, redirect, empty_text, no_revision_as_of. A failed render is not retried for
the next month with the same revision (one parse per revision). Pages listed but never checked (enough were
chosen before them) are only counted. `stats`, when given, receives the counts of the crawl: listed,
title_skipped, checked, not_checked, chosen, rejected {reason: pages}, rows, quarantined_rows {reason: rows},
unchanged_months (rows whose text was reused), revision_requests, parse_requests.
"""
from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping, NamedTuple

from curation.document import utc
from curation.io.http import Fetch, HttpError
from curation.io.ledger import quarantine_record
from curation.sources.wikipedia.api import (MediaWikiError, api_url, category_pages, first_revision,
                                            html_to_text, make_fetch, parse_html, revision_as_of, root_categories)
from scoring.cutoff.periods import month_end, month_label

STAGE = "versions"
SOURCE = "wikipedia-versions"
FAILURES = (HttpError, MediaWikiError, KeyError)
_WORD = re.compile(r"\S+")


def seeded_order(pageids, seed: int = 0) -> list:
    """`pageids` sorted by sha256(f"{seed}\\x00{pageid}"): a seeded shuffle independent of the listing order."""
    return sorted(pageids, key=lambda p: hashlib.sha256(f"{seed}\x00{p}".encode()).hexdigest())


def truncate_words(text: str, words: int | None) -> str:
    """The first `words` words of `text`, its whitespace (paragraph breaks) kept; None keeps it whole."""
    if words is None:
        return text
    for n, m in enumerate(_WORD.finditer(text), 1):
        if n == words:
            return text[:m.end()]
    return text


def _check(words: int | None, articles: int, first_month: int, last_month: int) -> None:
    if articles < 1:
        raise ValueError(f"articles must be at least 1, got {articles}")
    if words is not None and words < 1:
        raise ValueError(f"words must be at least 1 (or None for the whole text), got {words}")
    if last_month < first_month:
        raise ValueError(f"the month range ends ({month_label(last_month)}) before it starts "
                         f"({month_label(first_month)})")


class Problem(NamedTuple):
    """Why a page or a version has no row: a quarantine reason and its detail."""
    reason: str
    detail: str


def iter_versions(source_cfg: Mapping[str, Any], first_month: int, last_month: int, *, articles: int,
                  words: int | None = 256, seed: int = 0, fetch: Fetch | None = None,
                  stats: dict | None = None) -> Iterator[dict]:
    """Rows (and quarantine records, which carry a `reason`) of up to `articles` articles as of every month's end
    from `first_month` to `last_month` (month indices, scoring.cutoff.periods), both included. See the module
    docstring. `stats` (a dict, filled in place) gets the crawl's counts: listed = title_skipped + checked +
    not_checked, checked = chosen + sum(rejected), and rows + sum(quarantined_rows) = chosen * months."""
    _check(words, articles, first_month, last_month)
    cfg = dict(source_cfg)
    fetch = fetch or make_fetch(cfg)
    lang = cfg.get("lang", "en")
    maxlag = cfg.get("maxlag", 5)
    skips = [re.compile(p) for p in cfg.get("skip_title_patterns") or []]
    max_pages = cfg.get("max_pages")
    counts = stats if stats is not None else {}
    counts.update({k: 0 for k in ("listed", "title_skipped", "checked", "not_checked", "chosen", "rows",
                                  "unchanged_months", "revision_requests", "parse_requests")})
    counts.update(rejected={}, quarantined_rows={})

    pages = {}
    for n, page in enumerate(category_pages(fetch, root_categories(cfg), int(cfg.get("depth", 1)), maxlag)):
        if max_pages is not None and n >= max_pages:
            break
        counts["listed"] += 1
        hit = next((p.pattern for p in skips if p.search(page["title"])), None)
        if hit is not None:  # before any request, as the source does
            counts["title_skipped"] += 1
            yield quarantine_record(f"wikipedia:{lang}:{page['pageid']}", STAGE, "title_skipped", hit)
            continue
        pages[page["pageid"]] = page

    def as_of(pageid: int, month: int) -> dict | None:
        counts["revision_requests"] += 1
        return revision_as_of(fetch, pageid, month_end(month), maxlag)

    def render(revid: int) -> tuple[str, dict] | Problem:
        """(text, parse) of one revision, or the Problem that leaves it without text."""
        counts["parse_requests"] += 1
        try:
            parsed = parse_html(fetch, revid=revid, maxlag=maxlag)
        except FAILURES as exc:
            return Problem("fetch_failed", f"{type(exc).__name__}: {exc}")
        html = parsed.get("text", "")
        if 'class="redirectMsg"' in html:
            return Problem("redirect", f"revid {revid} is a redirect")
        text = truncate_words(html_to_text(html), words)
        return (text, parsed) if text else Problem("empty_text", f"revid {revid}")

    def reject(group: str, problem: Problem) -> dict:
        counts["rejected"][problem.reason] = counts["rejected"].get(problem.reason, 0) + 1
        return quarantine_record(group, STAGE, problem.reason, problem.detail)

    order = seeded_order(pages, seed)
    for pageid in order:
        if counts["chosen"] >= articles:
            break
        page, group = pages[pageid], f"wikipedia:{lang}:{pageid}"
        counts["checked"] += 1
        try:
            start = as_of(pageid, first_month)  # the choice's check and the first month's lookup at once
            if start is None:  # no version at the first month's end: why, for the record (one more request)
                counts["revision_requests"] += 1
                first = first_revision(fetch, pageid, maxlag)
        except FAILURES as exc:
            yield reject(group, Problem("fetch_failed", f"{type(exc).__name__}: {exc}"))
            continue
        if start is None:
            if first is None:
                yield reject(group, Problem("page_missing", "no revision (deleted since listing?)"))
            else:
                inside = utc(first["timestamp"]) <= month_end(last_month)
                yield reject(group, Problem("created_in_range" if inside else "created_after_range",
                                            f"created {first['timestamp']}"))
            continue
        last = (start["revid"], render(start["revid"]))  # the latest revision rendered, and what it gave
        if isinstance(last[1], Problem):  # no text at the first month's end: not an article yet (or unreadable)
            yield reject(group, Problem(last[1].reason, f"at {month_label(first_month)}: {last[1].detail}"))
            continue
        counts["chosen"] += 1
        for month in range(first_month, last_month + 1):
            rid = f"{group}@{month_label(month)}"
            try:
                rev = start if month == first_month else as_of(pageid, month)
            except FAILURES as exc:
                rev, result = None, Problem("fetch_failed", f"{type(exc).__name__}: {exc}")
            else:
                if rev is None:
                    result = Problem("no_revision_as_of", month_end(month).isoformat())
                elif rev["revid"] == last[0]:  # not edited since: the same text, no parse request
                    result = last[1]
                    counts["unchanged_months"] += month != first_month
                else:
                    last = (rev["revid"], render(rev["revid"]))
                    result = last[1]
            if isinstance(result, Problem):
                bad = counts["quarantined_rows"]
                bad[result.reason] = bad.get(result.reason, 0) + 1
                yield quarantine_record(rid, STAGE, result.reason, result.detail)
                continue
            text, parsed = result
            counts["rows"] += 1
            yield {"id": rid, "text": text, "date": month_label(month), "group": group, "source": SOURCE,
                   "title": parsed.get("title", page["title"]), "revid": int(rev["revid"]),
                   "timestamp": rev.get("timestamp"), "url": revision_url(lang, rev["revid"])}
    counts["not_checked"] = len(pages) - counts["checked"]


def revision_url(lang: str, revid: int) -> str:
    return f"https://{lang}.wikipedia.org/w/index.php?oldid={revid}"


def versions_snapshot(source_cfg: Mapping[str, Any], first_month: int, last_month: int, articles: int,
                      words: int | None, seed: int) -> dict:
    """What the versions set's manifest records: where and what was crawled, the choice and when. Makes no
    requests (category membership is not versioned; the crawl date plus each row's revid is the record)."""
    cfg = dict(source_cfg)
    return {
        "kind": SOURCE,
        "api": api_url(cfg),
        "lang": cfg.get("lang", "en"),
        "categories": root_categories(cfg),
        "depth": int(cfg.get("depth", 1)),
        "max_pages": cfg.get("max_pages"),
        "skip_title_patterns": list(cfg.get("skip_title_patterns") or []),
        "months": {"from": month_label(first_month), "to": month_label(last_month)},
        "as_of": "each month's last second, UTC (the revision current then)",
        "articles": articles,
        "words": words,
        "seed": seed,
        "order": "sha256(f'{seed}\\x00{pageid}'); chosen: a text version at the first month's end",
        "text_extraction": "action=parse (oldid) -> html_to_text: paragraphs and list items before See also",
        "crawled_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
