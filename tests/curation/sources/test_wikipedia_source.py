"""The Wikipedia source against hand-built MediaWiki API responses; no network.

tests/fixtures/mediawiki/*.json each hold {"request": <the params that select it>, "response": <the body, in the
API's own format: action=query / action=parse, formatversion=2>}. There was no network to record from, so they
follow the API's documented shapes (API:Categorymembers, API:Revisions, API:Parsing wikitext, API:Continue,
API:Etiquette#maxlag). The scenario, with depth=1 and text as of 2017-01-01:

    Category:2016 events (two batches, joined by a `continue` object)
      101 2016 Lake Example flood      created 2016-03; text revision 2016-12-20; a 2024 sentence came later
      Category:December 2016 events    (depth 1)
        101 again (yielded once), Category:2016 events (a cycle), Category:December 2016 sports events
        (depth 2: never requested), 104 Example Accord dispute (created 2023: latest text)
      102 Example Summit (2016)        new heading markup, a list, See also
      103 List of ..., 105 Timeline of ...   skipped by title, before any request
      106 2016 Example bridge collapse     missing by the time its revisions are asked for

A second as-of date (2016-05-01, for the cutoff-prefilter test) finds page 101 at its first revision.
"""
from __future__ import annotations

import json
from datetime import date, datetime, timezone
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests

from curation.sources.wikipedia import api as wikipedia
from curation.io.http import HttpError, JsonClient, retry_after_seconds

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mediawiki"
# The params that tell two requests apart; the rest (format, limits, rvprop...) is asserted where it matters.
SELECTING = ("action", "list", "prop", "cmtitle", "cmcontinue", "pageids", "pageid", "oldid", "rvdir", "rvstart")
BASE = {"categories": ["Category:2016 events"], "depth": 1, "text_as_of": "2017-01-01",
        "skip_title_patterns": [r"^List of", r"^Timeline of"]}


# Every test here runs with the network refused (tests/curation/sources/conftest.py).
pytestmark = pytest.mark.usefixtures("no_network")


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


class FixtureFetch:
    """A `fetch(params) -> dict` that answers from the fixtures and records every request."""

    def __init__(self):
        self.table = [f for f in (json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json")))
                      if f["request"] is not None]
        self.calls: list[dict] = []

    def __call__(self, params) -> dict:
        self.calls.append(dict(params))
        key = {k: str(params[k]) for k in SELECTING if k in params}
        hits = [f["response"] for f in self.table if f["request"] == key]
        assert len(hits) == 1, f"no unique fixture for {key}"
        return hits[0]


def crawl(**overrides):
    fetch = FixtureFetch()
    docs = list(wikipedia.iter_documents({**BASE, **overrides}, fetch=fetch))
    return {d["id"]: d for d in docs}, fetch


def kept(docs):
    return {k: d for k, d in docs.items() if "quarantine" not in d["meta"]}


def reasons(docs):
    return {k: d["meta"]["quarantine"]["reason"] for k, d in docs.items() if "quarantine" in d["meta"]}


def test_category_recursion_follows_continue_stops_at_depth_and_dedups():
    docs, fetch = crawl()
    listed = [c for c in fetch.calls if c.get("list") == "categorymembers"]
    assert [(c["cmtitle"], c.get("cmcontinue")) for c in listed] == [
        ("Category:2016 events", None),
        ("Category:2016 events", "page|4c495354204f46203230313620455841|103"),
        ("Category:December 2016 events", None),
    ]  # the cycle back to the root and the depth-2 category are never requested
    assert all(c["cmtype"] == "page|subcat" and c["cmnamespace"] == "0|14" and c["formatversion"] == 2
               for c in listed)
    assert sorted(docs) == [f"wikipedia:en:{i}" for i in (101, 102, 103, 104, 105, 106)]
    assert docs["wikipedia:en:101"]["meta"]["category"] == "Category:2016 events"  # first listing wins
    assert docs["wikipedia:en:104"]["meta"]["category_depth"] == 1


def test_creation_date_comes_from_the_first_revision():
    docs, fetch = crawl()
    assert docs["wikipedia:en:101"]["created_at"] == datetime(2016, 3, 4, 9, 12, 44, tzinfo=timezone.utc)
    assert docs["wikipedia:en:104"]["created_at"] == datetime(2023, 2, 10, 11, 0, tzinfo=timezone.utc)
    firsts = [c for c in fetch.calls if c.get("rvdir") == "newer"]
    assert firsts and all(c["rvlimit"] == 1 and "rvcontinue" not in c for c in firsts)
    # One first-revision request per page although each answer carried a continue: it is not followed.
    assert sorted(c["pageids"] for c in firsts) == [101, 102, 104, 106]


def test_title_patterns_skip_before_any_request_and_are_counted():
    docs, fetch = crawl()
    assert reasons(docs)["wikipedia:en:103"] == "title_skipped"
    assert docs["wikipedia:en:105"]["meta"]["quarantine"] == {
        "stage": "source.wikipedia", "reason": "title_skipped", "detail": "^Timeline of"}
    assert not any(c.get("pageids") in (103, 105) or c.get("pageid") in (103, 105) for c in fetch.calls)
    assert reasons(docs)["wikipedia:en:106"] == "page_missing"
    assert all(d["text"] == "" for k, d in docs.items() if k in reasons(docs))


def test_text_as_of_date_has_no_later_edits():
    docs, fetch = crawl()
    lake = docs["wikipedia:en:101"]
    assert lake["meta"]["text_revid"] == 75500001 and lake["meta"]["text_timestamp"] == "2016-12-20T18:00:00Z"
    assert "renamed" not in lake["text"]
    as_of = [c for c in fetch.calls if c.get("rvdir") == "older"]
    assert {(c["pageids"], c["rvstart"], c["rvlimit"]) for c in as_of} == {
        (101, "2017-01-01T00:00:00Z", 1), (102, "2017-01-01T00:00:00Z", 1)}
    # A page created after the date has no revision then; it takes its latest text.
    accord = docs["wikipedia:en:104"]
    assert accord["meta"]["text_as_of"] is None and accord["meta"]["text_revid"] == 1180000000
    assert accord["text"].startswith("The Example Accord dispute began in January 2023")


def test_latest_text_without_text_as_of_and_member_cutoff_reference():
    latest, _ = crawl(text_as_of=None)
    assert "In 2024 the lake was renamed after the flood." in latest["wikipedia:en:101"]["text"]
    by_ref, _ = crawl(text_as_of="member_cutoff", member_cutoff=date(2017, 1, 1))  # YAML gives a date
    assert by_ref["wikipedia:en:101"]["meta"]["text_revid"] == 75500001
    with pytest.raises(ValueError, match="member_cutoff"):
        list(wikipedia.iter_documents({**BASE, "text_as_of": "member_cutoff"}, fetch=FixtureFetch()))


def test_plain_text_keeps_prose_and_drops_apparatus():
    docs, _ = crawl()
    assert docs["wikipedia:en:101"]["text"] == (
        "The 2016 Lake Example flood was a flood on the shores of Lake Example in March 2016. Heavy rain raised "
        "the lake by two metres in three days.\n\n"
        "About 1,200 residents were moved to higher ground. The lakeside road reopened in June.")
    assert docs["wikipedia:en:102"]["text"] == (
        "The Example Summit was a meeting of delegates held in Example City in June 2016.\n\n"
        "The delegates agreed on three points:\n\n"
        "a shared river authority;\n\na common timetable;\n\nyearly reviews.")
    doc = docs["wikipedia:en:102"]
    assert doc["url"] == "https://en.wikipedia.org/wiki/Example_Summit_(2016)"
    assert doc["meta"]["revision_url"] == "https://en.wikipedia.org/w/index.php?oldid=74000000"
    assert doc["source"] == "wikipedia" and doc["title"] == "Example Summit (2016)"


def test_plain_text_from_parsoid_sections():
    html = ('<section data-mw-section-id="0"><p>Lead text<sup class="mw-ref reference" typeof="mw:Extension/ref">'
            '<a href="./X#cite_note-1"><span class="mw-reflink-text">[1]</span></a></sup>.</p></section>'
            '<section data-mw-section-id="1"><h2 id="History">History</h2><p>Body\nline.</p>'
            '<ul><li>item <ul><li>nested</li></ul></li></ul><blockquote><p>Quoted.</p></blockquote></section>'
            '<section data-mw-section-id="2"><h2 id="References">References</h2><p>Not prose.</p></section>')
    assert wikipedia.html_to_text(html) == "Lead text.\n\nBody line.\n\nitem nested\n\nQuoted."


def test_created_window_avoids_text_requests():
    docs, fetch = crawl(created_after="2023-01-01")
    assert sorted(kept(docs)) == ["wikipedia:en:104"]
    assert reasons(docs)["wikipedia:en:101"] == "created_outside_window"
    assert [c.get("pageid") for c in fetch.calls if c["action"] == "parse"] == [104]


def test_prefilter_by_the_jobs_cutoffs():
    cutoffs = {"member_before": "2016-05-01", "nonmember_after": "2023-01-01", "nonmember_before": None}
    docs, fetch = crawl(prefilter_by_cutoffs=True, cutoffs=cutoffs, member_cutoff="2016-05-01",
                        text_as_of="member_cutoff")
    assert sorted(kept(docs)) == ["wikipedia:en:101", "wikipedia:en:104"]
    assert reasons(docs)["wikipedia:en:102"] == "created_outside_window"  # created 2016-06: neither side
    assert sorted(c.get("oldid") or c.get("pageid") for c in fetch.calls if c["action"] == "parse") == [
        104, 70001234]  # 101 as of 2016-05-01 is still its first revision in the fixture below
    with pytest.raises(ValueError, match="member_cutoff"):
        list(wikipedia.iter_documents({**BASE, "text_as_of": "member_cutoff", "member_cutoff": None},
                                      fetch=FixtureFetch()))


def test_page_level_api_error_is_quarantined_not_raised():
    def fetch(params):
        if params.get("action") == "parse":
            return fixture("error_nosuchrevid")["response"]
        return FixtureFetch()(params)

    docs = {d["id"]: d for d in wikipedia.iter_documents(BASE, fetch=fetch)}
    assert docs["wikipedia:en:101"]["meta"]["quarantine"]["reason"] == "fetch_failed"
    assert "nosuchrevid" in docs["wikipedia:en:101"]["meta"]["quarantine"]["detail"]


def test_month_categories_and_snapshot():
    cfg = {"category_months": {"from": "2022-11", "to": "2023-02"}, "depth": 0, "text_as_of": "2017-01-01"}
    assert wikipedia.root_categories(cfg) == ["Category:November 2022 events", "Category:December 2022 events",
                                              "Category:January 2023 events", "Category:February 2023 events"]
    two = {"category_months": [{"from": "2016-12", "to": "2016-12"}, {"from": "2023-01", "to": "2023-01"}]}
    assert wikipedia.root_categories(two) == ["Category:December 2016 events", "Category:January 2023 events"]
    snap = wikipedia.snapshot(cfg)
    assert snap["api"] == "https://en.wikipedia.org/w/api.php" and snap["depth"] == 0
    assert snap["text_as_of"] == "2017-01-01T00:00:00+00:00" and snap["crawled_at"][:4].isdigit()


def test_text_as_of_creation_month_end_takes_each_article_as_first_written():
    """`text_as_of: creation_month_end`: each page's revision as of the last second of its creation month
    (fixtures creation_month_end_*): 101 created 2016-03-04 -> as of 2016-03-31T23:59:59Z, 102 (2016-06-01) ->
    2016-06-30, 104 (2023-02-10) -> 2023-02-28; never the latest text, never the one recipe-wide date."""
    docs, fetch = crawl(text_as_of="creation_month_end")
    assert sorted(kept(docs)) == ["wikipedia:en:101", "wikipedia:en:102", "wikipedia:en:104"]
    assert reasons(docs) == {"wikipedia:en:103": "title_skipped", "wikipedia:en:105": "title_skipped",
                             "wikipedia:en:106": "page_missing"}
    as_of = [(c["pageids"], c["rvstart"]) for c in fetch.calls if c.get("rvdir") == "older"]
    assert as_of == [(101, "2016-03-31T23:59:59Z"), (102, "2016-06-30T23:59:59Z"), (104, "2023-02-28T23:59:59Z")]
    assert [c.get("oldid") for c in fetch.calls if c["action"] == "parse"] == [70001240, 72000007, 1139000011]
    lake, accord = docs["wikipedia:en:101"], docs["wikipedia:en:104"]
    assert lake["text"] == ("The 2016 Lake Example flood is an ongoing flood on Lake Example. "
                            "Roads around the lake are closed.")
    assert lake["meta"]["text_revid"] == 70001240 and lake["meta"]["text_timestamp"] == "2016-03-04T09:15:30Z"
    assert lake["meta"]["text_as_of"] == "2016-03-31T23:59:59+00:00"
    assert lake["created_at"] == datetime(2016, 3, 4, 9, 12, 44, tzinfo=timezone.utc)
    assert accord["meta"]["text_as_of"] == "2023-02-28T23:59:59+00:00" and "Talks resumed" not in accord["text"]
    assert docs["wikipedia:en:102"]["meta"]["revision_url"] == "https://en.wikipedia.org/w/index.php?oldid=72000007"
    assert wikipedia.creation_month_end(datetime(2016, 12, 31, 23, 59, 59, tzinfo=timezone.utc)) == datetime(
        2016, 12, 31, 23, 59, 59, tzinfo=timezone.utc)
    snap = wikipedia.snapshot({**BASE, "text_as_of": "creation_month_end"})
    assert snap["text_as_of"] == "creation_month_end"
    with pytest.raises(ValueError, match="per page"):
        wikipedia.resolve_text_as_of({"text_as_of": "creation_month_end"})

# ---- the HTTP layer: a real requests.Session whose transport adapter serves scripted responses ----

class ScriptedAdapter(requests.adapters.BaseAdapter):
    """Answers each request with the next scripted (status, body, headers), or routes to the fixtures."""

    def __init__(self, script=None):
        super().__init__()
        self.script, self.sent, self.fixtures = list(script or []), [], FixtureFetch()

    def send(self, request, **kwargs):
        self.sent.append(request)
        if self.script:
            status, body, headers = self.script.pop(0)
        else:
            status, body, headers = 200, self.fixtures(dict(parse_qsl(urlsplit(request.url).query))), {}
        resp = requests.Response()
        resp.status_code, resp._content = status, json.dumps(body).encode()
        resp.url, resp.request = request.url, request
        resp.headers.update(headers)
        return resp

    def close(self):
        pass


class FakeClock:
    def __init__(self):
        self.now, self.sleeps = 100.0, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def client(adapter, clock, **kw):
    session = requests.Session()
    session.mount("https://", adapter)
    cfg = {"user_agent": "tidemark-test/1.0 (tests@example.org)", "min_interval_s": 0, **kw}
    return wikipedia.make_fetch(cfg, session=session, sleep=clock.sleep, clock=clock)


def test_retries_429_and_503_with_backoff_and_sends_user_agent():
    ok = {"batchcomplete": True, "query": {"pages": []}}
    adapter = ScriptedAdapter([(429, {}, {"Retry-After": "7"}), (503, {}, {}), (503, {}, {}), (200, ok, {})])
    clock = FakeClock()
    assert client(adapter, clock, backoff_s=0.5)({"action": "query"}) == ok
    assert clock.sleeps == [7.0, 1.0, 2.0]  # Retry-After wins; then 0.5 * 2**attempt
    assert [r.headers["User-Agent"] for r in adapter.sent] == ["tidemark-test/1.0 (tests@example.org)"] * 4


def test_maxlag_body_is_retried_and_persistent_failure_raises():
    lag = fixture("error_maxlag")["response"]
    adapter = ScriptedAdapter([(200, lag, {"Retry-After": "5"}), (200, {"query": {}}, {})])
    clock = FakeClock()
    assert client(adapter, clock)({"action": "query"}) == {"query": {}}
    assert clock.sleeps == [5.0]
    adapter = ScriptedAdapter([(502, {}, {})] * 3)
    with pytest.raises(HttpError, match="gave up after 3 attempts"):
        client(adapter, FakeClock(), max_retries=2)({"action": "query"})
    adapter = ScriptedAdapter([(404, {}, {})])
    with pytest.raises(HttpError, match="HTTP 404"):
        client(adapter, FakeClock())({"action": "query"})
    assert len(adapter.sent) == 1  # a 404 is not retried


def test_rate_limit_spaces_requests():
    adapter = ScriptedAdapter([(200, {}, {})] * 3)
    clock = FakeClock()
    fetch = JsonClient("https://example.org/w/api.php", "tidemark-test/1.0 (tests@example.org)",
                       session=_session(adapter), min_interval_s=0.25, sleep=clock.sleep, clock=clock)
    for _ in range(3):
        fetch({})
    assert clock.sleeps == [0.25, 0.25]


def _session(adapter):
    s = requests.Session()
    s.mount("https://", adapter)
    return s


def test_retry_after_http_date():
    now = datetime(2024, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert retry_after_seconds("Mon, 01 Jan 2024 12:00:30 GMT", now) == 30.0
    assert retry_after_seconds("soon", now) is None


def test_end_to_end_over_http_sends_user_agent_and_formatversion():
    adapter, clock = ScriptedAdapter(), FakeClock()
    fetch = client(adapter, clock)
    docs = {d["id"]: d for d in wikipedia.iter_documents({**BASE, "user_agent": fetch.user_agent}, fetch=fetch)}
    assert sorted(kept(docs)) == ["wikipedia:en:101", "wikipedia:en:102", "wikipedia:en:104"]
    queries = [dict(parse_qsl(urlsplit(r.url).query)) for r in adapter.sent]
    assert all(q["format"] == "json" and q["formatversion"] == "2" and q["maxlag"] == "5" for q in queries)
    assert {r.headers["User-Agent"] for r in adapter.sent} == {"tidemark-test/1.0 (tests@example.org)"}
