"""Wikipedia pages from categories, dated by their first revision, with text as of a date (WikiMIA-style).

Requests (all `action=query`/`action=parse` with `format=json&formatversion=2`, through an injected
`fetch(params) -> dict`; `JsonClient` in production, fixtures in tests):

1. candidates: `list=categorymembers&cmtype=page|subcat&cmnamespace=0|14`, following every `continue` object,
   breadth-first into subcategories down to `depth` (0 = the named categories only). Categories form cycles, so
   each is visited once; a page listed in several categories is yielded once.
2. creation date: `prop=revisions&rvdir=newer&rvlimit=1` (the page's first revision). The time a page was added to
   a category says nothing about when it was written, so it is never used. The `continue` that this answer
   carries (there are more revisions) is deliberately not followed.
3. text revision: with `text_as_of`, pages created by then take `prop=revisions&rvdir=older&rvstart=<date>
   &rvlimit=1` (the revision at or before the date), so member texts carry no later edits. Pages created after
   the date take their latest revision: with `text_as_of: member_cutoff` they can only be non-members.
   `text_as_of: creation_month_end` takes each page's revision as of the last second (UTC) of the month it was
   created in: the article as first written, without the years of later edits (what a set of documents dated by
   their creation month needs).
4. plain text: `action=parse&oldid=<revid>` (or `pageid=` for the latest) renders that revision to HTML, and
   `html_to_text` keeps the prose paragraphs and list items up to "See also"/"References". TextExtracts
   (`prop=extracts`, what `wikipedia-api` uses for `page.text`) only serves the current revision, so it cannot
   give text as of a date; using `parse` for every page keeps members and non-members on one extraction path.
   Caveat: `parse` expands templates as they are today. The prose is affected only by inline templates
   (dates, conversions); infoboxes, navboxes and references, where templates live, are dropped.

Why `requests` and not `wikipedia-api`: that library exposes neither revisions nor old-revision text, and its
own httpx client cannot take an injected `fetch`, which would leave two HTTP stacks with two rate limiters.

Pages dropped here (a `skip_title_patterns` match, a creation date outside the windows (`created_windows`), a
missing page, a redirect, empty text, a failed fetch) are yielded as quarantine documents (empty text,
`meta.quarantine = {stage, reason, detail}`) so the job can count them. Category enumeration failures raise:
a partial candidate list cannot be counted.

There is no `shards`: the crawl is serial by design (one rate-limited client, as Wikimedia's etiquette asks) and
a page listed under several categories must be yielded once.

source_cfg keys: `categories` (list of titles), `category_months` ({from: "2023-01", to: "2023-12", pattern:
"Category:{month} {year} events"}, or a list of such ranges), `depth` (1), `lang` ("en"), `api` (default from lang), `user_agent`,
`text_as_of` (a date, "member_cutoff" to take `member_cutoff` from the same section, or "creation_month_end"),
`skip_title_patterns` (regexes, searched), `created_after`/`created_before` or `prefilter_by_cutoffs`, `max_pages`
(pages enumerated), and the HTTP knobs `min_interval_s`, `max_retries`, `backoff_s`, `max_backoff_s`, `timeout_s`,
`maxlag`.
"""
from __future__ import annotations

import calendar
import re
from collections import deque
from datetime import date, datetime, timezone
from typing import Any, Iterator, Mapping
from urllib.parse import quote

from bs4 import BeautifulSoup

from curation.document import Document, utc
from curation.io.http import Fetch, HttpError, JsonClient
from curation.sources.wikipedia.wikitext import (  # one list of apparatus headings, one repair, for both sources
    STOP_SECTIONS, repair_punctuation)
from scoring.cutoff.periods import month_end, month_of

STAGE = "source.wikipedia"
DEFAULT_USER_AGENT = "tidemark/0.1 (membership-inference benchmark builder; set source.user_agent to your contact)"
CATEGORY_NS, ARTICLE_NS = 14, 0
CREATION_MONTH_END = "creation_month_end"  # text_as_of: a date per page, the end of its creation month
# Rendered boxes and apparatus that are not prose (class names of MediaWiki's and enwiki's templates).
DROP_CLASSES = {"infobox", "navbox", "vertical-navbox", "hatnote", "reflist", "references", "reference",
                "mw-editsection", "thumb", "ambox", "metadata", "noprint", "toc", "shortdescription",
                "mw-empty-elt", "sidebar", "mw-references-wrap", "gallery", "IPA", "haudio"}
# Pronunciations (class IPA, audio links) go, as the dump path drops {{IPA}} templates; formulas are kept as their
# TeX between dollar signs (the alt text MediaWiki renders them with), as the dump path keeps <math>.


class MediaWikiError(RuntimeError):
    def __init__(self, code: str, info: str):
        super().__init__(f"{code}: {info}")
        self.code = code


def _retryable_body(body: dict) -> bool:
    # maxlag and ratelimited come back as API errors, not always as HTTP 429/503.
    return isinstance(body, dict) and (body.get("error") or {}).get("code") in {"maxlag", "ratelimited"}


def make_fetch(cfg: Mapping[str, Any], **overrides: Any) -> JsonClient:
    """The production `fetch`: a rate-limited, retrying JSON client for the configured wiki's api.php."""
    kwargs = {k: cfg[k] for k in ("min_interval_s", "max_retries", "backoff_s", "max_backoff_s", "timeout_s")
              if k in cfg}
    kwargs.update(overrides)
    return JsonClient(api_url(cfg), cfg.get("user_agent", DEFAULT_USER_AGENT), retry_body=_retryable_body,
                      **kwargs)


def api_url(cfg: Mapping[str, Any]) -> str:
    return cfg.get("api") or f"https://{cfg.get('lang', 'en')}.wikipedia.org/w/api.php"


def _api(fetch: Fetch, params: Mapping[str, Any], maxlag: int | None) -> dict:
    full = {"format": "json", "formatversion": 2, **params}
    if maxlag is not None:
        full["maxlag"] = maxlag  # the etiquette for non-interactive clients: back off when replicas lag
    body = fetch(full)
    if "error" in body:
        err = body["error"]
        raise MediaWikiError(err.get("code", "unknown"), err.get("info", ""))
    return body


def _as_datetime(value: Any) -> datetime:
    # YAML turns 2017-01-01 into a date; a date means its midnight UTC.
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    return utc(value)


def resolve_text_as_of(cfg: Mapping[str, Any]) -> datetime | None:
    """The one date texts are taken as of, or None (latest texts). `creation_month_end` has no one date: each
    page's is `creation_month_end(created)`."""
    value = cfg.get("text_as_of")
    if value in (None, ""):
        return None
    if value == CREATION_MONTH_END:
        raise ValueError("text_as_of: creation_month_end is a date per page (creation_month_end(created))")
    if isinstance(value, str) and not value[:1].isdigit():
        if cfg.get(value) in (None, ""):
            raise ValueError(f"text_as_of refers to {value!r}, which is not set in the source section")
        value = cfg[value]
    return _as_datetime(value)


def creation_month_end(created: datetime) -> datetime:
    """The last second (UTC) of the month `created` falls in: a page's text date under `creation_month_end`."""
    return month_end(month_of(created))


def created_windows(cfg: Mapping[str, Any]) -> list[tuple[datetime | None, datetime | None]]:
    """[start, end) windows of creation time worth fetching text for; [] keeps every page.

    `prefilter_by_cutoffs: true` takes them from the job's `cutoffs` (before member_before; from nonmember_after
    to nonmember_before), so pages that can be neither member nor non-member cost no parse request. Otherwise
    `created_after`/`created_before` give one window."""
    if cfg.get("prefilter_by_cutoffs"):
        c = cfg.get("cutoffs") or {}
        t = {k: _as_datetime(c[k]) if c.get(k) else None for k in ("member_before", "nonmember_after",
                                                                    "nonmember_before")}
        if t["member_before"] is None or t["nonmember_after"] is None:
            raise ValueError("prefilter_by_cutoffs needs cutoffs.member_before and cutoffs.nonmember_after")
        return [(None, t["member_before"]), (t["nonmember_after"], t["nonmember_before"])]
    after, before = (_as_datetime(cfg[k]) if cfg.get(k) else None for k in ("created_after", "created_before"))
    return [(after, before)] if after or before else []


def _in_windows(created: datetime, windows) -> bool:
    return not windows or any((a is None or created >= a) and (b is None or created < b) for a, b in windows)


def month_categories(start: str, end: str, pattern: str = "Category:{month} {year} events") -> list[str]:
    """Category titles for each month from `start` to `end` ("YYYY-MM", inclusive), e.g. "Category:March 2023
    events"."""
    y, m = (int(x) for x in str(start).split("-")[:2])
    y_end, m_end = (int(x) for x in str(end).split("-")[:2])
    out = []
    while (y, m) <= (y_end, m_end):
        out.append(pattern.format(month=calendar.month_name[m], year=y, mm=f"{m:02d}"))
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


def root_categories(cfg: Mapping[str, Any]) -> list[str]:
    roots = list(cfg.get("categories") or [])
    months = cfg.get("category_months") or []
    for span in [months] if isinstance(months, Mapping) else months:  # one range, or a list (members, non-members)
        roots += month_categories(span["from"], span["to"], span.get("pattern", "Category:{month} {year} events"))
    if not roots:
        raise ValueError("wikipedia source needs `categories` and/or `category_months`")
    return [t if t.startswith("Category:") else f"Category:{t}" for t in roots]


def category_pages(fetch: Fetch, roots: list[str], depth: int, maxlag: int | None = None) -> Iterator[dict]:
    """Article pages under `roots`, breadth-first to `depth`, each once: {pageid, title, category, depth}."""
    seen_cats = set(roots)
    seen_pages: set[int] = set()
    queue = deque((title, 0) for title in roots)
    while queue:
        cat, level = queue.popleft()
        params: dict[str, Any] = {"action": "query", "list": "categorymembers", "cmtitle": cat,
                                  "cmtype": "page|subcat", "cmnamespace": f"{ARTICLE_NS}|{CATEGORY_NS}",
                                  "cmlimit": "max"}
        while True:
            body = _api(fetch, params, maxlag)
            for member in body.get("query", {}).get("categorymembers", []):
                if member.get("ns") == CATEGORY_NS:
                    if level < depth and member["title"] not in seen_cats:
                        seen_cats.add(member["title"])
                        queue.append((member["title"], level + 1))
                elif member.get("ns") == ARTICLE_NS and member["pageid"] not in seen_pages:
                    seen_pages.add(member["pageid"])
                    yield {"pageid": member["pageid"], "title": member["title"], "category": cat, "depth": level}
            if "continue" not in body:
                break
            # The continue object is opaque: send all of its keys back as they are (API:Continue).
            params = {**params, **body["continue"]}


def _one_revision(fetch: Fetch, pageid: int, maxlag: int | None, **rv: Any) -> dict | None:
    body = _api(fetch, {"action": "query", "prop": "revisions", "pageids": pageid, "rvprop": "ids|timestamp",
                        "rvlimit": 1, **rv}, maxlag)
    pages = body.get("query", {}).get("pages", [])
    if not pages or pages[0].get("missing") or pages[0].get("invalid"):
        return None
    revs = pages[0].get("revisions") or []
    return revs[0] if revs else None


def first_revision(fetch: Fetch, pageid: int, maxlag: int | None = None) -> dict | None:
    return _one_revision(fetch, pageid, maxlag, rvdir="newer")


def revision_as_of(fetch: Fetch, pageid: int, when: datetime, maxlag: int | None = None) -> dict | None:
    """The latest revision with timestamp <= `when` (rvdir=older starts at rvstart and walks back)."""
    stamp = when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _one_revision(fetch, pageid, maxlag, rvdir="older", rvstart=stamp)


def parse_html(fetch: Fetch, *, revid: int | None = None, pageid: int | None = None,
               maxlag: int | None = None) -> dict:
    """Rendered HTML of one revision (`oldid`) or of the latest (`pageid`): {title, pageid, revid, text}."""
    target = {"oldid": revid} if revid is not None else {"pageid": pageid}
    body = _api(fetch, {"action": "parse", **target, "prop": "text|revid", "disableeditsection": 1,
                        "disablelimitreport": 1, "disabletoc": 1}, maxlag)
    return body["parse"]


def html_to_text(html: str) -> str:
    """Prose paragraphs and list items of a rendered article, in document order, stopping at the first h2 that
    opens an apparatus section. Blocks are found at any depth, so both the legacy parser's flat output and
    Parsoid's <section> nesting work; a block inside another kept block is already in that block's text."""
    soup = BeautifulSoup(html, "html.parser")
    for el in soup.find_all(class_="mwe-math-element"):
        el.replace_with(f"${_tex(el)}$" if _tex(el) else "")
    # Citation markers ([1], [citation needed]) are <sup class="reference"> / <sup class="noprint ...">.
    for tag in soup.find_all(["table", "style", "script", "figure", "math"]) + soup.find_all(
            class_=lambda c: c is not None and bool(DROP_CLASSES & set(c.split()))):
        if not tag.decomposed:  # a box inside a dropped table is already gone
            tag.decompose()
    root = soup.find(class_="mw-parser-output") or soup
    blocks: list[str] = []
    for tag in root.find_all(["p", "ul", "ol", "h2"]):
        if tag.name == "h2":
            if tag.get_text(" ", strip=True).lower() in STOP_SECTIONS:
                break
        elif tag.find_parent(["p", "li"]) is None:
            if tag.name == "p":
                blocks.append(tag.get_text())
            else:
                blocks.extend(li.get_text() for li in tag.find_all("li", recursive=False))
    text = "\n\n".join(repair_punctuation(re.sub(r"\s+", " ", b).strip()) for b in blocks)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _tex(el) -> str:
    """A rendered formula's TeX: the alt text of its MathML or fallback image, without the {\\displaystyle ...}
    wrapper MediaWiki adds."""
    math = el.find("math")
    img = el.find("img")
    alt = (math.get("alttext") if math is not None else None) or (img.get("alt") if img is not None else None) or ""
    alt = alt.strip()
    m = re.fullmatch(r"\{\\(?:displaystyle|textstyle)\s*(.*)\}", alt, re.S)
    return " ".join((m.group(1) if m else alt).split())


def _page_url(lang: str, title: str) -> str:
    return f"https://{lang}.wikipedia.org/wiki/{quote(title.replace(' ', '_'), safe='()_,:-.')}"


def _quarantine(lang: str, page: dict, reason: str, detail: str, created_at: datetime | None = None) -> Document:
    return Document(id=f"wikipedia:{lang}:{page['pageid']}", source="wikipedia", title=page["title"], text="",
                    created_at=created_at or datetime(1970, 1, 1, tzinfo=timezone.utc),
                    url=_page_url(lang, page["title"]),
                    meta={"quarantine": {"stage": STAGE, "reason": reason, "detail": detail[:500]}})


def iter_documents(source_cfg: Mapping[str, Any], fetch: Fetch | None = None) -> Iterator[Document]:
    """Documents (and quarantine documents) for every article page under the configured categories."""
    cfg = dict(source_cfg)
    fetch = fetch or make_fetch(cfg)
    lang = cfg.get("lang", "en")
    maxlag = cfg.get("maxlag", 5)
    per_page = cfg.get("text_as_of") == CREATION_MONTH_END
    as_of = None if per_page else resolve_text_as_of(cfg)
    windows = created_windows(cfg)
    skips = [re.compile(p) for p in cfg.get("skip_title_patterns") or []]
    max_pages = cfg.get("max_pages")

    for n, page in enumerate(category_pages(fetch, root_categories(cfg), int(cfg.get("depth", 1)), maxlag)):
        if max_pages is not None and n >= max_pages:
            return
        hit = next((p.pattern for p in skips if p.search(page["title"])), None)
        if hit is not None:  # before any request: a skipped title costs nothing
            yield _quarantine(lang, page, "title_skipped", hit)
            continue
        try:
            first = first_revision(fetch, page["pageid"], maxlag)
            if first is None:
                yield _quarantine(lang, page, "page_missing", "no first revision (deleted since listing?)")
                continue
            created = utc(first["timestamp"])
            if not _in_windows(created, windows):
                yield _quarantine(lang, page, "created_outside_window", created.isoformat(), created)
                continue
            page_as_of = creation_month_end(created) if per_page else as_of
            use_as_of = page_as_of is not None and created <= page_as_of
            if use_as_of:
                rev = revision_as_of(fetch, page["pageid"], page_as_of, maxlag)
                if rev is None:
                    yield _quarantine(lang, page, "no_revision_as_of", page_as_of.isoformat(), created)
                    continue
                parsed = parse_html(fetch, revid=rev["revid"], maxlag=maxlag)
            else:
                parsed = parse_html(fetch, pageid=page["pageid"], maxlag=maxlag)
        except (HttpError, MediaWikiError, KeyError) as exc:
            yield _quarantine(lang, page, "fetch_failed", f"{type(exc).__name__}: {exc}")
            continue
        html = parsed.get("text", "")
        if 'class="redirectMsg"' in html:
            yield _quarantine(lang, page, "redirect", "page is a redirect", created)
            continue
        text = html_to_text(html)
        if not text:
            yield _quarantine(lang, page, "empty_text", f"revid {parsed.get('revid')}", created)
            continue
        yield Document(
            id=f"wikipedia:{lang}:{page['pageid']}", source="wikipedia", title=parsed.get("title", page["title"]),
            text=text, created_at=created, url=_page_url(lang, page["title"]),
            meta={"pageid": page["pageid"], "lang": lang, "category": page["category"],
                  "category_depth": page["depth"], "first_revid": first["revid"], "text_revid": parsed.get("revid"),
                  "text_timestamp": rev["timestamp"] if use_as_of else None,
                  "text_as_of": page_as_of.isoformat() if use_as_of else None,
                  "revision_url": f"https://{lang}.wikipedia.org/w/index.php?oldid={parsed.get('revid')}"})


def snapshot(source_cfg: Mapping[str, Any]) -> dict:
    """What the release manifest records: where and what was crawled, and when. Makes no requests: category
    membership is not versioned by MediaWiki, so the crawl date plus the per-document revids is the record."""
    cfg = dict(source_cfg)
    per_page = cfg.get("text_as_of") == CREATION_MONTH_END
    as_of = None if per_page else resolve_text_as_of(cfg)
    return {
        "kind": "wikipedia",
        "api": api_url(cfg),
        "lang": cfg.get("lang", "en"),
        "categories": root_categories(cfg),
        "depth": int(cfg.get("depth", 1)),
        "text_as_of": CREATION_MONTH_END if per_page else as_of.isoformat() if as_of else None,
        "skip_title_patterns": list(cfg.get("skip_title_patterns") or []),
        "created_windows": [[a.isoformat() if a else None, b.isoformat() if b else None]
                            for a, b in created_windows(cfg)],
        "text_extraction": "action=parse (oldid) -> html_to_text: paragraphs and list items before See also",
        "crawled_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
