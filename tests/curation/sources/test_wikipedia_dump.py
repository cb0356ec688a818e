"""The Wikipedia dump source on multistream dumps the tests write themselves: wikitext -> text, dating by two dumps,
parallel shards, and every bad input (corrupt or truncated bz2, broken page XML, broken wikitext) as quarantine."""
from __future__ import annotations

import bz2
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from curation.sources.wikipedia import multistream
from curation.sources.wikipedia import dump as wd
from curation.sources.wikipedia.wikitext import render, text_or_reason, wikitext_to_text
from curation.stages.filters import TimeCutoff

ARTICLE = """{{Short description|A flood}}
{{Infobox event
| name = Big Flood
| date = {{start date|2023|3|1}}
}}
'''The Big Flood''' was a [[flood]] in [[Springfield, Illinois|Springfield]] on 1&nbsp;March 2023.<ref>{{cite news|title=x}}</ref> It killed three people.<ref name="a"/>
[[File:Flood.jpg|thumb|The flood in [[Springfield]]]]

== Background ==
Heavy rain fell for ''three'' days.<!-- hidden --> It rained {{convert|10|mm|in}} in {{lang|fr|une heure}}.
{| class="wikitable"
|-
| a || b
|}
* First item with [http://example.com a link]
* Second item

== See also ==
* [[Floods]]

== References ==
{{reflist}}
[[Category:2023 floods]]
"""


def test_wikitext_to_text_keeps_prose_and_drops_apparatus():
    # Hand-derived: infobox, refs, file link, table, comment, headings, See also onwards dropped; link labels kept;
    # {{convert}} shows its value and unit; {{lang}} keeps its text; &nbsp; becomes a space; list items are
    # blocks of their own.
    assert wikitext_to_text(ARTICLE) == (
        "The Big Flood was a flood in Springfield on 1 March 2023. It killed three people.\n\n"
        "Heavy rain fell for three days. It rained 10 mm in une heure.\n\n"
        "First item with a link\n\nSecond item")


@pytest.mark.parametrize("wikitext,reason", [
    ("Lead text {{Infobox\n| a = b\nand no closing braces", "wikitext_residue"),
    ("{{stub}}<ref>only a citation</ref>", "empty_text"),
    ("'''X''' may refer to:\n* [[X (band)]]\n== See also ==\n* [[Y]]\n{{Disambiguation}}", "skip_template"),
    ("'''X''' may refer to:\n{{hndis|X}}", "skip_template"),
])
def test_text_or_reason_names_what_is_wrong(wikitext, reason):
    text, got, detail = text_or_reason(wikitext, {"disambiguation", "hndis"})
    assert (text, got) == ("", reason) and detail


# Pages MediaWiki renders that a stricter renderer lost whole (issue 51's four kinds, written here): each keeps its
# readable text, drops what the page would not show, and counts what it dropped.
MID_LINE_TABLE = ("'''Xville''' is a town in the valley. Its population is given below. {| class=\"wikitable\"\n"
                  "|-\n! Year !! People\n|-\n| 2001 || 1,200\n|}\nThe town has a market every Tuesday and a school.")
LONG_UNCLOSED_TEMPLATE = ("'''Yburg''' is a village on the river.\n\n{{Infobox settlement\n| name = Yburg\n"
                          "| population = 300\n| area = 4 km\n\nThe village was founded in 1204 by monks from the abbey.")
BROKEN_LINK = "'''Zed''' was a poet who lived in [[Paris] for most of her life and wrote twelve books."
REF_LEFTOVER = ("'''Wtown''' is a port.<ref>{{cite web|title=Port|url=http://x.org}}}}</ref> It trades fish and salt "
                "with the islands.<ref name=a>{{cite book|title=Salt</ref>}} Its harbour is deep.")


def test_a_table_opened_mid_line_is_dropped_and_the_article_kept():
    text, reason, _, dropped = render(MID_LINE_TABLE)
    assert reason is None and dropped == {"table_mid_line": 1}
    assert text == ("Xville is a town in the valley. Its population is given below.\n\n"
                    "The town has a market every Tuesday and a school.")


def test_an_unclosed_template_over_many_lines_loses_its_paragraph_only():
    text, reason, _, dropped = render(LONG_UNCLOSED_TEMPLATE)
    assert reason is None and dropped == {"markup_paragraph": 1}
    assert text == "Yburg is a village on the river.\n\nThe village was founded in 1204 by monks from the abbey."


def test_a_broken_link_keeps_its_brackets_as_mediawiki_shows_them_and_is_no_defect():
    from curation.release.text_defects import defects

    text, reason, _, dropped = render(BROKEN_LINK)
    assert reason is None and dropped == {}
    assert text == "Zed was a poet who lived in [[Paris] for most of her life and wrote twelve books."
    assert defects(text) == {}


def test_braces_a_reference_leaves_are_hidden_with_it_or_removed_alone():
    # the first reference holds its extra "}}" (hidden with it); the second swallows its template's "}}", which is
    # left outside with nothing open: removed alone, counted, the paragraph kept
    text, reason, _, dropped = render(REF_LEFTOVER)
    assert (text, reason, dropped) == ("Wtown is a port. It trades fish and salt with the islands. Its harbour is "
                                       "deep.", None, {"stray_closer": 1})


def test_text_or_reason_passes_a_clean_page():
    assert text_or_reason("A [[b|c]] d.") == ("A c d.", None, "")


# ---------------------------------------------------------------- dumps written here

BODY = "The {0} was an event that many people remembered for years after it happened in the town."


def page(pid, title, ns=0, stamp="2022-06-01T00:00:00Z", text=None, redirect=None):
    return {"id": pid, "title": title, "ns": ns, "timestamp": stamp, "redirect": redirect,
            "text": text if text is not None else f"'''{title}''' " + BODY.format(title) + " [[Link|More]] words."}


def before_pages():
    return [page(1, "Alpha"), page(2, "Talk:Alpha", ns=1), page(3, "Beta"), page(4, "Gamma", redirect="Beta"),
            page(5, "Draft:Delta", ns=118), page(6, "Epsilon", stamp="2022-12-31T23:00:00Z"),
            page(7, "Zeta", text="{{disambiguation}}"), page(8, "Eta")]


def after_pages():
    # 5 moved from Draft: into articles keeps its (old) id: not new. 9..12 are new; 11 is a redirect, 12 broken.
    return [page(1, "Alpha", stamp="2024-01-05T00:00:00Z"), page(3, "Beta"), page(5, "Delta"), page(8, "Eta"),
            page(9, "Theta", stamp="2023-05-01T00:00:00Z"), page(10, "Talk:Theta", ns=1),
            page(11, "Iota", redirect="Theta"), page(12, "Kappa", text="{{Infobox\n| broken"),
            page(13, "Lambda", stamp="2024-02-01T00:00:00Z")]


NAMESPACES = {0: "", 1: "Talk", 118: "Draft"}


def write_pair(root: Path, per_stream: int = 2) -> dict:
    cfg = {"kind": "wikipedia_dump", "lang": "en", "pages_per_shard": 3,
           "cutoffs": {"member_before": "2023-01-01", "nonmember_after": "2023-01-01"}}
    for role, date, pages in (("dump_before", "20230101", before_pages()), ("dump_after", "20240301", after_pages())):
        dump = root / f"enwiki-{date}-pages-articles-multistream.xml.bz2"
        multistream.write_multistream(str(dump), wd.index_path(str(dump)), pages, NAMESPACES,
                                      pages_per_stream=per_stream)
        cfg[role] = {"path": str(dump)}
    return cfg


def outcome(docs) -> dict:
    return {d["id"]: (d["meta"]["quarantine"]["reason"] if "quarantine" in d["meta"] else d["meta"]["dating"])
            for d in docs}


def test_members_are_in_the_before_dump_non_members_have_new_ids(tmp_path: Path):
    cfg = write_pair(tmp_path)
    docs = list(wd.iter_documents(cfg))
    by_id = outcome(docs)
    w = "wikipedia:en:"
    # Talk pages, the draft, and the after dump's old ids (1, 3, 5 as an article now, 8) are not candidates.
    assert by_id == {
        w + "1": "in_dump_before", w + "3": "in_dump_before", w + "4": "redirect", w + "6": "in_dump_before",
        w + "7": "skip_template", w + "8": "in_dump_before", w + "9": "new_since_dump_before",
        w + "11": "redirect", w + "12": "wikitext_residue", w + "13": "new_since_dump_before"}
    assert len(docs) == 10
    members = {d["id"]: d for d in docs if d["meta"].get("dating") == "in_dump_before"}
    assert members[w + "6"]["created_at"] == datetime(2022, 12, 31, 23, tzinfo=timezone.utc)
    assert members[w + "1"]["meta"]["label_allowed"] == 1
    assert members[w + "1"]["text"] == "Alpha " + BODY.format("Alpha") + " More words."
    new = next(d for d in docs if d["id"] == w + "13")
    assert new["created_at"] == datetime(2023, 1, 1, tzinfo=timezone.utc)  # lower bound: the before dump's date
    assert new["meta"]["label_allowed"] == 0 and new["meta"]["text_timestamp"].startswith("2024-02-01")
    assert new["url"] == "https://en.wikipedia.org/wiki/Lambda"


def test_shards_cover_candidate_streams_only_and_give_the_same_documents(tmp_path: Path):
    cfg = write_pair(tmp_path)
    shards = wd.shards(cfg)
    roles = Counter(s["shard"]["role"] for s in shards)
    # before: 4 streams of 2 pages, candidates 1,3,4 | 6,7,8 -> 2 shards of >= 3; after: streams (1,3) (5,8) hold
    # no id above 8 and are never read; (9,10) (11,12) (13) -> candidates 9 | 11,12 | 13 -> 1 shard of 3 + 1.
    assert roles == {"dump_before": 2, "dump_after": 2}
    after_offsets = [s[0] for sh in shards if sh["shard"]["role"] == "dump_after" for s in sh["shard"]["streams"]]
    assert len(after_offsets) == 3
    assert all(sh["shard"]["min_id"] == 8 for sh in shards if sh["shard"]["role"] == "dump_after")
    pieces = [d["id"] for sh in shards for d in wd.iter_documents(sh)]
    assert pieces == [d["id"] for d in wd.iter_documents(cfg)]


def test_snapshot_records_both_dumps_their_dates_and_the_threshold(tmp_path: Path):
    snap = wd.snapshot(write_pair(tmp_path))
    assert snap["new_after_page_id"] == 8
    assert snap["dump_before"]["date"] == "2023-01-01" and snap["dump_after"]["date"] == "2024-03-01"
    assert snap["dump_before"]["pages_by_namespace"] == {"0": 6, "1": 1, "118": 1}
    assert snap["dump_after"]["candidate_pages"] == 4 and snap["dump_after"]["streams_read"] == 3
    assert snap["dump_before"]["dump"]["md5"]


def test_a_non_member_window_after_the_before_dump_is_refused(tmp_path: Path):
    cfg = write_pair(tmp_path)
    cfg["cutoffs"] = {"member_before": "2023-01-01", "nonmember_after": "2023-03-01"}
    with pytest.raises(ValueError, match="nonmember_after"):
        wd.shards(cfg)
    cfg["cutoffs"] = {}
    cfg["dump_after"]["date"] = "2022-01-01"
    with pytest.raises(ValueError, match="must be taken after"):
        wd.shards(cfg)


def test_the_cutoff_stage_never_relabels_a_page_against_its_dump_dating():
    cut = TimeCutoff("2023-01-01", "2023-01-01")
    late_member = {"created_at": "2023-06-01T00:00:00Z", "meta": {"label_allowed": 1}}
    assert cut.annotate(late_member)["label"] is None  # time alone would call it a non-member
    assert cut.decide({**late_member, "label": None})[1] == "contradicts_source_dating"
    assert cut.annotate({"created_at": "2022-06-01T00:00:00Z", "meta": {"label_allowed": 1}})["label"] == 1
    assert cut.annotate({"created_at": "2023-01-01T00:00:00Z", "meta": {"label_allowed": 0}})["label"] == 0


# ---------------------------------------------------------------- bad input

def stream_offsets(index: str) -> list[int]:
    return sorted({multistream.parse_index_line(line)[0] for line in multistream.open_index(index)})


def test_a_corrupt_stream_quarantines_each_page_the_index_lists_in_it(tmp_path: Path):
    cfg = write_pair(tmp_path)
    dump = Path(cfg["dump_before"]["path"])
    offsets = stream_offsets(wd.index_path(str(dump)))
    data = bytearray(dump.read_bytes())
    start, end = offsets[1], offsets[2]  # the stream holding pages 3 and 4 (both candidates)
    data[start + 20:end - 4] = bytes(len(data[start + 20:end - 4]))  # zeroed: the CRC and blocks are garbage
    dump.write_bytes(bytes(data))
    got = Counter(outcome(wd.iter_documents(cfg)).values())
    assert got["stream_unreadable"] == 2
    assert got["in_dump_before"] == 3  # 1, 6, 8 still read
    assert sum(got.values()) == 10  # every candidate the index lists leaves as a row


def test_a_truncated_dump_quarantines_the_pages_of_its_cut_stream(tmp_path: Path):
    cfg = write_pair(tmp_path)
    dump = Path(cfg["dump_after"]["path"])
    offsets = stream_offsets(wd.index_path(str(dump)))
    dump.write_bytes(dump.read_bytes()[:offsets[-1] + 30])  # ends inside the stream of page 13
    docs = list(wd.iter_documents(cfg))
    lost = [d for d in docs if d["meta"].get("quarantine", {}).get("reason") == "stream_unreadable"]
    assert len(lost) == 1 and "ids 13..13" in lost[0]["meta"]["quarantine"]["detail"]
    assert len(docs) == 10


def test_broken_page_xml_costs_only_that_page_and_missing_pages_are_counted(tmp_path: Path):
    head = '<mediawiki><siteinfo><namespaces><namespace key="0" /></namespaces></siteinfo>\n'
    good = multistream._page_xml(page(1, "Alpha"))
    broken = "<page><title>Beta</title><ns>0</ns><id>2</id><revision><text>unclosed & </revision></page>\n"
    dump = tmp_path / "enwiki-20230101-pages-articles-multistream.xml.bz2"
    streams = [head, good + broken, multistream._page_xml(page(3, "Gamma")), "</mediawiki>"]
    blobs = [bz2.compress(s.encode()) for s in streams]
    dump.write_bytes(b"".join(blobs))
    o1, o2 = len(blobs[0]), len(blobs[0]) + len(blobs[1])
    # The index lists page 4 in the last page stream, which holds only page 3.
    lines = [f"{o1}:1:Alpha", f"{o1}:2:Beta", f"{o2}:3:Gamma", f"{o2}:4:Delta"]
    with bz2.open(wd.index_path(str(dump)), "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    after = tmp_path / "enwiki-20240301-pages-articles-multistream.xml.bz2"
    multistream.write_multistream(str(after), wd.index_path(str(after)), [page(1, "Alpha")])
    cfg = {"kind": "wikipedia_dump", "dump_before": {"path": str(dump)}, "dump_after": {"path": str(after)}}
    got = outcome(wd.iter_documents(cfg))
    assert got == {"wikipedia:en:1": "in_dump_before", "wikipedia:en:2": "broken_page_xml",
                   "wikipedia:en:3": "in_dump_before", f"wikipedia:en:dump_before@{o2}#missing0": "missing_from_stream"}
