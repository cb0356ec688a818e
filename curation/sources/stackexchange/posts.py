"""What a Stack Exchange post becomes: the latest answer time per question (pass 1) and a question's Document
(pass 2: text from the body's HTML, tags in both dump formats, the code and formula flags, thread activity). Rules
and why: curation/sources/stackexchange/source.py's docstring."""
from __future__ import annotations

from array import array
from datetime import datetime, timezone
from typing import Iterator, Mapping

from curation.document import Deferred, Document, utc
from curation.text import looks_like_formula, squeeze_whitespace

QUESTION, ANSWER = "1", "2"
_BLOCK_TAGS = ["p", "div", "li", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "hr", "table"]
_EPOCH_UNSET = 0


def site_name(domain: str) -> str:
    """The short name used in ids: coffee.stackexchange.com -> coffee, stackoverflow.com -> stackoverflow."""
    for suffix in (".stackexchange.com", ".com", ".net"):
        if domain.endswith(suffix):
            return domain[: -len(suffix)]
    return domain


# ---------------------------------------------------------------- pass 1: thread activity

class LatestAnswerTimes:
    """Latest answer time per question id, as whole UTC epoch seconds in a flat uint32 array (0 = no answer).
    Flooring to the second keeps `answer < cutoff` exact for cutoffs on whole seconds (dates always are)."""

    def __init__(self) -> None:
        self._seconds = array("I")

    def add(self, question_id: int, when: datetime) -> None:
        if question_id >= len(self._seconds):
            grow = max(question_id + 1 - len(self._seconds), len(self._seconds) // 2, 1024)
            self._seconds.frombytes(bytes(grow * self._seconds.itemsize))
        seconds = int(when.timestamp())
        if seconds > self._seconds[question_id]:
            self._seconds[question_id] = seconds

    def get(self, question_id: int) -> datetime | None:
        if question_id >= len(self._seconds) or self._seconds[question_id] == _EPOCH_UNSET:
            return None
        return datetime.fromtimestamp(self._seconds[question_id], tz=timezone.utc)


def latest_answer_times(rows: Iterator[dict[str, str]]) -> LatestAnswerTimes:
    latest = LatestAnswerTimes()
    for row in rows:
        if row.get("PostTypeId") == ANSWER and row.get("ParentId") and row.get("CreationDate"):
            latest.add(int(row["ParentId"]), utc(row["CreationDate"]))
    return latest


# ---------------------------------------------------------------- pass 2: questions -> documents

def parse_tags(raw: str | None) -> list[str]:
    """Both dump formats: "<espresso><milk>" and "|espresso|milk|"."""
    if not raw:
        return []
    raw = raw.strip()
    if raw.startswith("<"):
        return [t for t in raw[1:-1].split("><") if t] if raw.endswith(">") else []
    if raw.startswith("|"):
        return [t for t in raw.split("|") if t]
    return raw.split()


_BLOCKS = frozenset(_BLOCK_TAGS)
_HIDDEN = ("script", "style", "template")  # their text is not page text (BeautifulSoup's get_text skips it too)


def body_text(html: str) -> tuple[str, bool, bool]:
    """Plain text of a post body, whether it holds code, and whether it holds a formula.

    lxml.html, i.e. libxml2's HTML parser, the same parser the first version reached through BeautifulSoup's "lxml"
    tree builder, walked once. Measured on the 592 bodies of the real coffee dump (best of 3, one core): bs4
    1,841 bodies/s, lxml.html 15,627, selectolax (Lexbor) 10,080; lxml.html and selectolax gave output identical
    to bs4 on every body, and lxml is a dependency already."""
    import lxml.html
    from lxml import etree

    try:
        root = lxml.html.document_fromstring(html) if html and html.strip() else None
    except (etree.ParserError, ValueError):  # "Document is empty" (only comments, say); ValueError: NUL bytes
        root = None
    if root is None:
        return "", False, False
    has_code = has_math_markup = False
    for el in root.iter(_HIDDEN):
        el.drop_tree()  # keeps the tail text
    for el in root.iter(etree.Element):
        tag = el.tag
        if tag in ("pre", "code"):
            has_code = True
        cls = el.get("class")
        if cls and "math-container" in cls.split():  # MathJax sites, 2018 on
            has_math_markup = True
        if tag == "br" or tag in _BLOCKS:  # "<p>a</p><p>b</p>" must not read "ab"
            el.tail = "\n" + (el.tail or "")
    text = squeeze_whitespace(root.text_content())
    return text, has_code, has_math_markup or looks_like_formula(text)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def question_document(row: Mapping[str, str], domain: str, last_answer: datetime | None,
                      deferred: bool = False) -> Document | Deferred:
    """The question's Document; with `deferred`, a Deferred one (curation/document.py) whose body is rendered only
    if the build asks for it, since parsing the HTML is most of a question's cost and the time cutoff drops most
    questions of a dump on their dates alone. A body that holds an HTML character reference is rendered at once, as
    before: a reference to a control character makes body_text raise ValueError (lxml refuses it as tail text), which
    quarantines the question as a bad row whatever its dates; without one, body_text cannot raise."""
    post_id = int(row["Id"])
    created = utc(row["CreationDate"])
    last_edit = utc(row["LastEditDate"]) if row.get("LastEditDate") else None
    activity = max(d for d in (created, last_edit, last_answer) if d is not None)
    body = row.get("Body", "")
    later = deferred and "&#" not in body
    text, has_code, has_formula = ("", False, False) if later else body_text(body)
    site = site_name(domain)
    doc = Document(
        id=f"stackexchange:{site}:{post_id}",
        source="stackexchange",
        title="" if later else row.get("Title", ""),
        text=text,
        created_at=created,
        url=f"https://{domain}/questions/{post_id}",
        meta={
            "site": site,
            "post_id": post_id,
            "tags": parse_tags(row.get("Tags")),
            "score": int(row.get("Score") or 0),
            "answer_count": int(row.get("AnswerCount") or 0),
            "closed": bool(row.get("ClosedDate")),
            "last_edit_at": _iso(last_edit),
            "last_answer_at": _iso(last_answer),
            "last_activity_date": _iso(utc(row["LastActivityDate"])) if row.get("LastActivityDate") else None,
            "activity_at": activity.isoformat(),
        },
    )
    if later:
        return Deferred(doc, lambda title=row.get("Title", ""): _rest(title, body))
    doc["meta"].update(has_code=has_code, has_formula=has_formula)
    return doc


def _rest(title: str, body: str) -> tuple[str, str, dict]:
    text, has_code, has_formula = body_text(body)
    return title, text, {"has_code": has_code, "has_formula": has_formula}
