"""The Stack Exchange source: hand-made dumps (built here) for each format rule, and the real coffee dump in
../shared for the exact question counts per side of a cutoff."""
from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import pytest

from curation.sources.stackexchange import posts as se_posts
from curation.sources.stackexchange import source as se
from curation.stages.filters import TimeCutoff, run_row_stages

HTML_TAG = re.compile(r"</?(p|a|li|ul|ol|em|strong|code|pre|img|br|blockquote|sup|sub|hr|div|span)\b[^>]*>", re.I)


def _row(**attrs: str) -> str:
    # newlines inside an attribute are written as &#xA;, as the dumps do (a raw one would be read as a space)
    escaped = {k: html.escape(v, quote=True).replace("\n", "&#xA;") for k, v in attrs.items()}
    return "  <row " + " ".join(f'{k}="{v}"' for k, v in escaped.items()) + " />"


def write_dump(path: Path) -> Path:
    """A tiny Posts.xml in the real format: a BOM, a DOCTYPE, HTML-escaped bodies, both tag formats, an answer
    that comes before its question, and wiki posts (types 4/5) that are not documents."""
    rows = [
        _row(Id="5", PostTypeId="2", ParentId="1", CreationDate="2015-01-30T10:00:00.000",
             Body="<p>ANSWER-FIVE use an airtight jar</p>"),
        _row(Id="1", PostTypeId="1", CreationDate="2015-01-10T08:00:00.000", Title="How to store beans?",
             Body="<p>I bought <em>fresh</em> beans.<br>Where should&nbsp;they go?</p>\n<p>Costs $5 and $6 a bag.</p>",
             Tags="<storage><whole-bean>", LastActivityDate="2015-02-03T00:00:00.000", AnswerCount="2"),
        _row(Id="2", PostTypeId="1", CreationDate="2015-01-11T09:00:00.000", Title="Grind size in code?",
             Body="<p>My grinder script:</p><pre><code>grind(size=5)</code></pre>", Tags="|grinding|code|",
             LastEditDate="2015-01-12T00:00:00.000"),
        _row(Id="3", PostTypeId="1", CreationDate="2015-01-12T09:00:00.000", Title="Extraction maths",
             Body='<p>Yield is <span class="math-container">$E = m/v$</span> or $x^2$?</p>', Tags="<brewing>"),
        _row(Id="4", PostTypeId="1", CreationDate="2015-03-02T00:00:00.000", Title="Late question",
             Body="<p>Asked after the cutoff &amp; kept apart.</p>", Tags="<misc>"),
        _row(Id="6", PostTypeId="2", ParentId="1", CreationDate="2015-02-02T12:00:00.000",
             Body="<p>ANSWER-SIX a late answer</p>"),
        _row(Id="7", PostTypeId="4", CreationDate="2015-01-01T00:00:00.000", Body=""),
        _row(Id="8", PostTypeId="5", CreationDate="2015-01-01T00:00:00.000", Body="<p>tag wiki</p>"),
    ]
    head = '\ufeff<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE posts>\n<posts>\n'
    text = head + "\n".join(rows) + "\n</posts>\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def make_7z(xml_path: Path, archive: Path) -> Path:
    import py7zr

    with py7zr.SevenZipFile(archive, "w") as z:
        z.write(xml_path, "Posts.xml")
    return archive


@pytest.fixture()
def site_dir(tmp_path: Path) -> Path:
    write_dump(tmp_path / "beans.stackexchange.com" / "Posts.xml")
    return tmp_path / "beans.stackexchange.com"


# ---------------------------------------------------------------- format rules

def test_parse_tags_both_formats():
    assert se_posts.parse_tags("<storage><whole-bean>") == ["storage", "whole-bean"]
    assert se_posts.parse_tags("|storage|whole-bean|") == ["storage", "whole-bean"]
    assert se_posts.parse_tags("") == [] and se_posts.parse_tags(None) == []


def test_body_text_strips_html_and_flags_code_and_formulas():
    text, code, formula = se_posts.body_text("<p>I bought <em>fresh</em> beans.<br>Where?</p>\n<p>$5 and $6.</p>")
    assert text == "I bought fresh beans.\nWhere?\n$5 and $6."
    assert (code, formula) == (False, False)  # prices are not formulas
    assert se_posts.body_text("<p>one</p><p>two</p><ul><li>a</li><li>b</li></ul>")[0] == "one\ntwo\na\nb"
    assert se_posts.body_text("<pre><code>x = 1</code></pre>")[1] is True
    assert se_posts.body_text('<span class="math-container">$a$</span>')[2] is True
    assert se_posts.body_text("<p>is it $x^2$?</p>")[2] is True


def test_documents_from_a_dump(site_dir: Path):
    docs = {d["id"]: d for d in se.iter_documents({"path": str(site_dir)})}
    assert sorted(docs) == ["stackexchange:beans:1", "stackexchange:beans:2", "stackexchange:beans:3",
                            "stackexchange:beans:4"]  # questions only: no answers, no wiki posts
    q1 = docs["stackexchange:beans:1"]
    assert q1["text"] == "I bought fresh beans.\nWhere should they go?\nCosts $5 and $6 a bag."
    assert q1["title"] == "How to store beans?" and q1["source"] == "stackexchange"
    assert q1["url"] == "https://beans.stackexchange.com/questions/1"
    assert q1["created_at"] == datetime(2015, 1, 10, 8, tzinfo=timezone.utc)
    assert q1["meta"]["tags"] == ["storage", "whole-bean"]
    # the answer listed before its question is joined too: the thread's last activity is the later answer
    assert q1["meta"]["last_answer_at"] == "2015-02-02T12:00:00+00:00"
    assert q1["meta"]["activity_at"] == "2015-02-02T12:00:00+00:00"
    assert docs["stackexchange:beans:2"]["meta"]["tags"] == ["grinding", "code"]
    assert docs["stackexchange:beans:2"]["meta"]["has_code"] is True
    assert docs["stackexchange:beans:2"]["meta"]["activity_at"] == "2015-01-12T00:00:00+00:00"  # LastEditDate
    assert docs["stackexchange:beans:3"]["meta"]["has_formula"] is True
    assert docs["stackexchange:beans:4"]["text"] == "Asked after the cutoff & kept apart."
    for d in docs.values():
        assert "ANSWER" not in d["text"] and not HTML_TAG.search(d["text"])


def test_xml_file_directory_and_7z_agree(site_dir: Path, tmp_path: Path):
    from_dir = list(se.iter_documents({"path": str(site_dir)}))
    from_xml = list(se.iter_documents({"path": str(site_dir / "Posts.xml")}))
    archive = make_7z(site_dir / "Posts.xml", tmp_path / "beans.stackexchange.com.7z")
    from_7z = list(se.iter_documents({"path": str(archive)}))
    assert from_dir == from_xml == from_7z


def test_7z_reader_stops_cleanly_when_abandoned(site_dir: Path, tmp_path: Path):
    archive = make_7z(site_dir / "Posts.xml", tmp_path / "beans.stackexchange.com.7z")
    docs = se.iter_documents({"path": str(archive)})
    next(docs)
    docs.close()  # the extraction thread is cancelled and joined, not left blocked on a full queue


def test_directory_of_sites_and_site_names(tmp_path: Path):
    write_dump(tmp_path / "dumps" / "beans.stackexchange.com" / "Posts.xml")
    make_7z(write_dump(tmp_path / "x" / "Posts.xml"), tmp_path / "dumps" / "cups.stackexchange.com.7z")
    (tmp_path / "dumps" / "stackoverflow.com-Users.7z").write_bytes(b"not a posts archive")
    shards = se.shards({"path": str(tmp_path / "dumps")})
    assert [Path(s["path"]).name for s in shards] == ["Posts.xml", "cups.stackexchange.com.7z"]
    ids = [d["id"] for d in se.iter_documents({"path": str(tmp_path / "dumps")})]
    assert ids[0].startswith("stackexchange:beans:") and ids[-1].startswith("stackexchange:cups:")
    assert se.site_domain("/d/stackoverflow.com-Posts.7z") == "stackoverflow.com"
    assert se_posts.site_name("stackoverflow.com") == "stackoverflow"
    assert se.site_domain("/data/coffee/Posts.xml") == "coffee.stackexchange.com"


def test_s3_paths_with_moto(site_dir: Path, tmp_path: Path):
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    archive = make_7z(site_dir / "Posts.xml", tmp_path / "cups.stackexchange.com.7z")
    with moto.mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="dumps")
        s3.upload_file(str(site_dir / "Posts.xml"), "dumps", "se/beans.stackexchange.com/Posts.xml")
        s3.upload_file(str(archive), "dumps", "se/cups.stackexchange.com.7z")
        cfg = {"path": "s3://dumps/se/", "requester_pays": True, "region": "us-east-1"}
        docs = list(se.iter_documents(cfg))
        snap = se.snapshot(cfg)
        one_file = list(se.iter_documents({**cfg, "path": "s3://dumps/se/beans.stackexchange.com/Posts.xml"}))
    local = list(se.iter_documents({"path": str(site_dir)}))
    assert [d["text"] for d in docs[:4]] == [d["text"] for d in local]
    assert one_file == local
    assert {d["id"].split(":")[1] for d in docs} == {"beans", "cups"}
    assert snap["sites"] == ["beans.stackexchange.com", "cups.stackexchange.com"]
    assert all(f["etag"] and f["bytes"] > 0 for f in snap["files"])


# ---------------------------------------------------------------- the real coffee dump

MEMBER_BEFORE, NONMEMBER_AFTER = "2015-02-01", "2015-03-01"
# Established by hand from the dump (see the report): 225 questions, 327 answers; 109 questions asked in January,
# 100 in February, 16 in March. 20 January questions have an answer or an edit on or after 2015-02-01.
HAND_COUNTS = {"questions": 225, "answers": 327, "members": 89, "nonmembers": 16, "between_cutoffs": 100,
               "member_active_after_cutoff": 20}


def plain_reading(posts_xml: Path) -> dict:
    """The expected counts from ElementTree and string comparison of the ISO dates: no code under test."""
    rows = [r.attrib for r in ET.parse(posts_xml).getroot()]
    questions = [r for r in rows if r["PostTypeId"] == "1"]
    last_answer: dict[str, str] = defaultdict(str)
    for r in rows:
        if r["PostTypeId"] == "2":
            last_answer[r["ParentId"]] = max(last_answer[r["ParentId"]], r["CreationDate"])
    early = [q for q in questions if q["CreationDate"] < MEMBER_BEFORE]
    members = [q for q in early
               if max(q["CreationDate"], q.get("LastEditDate", ""), last_answer[q["Id"]]) < MEMBER_BEFORE]
    return {
        "questions": len(questions),
        "answers": sum(r["PostTypeId"] == "2" for r in rows),
        "members": len(members),
        "nonmembers": sum(q["CreationDate"] >= NONMEMBER_AFTER for q in questions),
        "between_cutoffs": sum(MEMBER_BEFORE <= q["CreationDate"] < NONMEMBER_AFTER for q in questions),
        "member_active_after_cutoff": len(early) - len(members),
        "member_ids": sorted(int(q["Id"]) for q in members),
        "answer_bodies": [r["Body"] for r in rows if r["PostTypeId"] == "2"],
    }


def cutoff_counts(docs) -> tuple[dict, dict]:
    stage = TimeCutoff(MEMBER_BEFORE, NONMEMBER_AFTER)
    counts: dict[str, int] = defaultdict(int)
    labels = {}
    for doc in docs:
        row = dict(doc)
        drop = run_row_stages(row, [stage])
        if drop:
            counts[drop["reason"]] += 1
        else:
            counts["members" if row["label"] == 1 else "nonmembers"] += 1
            labels[row["meta"]["post_id"]] = row["label"]
    return dict(counts), labels


@pytest.fixture(scope="module")
def coffee(shared_data: Path) -> Path:
    return shared_data / "stackexchange" / "coffee.stackexchange.com" / "Posts.xml"


def test_coffee_question_counts_per_side(coffee: Path):
    expected = plain_reading(coffee)
    assert {k: expected[k] for k in HAND_COUNTS} == HAND_COUNTS
    docs = list(se.iter_documents({"path": str(coffee.parent)}))
    assert len(docs) == expected["questions"]
    counts, labels = cutoff_counts(docs)
    assert counts == {k: expected[k] for k in ("members", "nonmembers", "between_cutoffs",
                                                "member_active_after_cutoff")}
    assert sum(counts.values()) == expected["questions"]  # every question is kept or dropped with a reason
    assert sorted(i for i, label in labels.items() if label == 1) == expected["member_ids"]


def test_coffee_texts_hold_no_html_and_no_answer(coffee: Path):
    docs = list(se.iter_documents({"path": str(coffee)}))
    answers = [se_posts.body_text(b)[0] for b in plain_reading(coffee)["answer_bodies"]]
    probes = [a[:80] for a in answers if len(a) >= 80]  # long enough to be unmistakably that answer
    assert len(probes) > 250
    for d in docs:
        assert not HTML_TAG.search(d["text"]), d["id"]
        assert "&lt;" not in d["text"] and "&amp;" not in d["text"]
        assert not any(p in d["text"] for p in probes), d["id"]
    assert not any(d["meta"]["has_code"] or d["meta"]["has_formula"] for d in docs)  # prices are not TeX


def test_coffee_7z_made_by_the_test_gives_the_same_documents(coffee: Path, tmp_path: Path):
    archive = make_7z(coffee, tmp_path / "coffee.stackexchange.com.7z")
    assert list(se.iter_documents({"path": str(archive)})) == list(se.iter_documents({"path": str(coffee)}))


def test_bench_stackexchange_parse(coffee: Path):
    from bench.curation_bench import bench_stackexchange_parse

    result = bench_stackexchange_parse(str(coffee.parent), repeats=1)
    assert (result["posts"], result["questions"], result["documents"]) == (592, 225, 225)
    assert result["posts_per_s"] > 0 and result["cores"] == 1


# ---------------------------------------------------------------- byte ranges (curation/sources/stackexchange/ranges.py)

def _range_docs(path: Path, range_bytes: int, partitions: int | None = None, **opts):
    """Documents of every range shard, with the answers' aggregation run in this process as the job runs it."""
    from curation.sources.stackexchange import ranges as se_ranges

    shards = se.shards({"path": str(path), "range_bytes": range_bytes, **opts})
    aggs = se.aggregations(shards)
    merged = {}
    for agg in aggs:
        p = partitions or agg["partitions"]
        pieces = [se.aggregation_scan(item, p) for item in agg["items"]]
        merged[agg["key"]] = [se.aggregation_merge(*[piece[k] for piece in pieces]) for k in range(p)]
    docs = [d for s in shards for d in se.iter_documents(s, merged.get(s.get("site_key")))]
    return shards, docs


def test_ranges_own_every_line_once(site_dir: Path):
    from curation.sources.stackexchange import ranges as se_ranges

    path = site_dir / "Posts.xml"
    data = path.read_bytes()
    for size in (1, 7, 100, 333, len(data) - 1, len(data), 10 * len(data)):
        lines = [(off, line) for a, b in se_ranges.byte_ranges(len(data), size)
                 for off, line in se_ranges.iter_lines(str(path), a, b)]
        assert b"".join(line for _, line in lines) == data, size
        assert all(data[off:off + len(line)] == line for off, line in lines)


@pytest.mark.parametrize("range_bytes,partitions", [(150, None), (400, 3), (1 << 20, None)])
def test_range_shards_give_the_whole_file_documents(site_dir: Path, range_bytes: int, partitions):
    whole = list(se.iter_documents({"path": str(site_dir)}))
    shards, docs = _range_docs(site_dir / "Posts.xml", range_bytes, partitions)
    assert (len(shards) > 1) == (range_bytes < 1 << 20)
    assert docs == whole  # answers joined across ranges: q1's last answer sits before it and in a later range


def test_range_shard_alone_scans_the_answers_itself(site_dir: Path):
    shards = se.shards({"path": str(site_dir / "Posts.xml"), "range_bytes": 300})
    alone = [d for s in shards for d in se.iter_documents(s)]
    assert alone == list(se.iter_documents({"path": str(site_dir)}))


def test_broken_and_foreign_lines_in_a_range_are_quarantined(site_dir: Path, tmp_path: Path):
    path = tmp_path / "x.stackexchange.com" / "Posts.xml"
    path.parent.mkdir()
    lines = (site_dir / "Posts.xml").read_text().splitlines()
    lines.insert(5, '  <row Id="90" PostTypeId="1" CreationDate="2015-01-01T00:00:00" Body="&lt;p&gt;cut')
    lines.insert(6, "stray text, not XML")
    lines.insert(7, '  <row Id="91" PostTypeId="1" Body="&lt;p&gt;no date&lt;/p&gt;" />')
    path.write_text("\n".join(lines) + "\n")
    shards, docs = _range_docs(path, 200)
    bad = {d["id"]: d["meta"]["quarantine"]["reason"] for d in docs if "quarantine" in d["meta"]}
    assert sorted(bad.values()) == ["bad_row", "broken_row", "broken_row"], bad
    assert "stackexchange:x:91" in bad and all(k.startswith("stackexchange:x:") for k in bad)
    good = [d for d in docs if "quarantine" not in d["meta"]]
    assert [d["text"] for d in good] == [d["text"] for d in se.iter_documents({"path": str(site_dir)})]


def test_answers_left_unparsed_change_no_document(site_dir: Path, tmp_path: Path, monkeypatch):
    """The question pass skips rows that certainly parse and are no questions (rows.settled_non_question); a broken
    answer is still parsed, and quarantined as before, at its place. The answers' pass reads the same answers."""
    from curation.sources.stackexchange import ranges as se_ranges
    from curation.sources.stackexchange import rows as se_rows

    path = tmp_path / "x.stackexchange.com" / "Posts.xml"
    path.parent.mkdir()
    lines = (site_dir / "Posts.xml").read_text().splitlines()
    lines[4:4] = ['  <row Id="92" PostTypeId="2" ParentId="1" Body="cut />',
                  '  <row Id="93" PostTypeId="2" PostTypeId="2" ParentId="1" />',
                  '  <row Id="94" PostTypeId="2" ParentId="1" Body="&nbsp;" />']
    path.write_text("\n".join(lines) + "\n")
    settled = [line for line in path.read_bytes().splitlines() if se_rows.settled_non_question(line)]
    assert len(settled) == 4  # the two good answers and the two wikis of write_dump
    skipping = [_range_docs(path, size)[1] for size in (200, 1 << 20)]
    scanned = se_ranges.scan_answers({"path": str(path), "byte_range": [0, path.stat().st_size]}, 2)
    monkeypatch.setattr(se_rows, "settled_non_question", lambda line: False)
    monkeypatch.setattr(se_rows, "settled_values", lambda line, names: None)  # the answers' pass parses them all
    assert skipping == [_range_docs(path, size)[1] for size in (200, 1 << 20)]
    again = se_ranges.scan_answers({"path": str(path), "byte_range": [0, path.stat().st_size]}, 2)
    assert [a.tolist() for a in scanned] == [a.tolist() for a in again] and sum(map(len, again)) == 1
    bad = [(d["id"], d["meta"]["quarantine"]["reason"]) for d in skipping[1] if "quarantine" in d["meta"]]
    assert [reason for _, reason in bad] == ["broken_row"] * 3 and bad[0][0].startswith("stackexchange:x:byte")


def test_an_answer_with_an_unreadable_date_is_left_out_of_the_answers_pass(site_dir: Path, tmp_path: Path):
    """Its question's latest activity comes from its other answers; the range's pass does not fail (it raised on
    arrays of different lengths when the ParentId was read and the date was not)."""
    from curation.sources.stackexchange import ranges as se_ranges

    path = tmp_path / "x.stackexchange.com" / "Posts.xml"
    path.parent.mkdir()
    lines = (site_dir / "Posts.xml").read_text().splitlines()
    clean = tmp_path / "clean.xml"
    clean.write_text("\n".join(lines) + "\n")
    lines[4:4] = ['  <row Id="95" PostTypeId="2" ParentId="1" CreationDate="not a date" />']
    path.write_text("\n".join(lines) + "\n")
    got = se_ranges.scan_answers({"path": str(path), "byte_range": [0, path.stat().st_size]}, 2)
    want = se_ranges.scan_answers({"path": str(clean), "byte_range": [0, clean.stat().st_size]}, 2)
    assert [a.tolist() for a in got] == [a.tolist() for a in want]


def test_ranges_on_s3_read_only_their_bytes(site_dir: Path, moto_s3):
    s3 = moto_s3("dumps")
    s3.upload_file(str(site_dir / "Posts.xml"), "dumps", "se/beans.stackexchange.com/Posts.xml")
    shards, docs = _range_docs("s3://dumps/se/beans.stackexchange.com/Posts.xml", 250, region="us-east-1")
    assert len(shards) > 2 and docs == list(se.iter_documents({"path": str(site_dir)}))


def test_a_7z_is_staged_once_then_split_into_ranges(site_dir: Path, tmp_path: Path, monkeypatch):
    archive = make_7z(site_dir / "Posts.xml", tmp_path / "beans.stackexchange.com.7z")
    staging = tmp_path / "staging"
    cfg = {"path": str(archive), "range_bytes": 300, "staging": str(staging)}
    shards, docs = _range_docs(archive, 300, staging=str(staging))
    assert len(shards) > 2 and all(s["site"] == "beans.stackexchange.com" for s in shards)
    assert docs == list(se.iter_documents({"path": str(site_dir)}))  # ids name the site of the archive
    staged = list(staging.rglob("Posts.xml"))
    assert len(staged) == 1 and staged[0].read_bytes() == (site_dir / "Posts.xml").read_bytes()
    from curation.sources.stackexchange import dump as se_dump

    def no_second_extraction(*a, **k):
        raise AssertionError("the staged copy should be reused")

    monkeypatch.setattr(se_dump, "open_posts", no_second_extraction)
    assert se.shards(cfg) == shards


def test_a_truncated_7z_is_one_quarantine_document(site_dir: Path, tmp_path: Path):
    archive = make_7z(site_dir / "Posts.xml", tmp_path / "cups.stackexchange.com.7z")
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    shards = se.shards({"path": str(archive), "staging": str(tmp_path / "staging")})
    docs = [d for s in shards for d in se.iter_documents(s)]
    assert len(docs) == 1 and docs[0]["id"] == "stackexchange:cups:dump"
    assert docs[0]["meta"]["quarantine"]["reason"] == "broken_dump"
    assert not list((tmp_path / "staging").rglob("_COMPLETE"))  # nothing half-written is taken for complete


def test_a_truncated_7z_streamed_whole_is_one_quarantine_document_too(site_dir: Path, tmp_path: Path):
    archive = make_7z(site_dir / "Posts.xml", tmp_path / "cups.stackexchange.com.7z")
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    docs = list(se.iter_documents({"path": str(archive)}))
    assert [(d["id"], d["meta"]["quarantine"]["reason"]) for d in docs] == [("stackexchange:cups:dump",
                                                                             "broken_dump")]


def test_a_7z_staged_to_s3_parses_in_ranges_from_there(site_dir: Path, tmp_path: Path, moto_s3):
    archive = make_7z(site_dir / "Posts.xml", tmp_path / "beans.stackexchange.com.7z")
    s3 = moto_s3("stage")
    shards, docs = _range_docs(archive, 250, staging="s3://stage/se", region="us-east-1")
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="stage")["Contents"])
    staged = s3.get_object(Bucket="stage", Key=keys[0])["Body"].read()
    assert len(shards) > 2 and all(s["path"].startswith("s3://stage/se/beans.stackexchange.com-") for s in shards)
    assert [k.rsplit("/", 1)[-1] for k in keys] == ["Posts.xml", "_COMPLETE"]
    assert staged == (site_dir / "Posts.xml").read_bytes()
    assert docs == list(se.iter_documents({"path": str(site_dir)}))
