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
