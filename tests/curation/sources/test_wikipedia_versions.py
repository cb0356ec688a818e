"""Wikipedia versions (the same articles as of each month's end) against a faked MediaWiki API; no network.

tests/fixtures/mediawiki/versions/ (a subfolder, so the source test's FixtureFetch, which reads *.json of the
folder above, does not see these) holds the category listing as {"request", "response"} and one file per page:
its revision history and the `action=parse` bodies by revid, in the API's formatversion=2 shapes. `HistoryFetch`
(tests/mediawiki_fake.py, which also serves the same answers over HTTP) answers revision queries from the history
the way the API does (rvdir=older from rvstart: the latest revision at or before it; rvdir=newer: the first). The
scenario, months 2016-01..2016-06, depth 0:

    Category:Example places
      201 Alpha Town         created 2010; 2016-03-14 edit removes "It has a mill." and adds "It hosts a yearly
                             fair."; the 2016-06-20 revision fails to render (nosuchrevid); a 2016-07 edit
      202 Beta River         created 2012; edited at 2016-01-31T23:59:59Z (January's version) and on 2016-04-02
      Category:Example bridges   (a subcategory: depth 0 does not follow it)
      203 Gamma Hill         not edited in the range: one revision all six months, rendered once
      204 Delta Bridge       created 2016-03-10, inside the range: not chosen
      205 List of ...        skipped by title before any request
      206 Epsilon Tower      created 2016-09-01, after the range: not chosen

Seeded order (sha256 of seed and pageid) for seed 0: 204, 202, 203, 206, 201; for seed 3: 202, 204, 201, 206, 203.
"""
from __future__ import annotations

import pytest

from curation.sources.wikipedia import versions as wv
from mediawiki_fake import HistoryFetch
from scoring.cutoff.periods import month_index

CFG = {"categories": ["Category:Example places"], "depth": 0, "skip_title_patterns": [r"^List of"]}
JAN, JUN = month_index(2016, 1), month_index(2016, 6)
MONTHS = ["2016-01", "2016-02", "2016-03", "2016-04", "2016-05", "2016-06"]

pytestmark = pytest.mark.usefixtures("no_network")


def crawl(articles=3, words=16, seed=0, fetch=None, cfg=None):
    fetch = fetch or HistoryFetch()
    stats = {}
    items = list(wv.iter_versions(cfg or CFG, JAN, JUN, articles=articles, words=words, seed=seed, fetch=fetch,
                                  stats=stats))
    rows = {r["id"]: r for r in items if "reason" not in r}
    bad = {r["id"]: r for r in items if "reason" in r}
    return rows, bad, fetch, stats


def texts(rows, pageid):
    return [rows.get(f"wikipedia:en:{pageid}@{m}", {}).get("text") for m in MONTHS]


ALPHA_1 = "Alpha Town is a small town on the Example River. It has a mill.\n\nThe town"
ALPHA_2 = "Alpha Town is a small town on the Example River. It hosts a yearly fair.\n\nThe"
BETA_1 = "The Beta River flows through Example County."
BETA_2 = "The Beta River flows through Example County and Alpha Town."
GAMMA = "Gamma Hill is the highest point of Example County."


def test_one_row_per_article_month_and_texts_change_exactly_at_edit_months():
    rows, bad, _, _ = crawl()
    assert sorted({r["group"] for r in rows.values()}) == ["wikipedia:en:201", "wikipedia:en:202",
                                                          "wikipedia:en:203"]
    assert [sum(r["date"] == m for r in rows.values()) for m in MONTHS] == [3, 3, 3, 3, 3, 2]
    assert texts(rows, 201) == [ALPHA_1, ALPHA_1, ALPHA_2, ALPHA_2, ALPHA_2, None]  # June: quarantined
    assert texts(rows, 202) == [BETA_1] * 3 + [BETA_2] * 3
    assert texts(rows, 203) == [GAMMA] * 6
    assert [rows[f"wikipedia:en:202@{m}"]["revid"] for m in MONTHS] == [2021] * 3 + [2022] * 3  # 01-31T23:59:59
    assert rows["wikipedia:en:201@2016-03"] == {
        "id": "wikipedia:en:201@2016-03", "text": ALPHA_2, "date": "2016-03", "group": "wikipedia:en:201",
        "source": "wikipedia-versions", "title": "Alpha Town", "revid": 2012, "timestamp": "2016-03-14T12:00:00Z",
        "url": "https://en.wikipedia.org/w/index.php?oldid=2012"}
    assert rows["wikipedia:en:203@2016-06"]["timestamp"] == "2014-07-07T07:07:07Z"  # the same revision, reused


def test_request_count_one_lookup_per_article_month_one_parse_per_revision():
    _, _, fetch, stats = crawl()
    assert fetch.count(list="categorymembers") == 1  # depth 0: the subcategory is not listed
    # 3 chosen x 6 months, plus 2 for each rejected page (the first month's lookup, then the creation date)
    assert fetch.count(prop="revisions") == 3 * 6 + 2 * 2
    assert fetch.count(prop="revisions", rvdir="newer") == 2
    assert sorted(c["pageids"] for c in fetch.calls if c.get("rvdir") == "newer") == [204, 206]
    assert sorted(c["oldid"] for c in fetch.calls if c["action"] == "parse") == [2011, 2012, 2013, 2021, 2022, 2031]
    assert len(fetch.calls) == 1 + 22 + 6
    assert not any(205 in (c.get("pageids"), c.get("pageid")) for c in fetch.calls)  # title skip: no request
    alpha = [c["rvstart"] for c in fetch.calls if c.get("pageids") == 201]
    assert alpha == ["2016-01-31T23:59:59Z", "2016-02-29T23:59:59Z", "2016-03-31T23:59:59Z", "2016-04-30T23:59:59Z",
                     "2016-05-31T23:59:59Z", "2016-06-30T23:59:59Z"]
    assert stats == {"listed": 6, "title_skipped": 1, "checked": 5, "not_checked": 0, "chosen": 3, "rows": 17,
                     "unchanged_months": 3 + 4 + 5, "revision_requests": 22, "parse_requests": 6,
                     "rejected": {"created_in_range": 1, "created_after_range": 1},
                     "quarantined_rows": {"fetch_failed": 1}}
    # unchanged months (Alpha 02, 04, 05; Beta 02, 03, 05, 06; Gamma 02-06) are the months without a parse
    assert stats["unchanged_months"] == 3 * 6 - stats["parse_requests"]
    # every month is a row or a quarantine record; every page listed is accounted for
    assert stats["rows"] + sum(stats["quarantined_rows"].values()) == stats["chosen"] * 6
    assert stats["listed"] == stats["title_skipped"] + stats["checked"] + stats["not_checked"]
    assert stats["checked"] == stats["chosen"] + sum(stats["rejected"].values())


def test_problems_are_quarantine_records_never_dropped():
    _, bad, _, _ = crawl()
    assert bad["wikipedia:en:201@2016-06"]["reason"] == "fetch_failed"
    assert "nosuchrevid" in bad["wikipedia:en:201@2016-06"]["detail"]
    assert bad["wikipedia:en:204"] == {"id": "wikipedia:en:204", "stage": "versions", "reason": "created_in_range",
                                       "detail": "created 2016-03-10T10:00:00Z"}
    assert bad["wikipedia:en:206"]["reason"] == "created_after_range"
    assert bad["wikipedia:en:205"] == {"id": "wikipedia:en:205", "stage": "versions", "reason": "title_skipped",
                                       "detail": "^List of"}
    assert sorted(bad) == ["wikipedia:en:201@2016-06", "wikipedia:en:204", "wikipedia:en:205", "wikipedia:en:206"]


def test_a_failed_lookup_quarantines_that_month_and_the_crawl_goes_on():
    fetch = HistoryFetch(fail=lambda p: p.get("pageids") == 202 and p.get("rvstart") == "2016-05-31T23:59:59Z")
    rows, bad, fetch, stats = crawl(fetch=fetch)
    assert texts(rows, 202) == [BETA_1] * 3 + [BETA_2, None, BETA_2]
    assert bad["wikipedia:en:202@2016-05"]["reason"] == "fetch_failed"
    assert "HTTP 503" in bad["wikipedia:en:202@2016-05"]["detail"]
    assert fetch.count(action="parse", oldid=2022) == 1  # June's same revision still reuses April's text
    assert stats["quarantined_rows"] == {"fetch_failed": 2}


def test_a_page_whose_first_lookup_fails_is_not_chosen_and_the_next_is():
    fetch = HistoryFetch(fail=lambda p: p.get("pageids") == 202)
    rows, bad, _, stats = crawl(articles=2, fetch=fetch)
    assert bad["wikipedia:en:202"]["reason"] == "fetch_failed"
    assert sorted({r["group"] for r in rows.values()}) == ["wikipedia:en:201", "wikipedia:en:203"]
    assert stats["rejected"] == {"created_in_range": 1, "fetch_failed": 1, "created_after_range": 1}


def test_seeded_choice_is_deterministic_lazy_and_independent_of_listing_order():
    rows, bad, fetch, stats = crawl(articles=2, seed=0)
    assert sorted({r["group"] for r in rows.values()}) == ["wikipedia:en:202", "wikipedia:en:203"]
    assert stats["checked"] == 3 and stats["not_checked"] == 2  # 204 rejected, then 202 and 203: enough
    assert not any(c.get("pageids") in (201, 206) for c in fetch.calls)  # never checked: no request
    again, _, reversed_fetch, _ = crawl(articles=2, seed=0, fetch=HistoryFetch(reverse_listing=True))
    assert again == rows
    assert [c for c in reversed_fetch.calls if "list" not in c] == [c for c in fetch.calls if "list" not in c]
    other, _, _, _ = crawl(articles=2, seed=3)
    assert sorted({r["group"] for r in other.values()}) == ["wikipedia:en:201", "wikipedia:en:202"]
    assert wv.seeded_order([201, 202, 203, 204, 206], 0) == [204, 202, 203, 206, 201]


def test_words_truncate_the_same_span_and_none_keeps_the_whole_text():
    rows, _, _, _ = crawl(words=None)
    assert rows["wikipedia:en:201@2016-01"]["text"] == (
        "Alpha Town is a small town on the Example River. It has a mill.\n\n"
        "The town was founded in 1820 by settlers from the coast.")
    short, _, _, _ = crawl(words=3)
    assert {r["text"] for r in short.values() if r["group"] == "wikipedia:en:201"} == {"Alpha Town is"}
    assert wv.truncate_words("  a  b\n\nc d ", 3) == "  a  b\n\nc"
    assert wv.truncate_words("a b", 5) == "a b" and wv.truncate_words("", 2) == ""


def test_max_pages_limits_the_listing():
    rows, bad, _, stats = crawl(cfg={**CFG, "max_pages": 2})
    assert stats["listed"] == 2 and sorted({r["group"] for r in rows.values()}) == ["wikipedia:en:201",
                                                                                    "wikipedia:en:202"]
    assert bad == {"wikipedia:en:201@2016-06": bad["wikipedia:en:201@2016-06"]}


def test_arguments_are_checked_and_the_snapshot_records_the_crawl():
    for kw in ({"articles": 0}, {"articles": 1, "words": 0}):
        with pytest.raises(ValueError):
            list(wv.iter_versions(CFG, JAN, JUN, fetch=HistoryFetch(), **kw))
    with pytest.raises(ValueError, match="before it starts"):
        list(wv.iter_versions(CFG, JUN, JAN, articles=1, fetch=HistoryFetch()))
    snap = wv.versions_snapshot(CFG, JAN, JUN, 3, 16, 0)
    assert snap["kind"] == "wikipedia-versions" and snap["api"] == "https://en.wikipedia.org/w/api.php"
    assert snap["categories"] == ["Category:Example places"] and snap["months"] == {"from": "2016-01",
                                                                                    "to": "2016-06"}
    assert (snap["articles"], snap["words"], snap["seed"], snap["lang"]) == (3, 16, 0, "en")
    assert snap["crawled_at"][:4].isdigit()
