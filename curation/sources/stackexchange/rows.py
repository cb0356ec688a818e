"""The `<row .../>` lines of a Stack Exchange Posts.xml as attributes: one line alone (`row_attributes`, the
definition), or many lines parsed together with the same result (`iter_rows`).

Why together: lxml's `etree.fromstring` per line cost ~29 us a row on the real coffee dump (a parser run, a document
and an element per line), the largest share of reading a dump. `iter_rows` hands lxml a few hundred lines as one
document and reads each row's attributes from its element. A line goes into that document only when it is one
whole empty tag by its bytes: it starts with `<row`, ends with `/>`, and holds no other `<` or `>`. Such a line
cannot change how its neighbours parse: it opens no element and holds no markup, and an unterminated quote runs
into the next line's `<` (or the closing tag's), which no attribute value may hold, so the document fails. When the
document fails for any reason, every line of the batch is parsed alone, as before; every other line is parsed alone
anyway. A line that parses alone therefore gives the same attributes either way, and a broken row gives the same
error. tests/curation/sources/test_stackexchange_rows.py checks both paths against each other on the real dump and
on edge cases (entities, character references, attribute order, BOM and DOCTYPE lines, broken rows).

`settled_non_question` tells, from a line's bytes alone, a row that certainly parses and is no question (an answer,
a wiki): the question pass leaves those unparsed, since they would give it nothing; `settled_values` reads such a
row's plain values off its bytes, for the answers' pass.
"""
from __future__ import annotations

import re
from typing import Iterable, Iterator, Mapping, Optional, Tuple

_STRUCTURE = (b"<?xml", b"<!DOCTYPE", b"<posts", b"</posts")
_BOM = b"\xef\xbb\xbf"
BATCH_LINES = 256  # lines per document: a few hundred KB, so one broken row costs little to re-parse

# (byte offset, the row's attributes or None for a structure line, the ValueError of a broken row or None)
Row = Tuple[int, Optional[Mapping[str, str]], Optional[ValueError]]


def parser():
    from lxml import etree

    # Untrusted input: no DTD loading, no entity expansion, no network; huge_tree for very long bodies.
    return etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True, huge_tree=True)


def _stripped(line: bytes) -> bytes | None:
    """The line without surrounding whitespace and BOM; None for the file's structure lines (and blank ones);
    raises ValueError for a line that is not a row."""
    s = line.strip().lstrip(_BOM)
    if not s or s.startswith(_STRUCTURE):
        return None
    if not s.startswith(b"<row"):
        raise ValueError(f"not a <row> line: {s[:80]!r}")
    return s


def _parse_alone(s: bytes, parser) -> dict[str, str]:
    from lxml import etree

    try:
        return dict(etree.fromstring(s, parser).attrib)
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"broken XML: {exc}") from None


def row_attributes(line: bytes, parser_=None) -> dict[str, str] | None:
    """A row line's attributes; None for the file's structure lines; raises ValueError for a broken row."""
    s = _stripped(line)
    return None if s is None else _parse_alone(s, parser_ if parser_ is not None else parser())


# ---------------------------------------------------------------- rows the question pass need not parse

# Bytes that no attribute value of a well-formed row holds: XML's forbidden controls, and `<` (the row's own is the
# only one). Checked with one bytes.translate, which is ~5x faster here than a regular expression's character class.
_NOT_IN_VALUES = bytes(range(0x09)) + b"\x0b\x0c" + bytes(range(0x0e, 0x20)) + b"<"
_BAD_AMP = re.compile(rb"&(?!(?:lt|gt|amp|quot|apos|#xA|#xD|#x9);)")  # any other reference: let the parser judge
# The row with every value emptied: `<row Name="" ... />`, single spaces, names of 1 to 64 ASCII letters. Not `X...`
# (names starting with "xml" are reserved), no `:` (namespaces), no `xmlns`.
_SKELETON = re.compile(rb'<row(?: [A-WYZ][A-Za-z]{0,63}="")+ ?/>')
_NOT_CHARACTERS = (b"\xef\xbf\xbe", b"\xef\xbf\xbf")  # U+FFFE and U+FFFF: valid UTF-8, yet no XML characters
_KIND = b' PostTypeId="'
_KIND_NAME, _KIND_AT = _KIND[:-1], len(_KIND)
_LONGEST = 1 << 24  # far below libxml2's length limits with huge_tree (parser() sets it)


def settled_non_question(line: bytes) -> bool:
    """True only when `line` certainly parses as a row (row_attributes returns its attributes, raises nothing)
    whose PostTypeId is not "1": the question pass would read it and yield nothing, so it may skip it unparsed.
    False for anything in doubt, which is then parsed as before.

    Why: answers are ~55% of a dump's rows and ~70% of its bytes; the question pass parsed each one only to find it
    is not a question (the answers' pass reads them). This check costs about half what parsing it did (~7 us against
    ~15 us on a 1.6 KB answer, one core). Why it is certain: every `"` delimits a value (a value holds none), so
    splitting on `"` gives the names and the values exactly; the names are plain, distinct and well placed
    (_SKELETON); no value holds a control, a `<` or an `&` that is not one of the references listed; the bytes are
    UTF-8 of XML characters. A row with all that is well-formed XML, and its PostTypeId attribute is the value after
    ` PostTypeId=`."""
    return _settled(line) is not None


def settled_values(line: bytes, names: tuple[bytes, ...]) -> tuple[str | None, ...] | None:
    """For a line settled_non_question accepts, the values of `names` (each written b" Name=") exactly as
    row_attributes gives them, None for an absent one; None when the line is not settled or one of those values
    holds a reference, a tab, a line feed or a CR (the parser decodes the one and turns the others into spaces).
    Lets the answers' pass read an answer's ParentId and CreationDate without parsing the row."""
    settled = _settled(line)
    if settled is None:
        return None
    have, parts = settled
    out = []
    for name in names:
        try:
            value = parts[2 * have.index(name) + 1]
        except ValueError:  # no such attribute
            out.append(None)
            continue
        if b"&" in value or b"\t" in value or b"\n" in value or b"\r" in value:
            return None
        out.append(value.decode("utf-8"))
    return tuple(out)


def _settled(line: bytes) -> tuple[list[bytes], list[bytes]] | None:
    """(names, parts) of a settled line: names[i] (b" Name=") holds the value parts[2 * i + 1], still encoded."""
    i = line.find(_KIND, 0, 200)  # cheap first: questions, and rows that name their kind late, go to the parser
    if i < 0 or line[i + _KIND_AT:i + _KIND_AT + 2] == b'1"':
        return None
    s = line.strip().lstrip(_BOM)  # as _stripped
    if (not s.startswith(b"<row ") or len(s) > _LONGEST or len(s.translate(None, _NOT_IN_VALUES)) != len(s) - 1
            or _BAD_AMP.search(s) is not None):
        return None
    parts = s.split(b'"')
    names = parts[0::2]  # with an even count of `"` only: `<row ... />"x` would pass as a skeleton
    if len(parts) % 2 == 0 or _SKELETON.fullmatch(b'""'.join(names)) is None:
        return None
    del names[-1]  # " />"
    names[0] = names[0][len(b"<row"):]  # " Name=", as the others: `<row Id="1" Id="1" />` repeats a name too
    if len(set(names)) != len(names) or _KIND_NAME not in names:  # a repeated attribute is an error
        return None
    kind = parts[2 * names.index(_KIND_NAME) + 1]
    if not kind.isdigit() or kind == b"1":
        return None
    if not s.isascii():
        if _NOT_CHARACTERS[0] in s or _NOT_CHARACTERS[1] in s:
            return None
        try:
            s.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return names, parts


# ---------------------------------------------------------------- many lines at once

def _whole_tag(s: bytes) -> bool:
    return s.endswith(b"/>") and s.count(b"<") == 1 and s.count(b">") == 1


def _parse_together(tags: list[bytes], parser) -> list | None:
    """The elements of `tags` parsed as one document, or None when it does not parse (then each line is parsed
    alone, which says which one is broken)."""
    from lxml import etree

    try:
        root = etree.fromstring(b"<rows>\n" + b"\n".join(tags) + b"\n</rows>", parser)
    except Exception:  # noqa: BLE001 - whatever the reason, the lines alone decide
        return None
    elements = list(root)
    return elements if len(elements) == len(tags) else None


def _batch(lines: list[tuple[int, bytes]], parser) -> Iterator[Row]:
    stripped: list[bytes | None | ValueError] = []
    for _, line in lines:
        try:
            stripped.append(_stripped(line))
        except ValueError as exc:
            stripped.append(exc)
    whole = [isinstance(s, bytes) and _whole_tag(s) for s in stripped]
    tags = [s for s, w in zip(stripped, whole) if w]
    parsed = _parse_together(tags, parser) if tags else None
    elements = iter(parsed or ())
    for (offset, _), s, w in zip(lines, stripped, whole):
        if s is None or isinstance(s, ValueError):
            yield offset, None, s
        elif w and parsed is not None:
            yield offset, next(elements).attrib, None
        else:
            try:
                yield offset, _parse_alone(s, parser), None
            except ValueError as exc:
                yield offset, None, exc


def iter_rows(lines: Iterable[tuple[int, bytes]], parser_=None, batch_lines: int = BATCH_LINES) -> Iterator[Row]:
    """(offset, attributes, error) for every (offset, line), in order: attributes None for a structure line, error
    set for a broken row (the ValueError `row_attributes` raises). Attributes are a read-only mapping (lxml's
    attribute view, or a dict): `dict(...)` it to keep it."""
    parser_ = parser_ if parser_ is not None else parser()
    pending: list[tuple[int, bytes]] = []
    for item in lines:
        pending.append(item)
        if len(pending) >= batch_lines:
            yield from _batch(pending, parser_)
            pending = []
    if pending:
        yield from _batch(pending, parser_)
