"""Posts.xml lines parsed many at a time (curation/sources/stackexchange/rows.iter_rows) give what each line parsed
alone gives (rows.row_attributes): the same attributes in the same order, the same skipped structure lines, the
same errors for broken rows."""
from __future__ import annotations

from pathlib import Path

import pytest

from curation.sources.stackexchange import rows as se_rows

EDGE_LINES = [
    b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n',
    b'<!DOCTYPE posts>\n',
    b"<posts>\n",
    b"\n",
    b"   \r\n",
    b'  <row Id="1" PostTypeId="1" Title="a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos;" Body="x&#xA;y&#xD;&#xa;z" />\r\n',
    b'  <row Body="&#x1F600; &#128512; &#65; &#x41;" PostTypeId="2" Id="2" ParentId="1"/>\n',
    "  <row Id=\"3\" Title=\"caf\u00e9 \u2615 \u65e5\u672c\" Tags=\"&lt;a&gt;&lt;b&gt;\" />\n".encode("utf-8"),
    b"  <row Id='4' Title='single quotes' />\n",
    b'  <row Id="5" Body="raw > is allowed" />\n',
    b'  <row Id="6" Body="tab\there" />\n',
    b'  <row\tId="7"\tTitle="tabs between attributes"/>\n',
    b'  <row Id="8" ></row>\n',
    b'  <row Id = "9" Title = "spaces around =" />\n',
    b'  <rowx Id="10" />\n',
    b'  <row Id="11" />\n',
    b'  <row />\n',
    b'  <row Id="12" xmlns:x="urn:x" x:a="namespaced" />\n',
    # broken rows
    b'  <row Id="20" Body="unterminated />\n',
    b'  <row Id="21" Body="&foo; undefined entity" />\n',
    b'  <row Id="22" Body="bare & ampersand" />\n',
    b'  <row Id="23" Id="23" />\n',
    b'  <row Id="24" Body="a < b" />\n',
    b'  <row Id="25" Body="&#0; is not a character" />\n',
    b'  <row Id="26" Body="\xff\xfe not UTF-8" />\n',
    b'  <row Id="27" Body="NUL \x00 byte" />\n',
    b'  <row Id="28" /> trailing/>\n',
    b'  <row Id="29" /><row Id="30" />\n',
    b'  <row Id="31">\n',
    b'  <row Id="32" y:a="undeclared prefix" />\n',
    b'  <row Id="33" Body="&#X41; capital X" />\n',
    b"garbage line\n",
    b'  <row Id="34" Body="form\x0cfeed" />\n',
    b'  <row Id="35" Title="last good row" />\n',
    b"</posts>\n",
]


def _alone(lines: list[bytes]) -> list:
    out = []
    for line in lines:
        try:
            row = se_rows.row_attributes(line)
            out.append(None if row is None else list(row.items()))
        except ValueError as exc:
            out.append(("error", str(exc)))
    return out


def _together(lines: list[bytes], batch_lines: int) -> list:
    offsets = [sum(map(len, lines[:i])) for i in range(len(lines))]
    out = []
    for (offset, row, broken), expected_offset in zip(
            se_rows.iter_rows(zip(offsets, lines), batch_lines=batch_lines), offsets, strict=True):
        assert offset == expected_offset
        out.append(("error", str(broken)) if broken is not None else None if row is None else list(dict(row).items()))
    return out


@pytest.mark.parametrize("batch_lines", [1, 2, 3, 5, 256])
def test_edge_cases_parse_together_as_alone(batch_lines):
    assert _together(EDGE_LINES, batch_lines) == _alone(EDGE_LINES)


def test_edge_cases_decode_as_xml_does():
    got = _alone(EDGE_LINES)
    assert got[:5] == [None] * 5 and got[-1] is None  # BOM + declaration, DOCTYPE, <posts>, blank lines, </posts>
    assert dict(got[5])["Title"] == "a & b <c> \"d\" 'e'" and dict(got[5])["Body"] == "x\ny\r\nz"
    assert [k for k, _ in got[6]] == ["Body", "PostTypeId", "Id", "ParentId"]  # file order kept
    assert dict(got[6])["Body"] == "\U0001F600 \U0001F600 A A"
    assert dict(got[10])["Body"] == "tab here"  # a literal tab in a value reads as a space
    assert dict(got[17]) == {"Id": "12", "{urn:x}a": "namespaced"}
    broken = [i for i, r in enumerate(got) if isinstance(r, tuple)]
    assert broken == list(range(18, 33))  # from the unterminated quote to the form feed, the garbage line included


def test_a_broken_row_in_a_batch_leaves_its_neighbours_parsed():
    good = [b'<row Id="%d" PostTypeId="2" ParentId="1" />\n' % i for i in range(10)]
    lines = good[:4] + [b'<row Id="x" Body="unterminated />\n'] + good[4:]
    got = _together(lines, 256)
    assert [g[0] for g in got] == [("Id", str(i)) for i in range(4)] + ["error"] + [("Id", str(i)) for i in range(4, 10)]
    assert got == _alone(lines)


def test_the_real_dump_parses_together_as_alone(shared_data: Path):
    path = shared_data / "stackexchange" / "coffee.stackexchange.com" / "Posts.xml"
    lines = path.read_bytes().splitlines(keepends=True)
    alone = _alone(lines)
    assert sum(1 for r in alone if isinstance(r, list)) == 592
    for batch_lines in (7, 256):
        assert _together(lines, batch_lines) == alone


# ---------------------------------------------------------------- rows the question pass leaves unparsed

ANSWER = b'  <row Id="7" PostTypeId="2" ParentId="1" CreationDate="2015-01-30T10:00:00.000" Score="3" ' \
         b'Body="&lt;p&gt;use a &quot;jar&quot; &amp; keep it&#xA;cool \xe2\x98\x95&lt;/p&gt;" CommentCount="0" />\n'
SETTLED = [
    ANSWER,
    ANSWER.replace(b'PostTypeId="2"', b'PostTypeId="5"'),  # a tag wiki: no question either
    b'\xef\xbb\xbf<row Id="8" PostTypeId="2" ParentId="1"/>\r\n',
    b'<row PostTypeId="2" Id="9" Body="raw > and a\ttab" />',
]
# Answers that are not certainly well-formed, and rows that are questions after all: each goes to the parser.
UNSETTLED = [
    ANSWER.replace(b'" CommentCount', b' CommentCount'),  # an unterminated value
    ANSWER.replace(b" />", b' Id="7" />'),  # a repeated attribute
    b'<row Id="7" Id="8" PostTypeId="2" />',  # the first one repeated
    ANSWER.replace(b" />", b' />"x'),  # text after the row (an odd count of quotes)
    ANSWER.replace(b" />", b' /> Score="1" />'),
    ANSWER.replace(b"&amp;", b"&"),  # a bare ampersand
    ANSWER.replace(b"&amp;", b"&foo;"),  # an undefined entity
    ANSWER.replace(b"&amp;", b"&#0;"),  # a reference to no character
    ANSWER.replace(b"&amp;", b"&#x41;"),  # fine, but not a reference this check knows: the parser decides
    ANSWER.replace(b"&amp;", b"<"),
    ANSWER.replace(b"&amp;", b"\x0c"),
    ANSWER.replace(b"&amp;", b"\x00"),
    ANSWER.replace(b"\xe2\x98\x95", b"\xff\xfe"),  # not UTF-8
    ANSWER.replace(b"\xe2\x98\x95", b"\xed\xa0\x80"),  # a surrogate
    ANSWER.replace(b"\xe2\x98\x95", b"\xef\xbf\xbe"),  # U+FFFE: UTF-8, but no XML character
    ANSWER.replace(b'Score="3"', b"Score='3'"),
    ANSWER.replace(b'Score="3"', b'x:Score="3"'),
    ANSWER.replace(b'Score="3"', b'xmlns="urn:x"'),
    ANSWER.replace(b'Score="3"', b'Score = "3"'),
    ANSWER.replace(b' Score="3"', b'\tScore="3"'),
    ANSWER.replace(b" />", b"></row>"),
    ANSWER.replace(b"<row", b"<rowx"),
    ANSWER.replace(b'PostTypeId="2"', b'PostTypeId="1"'),
    ANSWER.replace(b'PostTypeId="2"', b'PostTypeId="1" Title="PostTypeId=&quot;2&quot;"'),
    ANSWER.replace(b'PostTypeId="2"', b'PostTypeId="&#50;"'),
    ANSWER.replace(b'PostTypeId="2"', b'Kind="2"'),
    ANSWER.replace(b'PostTypeId="2"', b'PostTypeId="2" PostTypeId="1"'),
    b'<row Id="1" Title="a PostTypeId=" PostTypeId="1" />',
    b'garbage PostTypeId="2" />',
]


VALUES = (b" PostTypeId=", b" ParentId=", b" CreationDate=", b" Id=", b" Missing=")


def _certain(line: bytes) -> bool:
    """What settled_non_question promises: the row parses alone, and it is not a question; and settled_values, when
    it answers, answers what the parser reads."""
    try:
        row = se_rows.row_attributes(line)
    except ValueError:
        return False
    values = se_rows.settled_values(line, VALUES)
    if values is not None and values != tuple(row.get(n.decode()[1:-1]) for n in VALUES):
        return False
    return row is not None and row.get("PostTypeId") != "1"


def test_only_rows_that_certainly_parse_as_non_questions_are_settled():
    assert all(se_rows.settled_non_question(line) and _certain(line) for line in SETTLED)
    assert not any(se_rows.settled_non_question(line) for line in UNSETTLED)
    assert not any(se_rows.settled_non_question(line) for line in EDGE_LINES)  # none names a PostTypeId early
    assert not any(se_rows.settled_values(line, VALUES[:1]) for line in UNSETTLED)


def test_settled_values_are_the_parsed_values_or_none():
    wanted = (b" ParentId=", b" CreationDate=", b" Title=")
    assert se_rows.settled_values(ANSWER, wanted) == ("1", "2015-01-30T10:00:00.000", None)
    assert se_rows.settled_values(ANSWER, (b" Id=", b" PostTypeId=")) == ("7", "2")  # the first attribute too
    assert se_rows.settled_values(SETTLED[2], (b" ParentId=",)) == ("1",)  # BOM and CRLF around the row
    # values the parser would change: a reference decoded, a tab, a line feed or a CR turned into a space
    for value in (b"1&#xA;", b"&#x9;1", b"1\t", b"\r1", b"1\n1", b"1&amp;"):
        line = ANSWER.replace(b'ParentId="1"', b'ParentId="' + value + b'"')
        assert se_rows.settled_non_question(line) and se_rows.settled_values(line, wanted) is None
    assert se_rows.settled_values(ANSWER, (b" Body=",)) is None  # it holds references
    assert se_rows.settled_values(SETTLED[3], (b" Body=",)) is None  # it holds a tab
    assert se_rows.settled_values(ANSWER.replace(b"PostTypeId=\"2\"", b"PostTypeId=\"1\""), wanted) is None


def test_settled_rows_parse_under_random_damage():
    """Rows damaged at random (quotes, markup, references, controls, bad UTF-8, repeated names moved in): whenever
    the check settles one, the parser reads it, and not as a question, with the values settled_values reads."""
    import random

    atoms = [b'"', b"'", b"<", b">", b"&", b"&#0;", b"&foo;", b"&lt", b"\x00", b"\x0c", b"\xff", b"\xc3",
             b"\xef\xbf\xbf", b" ", b"\t", b"\n", b"\r", b"=", b"/>", b' Id="9"', b' PostTypeId="1"', b' x:a="1"',
             b" xmlns:x=", b"</row>", b"&#xA;", b"&amp;", b"1"]
    atoms += [b"a", b"Z", b"9", b"&lt;", b"&quot;", b"\xe2\x82\xac"] * 3  # harmless ones, so that rows survive too
    rng = random.Random(0)
    settled = 0
    for _ in range(3000):
        line = bytearray(rng.choice(SETTLED * 3 + UNSETTLED))
        for _ in range(rng.randint(1, 2)):
            at, draw = rng.randrange(len(line) + 1), rng.random()
            if draw < 0.6:
                line[at:at] = rng.choice(atoms)
            elif draw < 0.8:
                del line[at:at + rng.randint(1, 4)]
            else:  # a piece of the row again: repeated names, stray quotes
                start = rng.randrange(len(line))
                line[at:at] = line[start:start + rng.randint(1, 30)]
        if se_rows.settled_non_question(bytes(line)):
            settled += 1
            assert _certain(bytes(line)), bytes(line)
        elif se_rows.settled_values(bytes(line), VALUES[:1]) is not None:
            raise AssertionError(bytes(line))
    assert settled > 100  # the damage often leaves a good row: the check is exercised both ways


def test_every_answer_of_the_real_dump_is_settled(shared_data: Path):
    path = shared_data / "stackexchange" / "coffee.stackexchange.com" / "Posts.xml"
    lines = path.read_bytes().splitlines(keepends=True)
    kinds = [(row or {}).get("PostTypeId") for row in map(se_rows.row_attributes, lines)]
    settled = [se_rows.settled_non_question(line) for line in lines]
    assert kinds.count("2") > 300
    assert settled == [kind not in (None, "1") for kind in kinds]  # all answers and wikis, no question
