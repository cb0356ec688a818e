"""Wikitext -> plain prose, with mwparserfromhell's parse tree (no hand-written markup regexes).

What the text keeps matches `wikipedia.html_to_text` (the API source's rendered-HTML path) as closely as raw
wikitext allows, so members and non-members from the two sources read alike:
- paragraphs and list items, each a block, blocks joined by a blank line, whitespace collapsed inside a block;
- link text ([[Target|text]] -> text, [[Target]] -> Target), bold/italic and other inline formatting unwrapped;
- inline templates that carry text rendered as the article shows them ({{convert|10|km}} -> "10 km", {{ndash}},
  {{lang-de|..}} -> "German: ..", dates, fractions, ...: the data table in templates.py); every other template
  (infoboxes, citations, navboxes, pronunciation) renders as nothing, and the punctuation it leaves is repaired
  (no "()", "(; ;", ", ," or space before a comma);
- <math> as its TeX between dollar signs ("$x^2$"), so a sentence keeps its shape and a reader sees a formula;
- nothing from the apparatus: <ref>s, tables (indented and nested ones too), galleries, file/category links,
  comments, headings; and nothing after the first level-2 heading that opens an apparatus section (See also, ...);
- HTML entities decoded everywhere (link labels included).

Wikitext that the parser leaves unbalanced ("{{" without "}}", "[[" without "]]", a "{|" table without "|}")
shows up as markup in the text: `text_or_reason` reports it as `wikitext_residue` instead of passing markup on.
"""
from __future__ import annotations

import html
import re
from typing import Iterable

import mwparserfromhell
from mwparserfromhell import nodes

from curation.sources.wikipedia.templates import render_template

# Sections after which an article is apparatus rather than prose (the API source stops at the same headings).
STOP_SECTIONS = {"see also", "references", "notes", "external links", "further reading", "sources",
                 "bibliography", "footnotes", "citations", "notes and references"}
# Cut the wikitext at the first such level-2 heading before parsing: nothing after it is kept, and the reference
# lists and navboxes there are often most of a page's markup. Only finds the split point; the parser does the rest.
_STOP_HEADING = re.compile(r"^==\s*(?:" + "|".join(re.escape(s) for s in sorted(STOP_SECTIONS)) + r")\s*==\s*$",
                           re.IGNORECASE | re.MULTILINE)
# Inline tags whose contents are prose; every other tag (ref, table, gallery, math, ...) is dropped whole.
PROSE_TAGS = {"b", "i", "u", "em", "strong", "small", "big", "sub", "sup", "span", "abbr", "font", "code", "tt",
              "var", "cite", "q", "blockquote", "p", "div", "center", "mark", "ins", "nowiki", "noinclude", "bdi",
              "li", "dd", "dt", "ul", "ol", "dl", "s", "del", "poem"}
BLOCK_TAGS = {"li", "dd", "dt", "p", "div", "blockquote", "poem"}
LINK_NAMESPACES_DROPPED = {"file", "image", "media", "category"}
# A table starts on a line that opens with "{|", maybe indented (":{|", "::{|") or inside a list item.
_TABLE_LINE = re.compile(r"^[:*#;\s]*\{\|")
# Punctuation left where a template or tag rendered as nothing: (pattern, replacement), applied in order.
_REPAIRS = [
    (re.compile(r"\(\s*(?:[,;:]\s*)+"), "("),  # "(; ; born" -> "(born"
    (re.compile(r"(?:\s*[,;:])+\s*\)"), ")"),  # "Islāmābād, )" -> "Islāmābād)"
    (re.compile(r"\s*\((?:[^\w()]|\b(?:or|and)\b)*\)"), ""),  # "Germany ()", "(; )", "(or)": nothing left
    (re.compile(r"([,;:])(?:\s*[,;:])+"), r"\1"),  # ", ," -> ","
    (re.compile(r"\s+([,.;:!?)])"), r"\1"),  # "is , containing" -> "is, containing"
    (re.compile(r"\(\s+"), "("),
]
_RESIDUE = ("{{", "}}", "[[", "]]", "{|", "|}")
MATH_SPAN = re.compile(r"\$[^$\n]*\$")  # a <math> kept as $TeX$: its braces are TeX, not leftover markup
_MAGIC_WORD = re.compile(r"__[A-Z]+__")


def _name(value) -> str:
    return str(value).strip().lower().replace("_", " ")


def _node_text(node) -> str:
    if isinstance(node, nodes.Text):
        return _MAGIC_WORD.sub("", node.value)
    if isinstance(node, nodes.Wikilink):
        title = str(node.title).strip()
        if title.startswith(":"):  # [[:Category:X]] is a link to the category page, shown as text
            title = title[1:]
        elif title.split(":", 1)[0].strip().lower() in LINK_NAMESPACES_DROPPED:
            return ""
        return _nodes_text(node.text.nodes) if node.text is not None else title
    if isinstance(node, nodes.Tag):
        tag = _name(node.tag)
        if tag == "br":
            return "\n"
        if tag == "math":  # TeX kept, marked: the sentence keeps its formula instead of a hole
            tex = " ".join(str(node.contents).split()) if node.contents is not None else ""
            return f"${tex}$" if tex else ""
        if node.wiki_markup and tag in BLOCK_TAGS:  # "* ", "# ", ": ": the item's text follows as siblings
            return "\n\n"
        if tag not in PROSE_TAGS or node.self_closing or node.contents is None:
            return ""
        inner = _nodes_text(node.contents.nodes)
        return f"\n\n{inner}\n\n" if tag in BLOCK_TAGS else inner
    if isinstance(node, nodes.HTMLEntity):
        return node.normalize()
    if isinstance(node, nodes.ExternalLink):
        return _nodes_text(node.title.nodes) if node.brackets and node.title is not None else ""
    if isinstance(node, nodes.Template):
        return render_template(node, _name(node.name), lambda code: _nodes_text(code.nodes))
    return ""  # comments, arguments, headings inside tags


def _nodes_text(items: Iterable) -> str:
    return "".join(_node_text(n) for n in items)


def repair_punctuation(block: str) -> str:
    """The punctuation a dropped template or tag leaves, repaired (see _REPAIRS)."""
    for pattern, replacement in _REPAIRS:
        block = pattern.sub(replacement, block)
    return block


def _blocks(raw: str) -> str:
    blocks = (repair_punctuation(" ".join(html.unescape(b).split())) for b in re.split(r"\n\s*\n", raw))
    return "\n\n".join(b for b in blocks if b)


def drop_tables(wikitext: str) -> str:
    """The wikitext without its tables: every block from a line that opens "{|" (indented or in a list item too)
    to its matching "|}", nested tables included. Tables are apparatus (infoboxes, data, layout); removing them by
    lines keeps an article whose table the parser would leave half-open ("{|{{Infobox ...", a template in a style
    attribute) instead of losing it to `wikitext_residue`."""
    out, depth = [], 0
    for line in wikitext.split("\n"):
        stripped = line.strip()
        if _TABLE_LINE.match(line):  # a table opens (a nested one too); a one-line table closes on its line
            depth += 1 - (stripped.endswith("|}") and len(stripped) > 2)
        elif depth and stripped.startswith("|}"):
            depth -= 1
        elif not depth:
            out.append(line)
            continue
        if not depth:
            out.append("")  # a table ends a paragraph, as MediaWiki renders it
    return "\n".join(out)


def _split_at_stop(wikitext: str) -> tuple[str, str]:
    stop = _STOP_HEADING.search(wikitext)
    head, tail = (wikitext[:stop.start()], wikitext[stop.start():]) if stop else (wikitext, "")
    return drop_tables(head), tail


def _code_text(code) -> str:
    out: list[str] = []
    for node in code.nodes:
        if isinstance(node, nodes.Heading):
            if node.level == 2 and _name(node.title) in STOP_SECTIONS:
                break  # a stop heading the split point missed (extra markup around its title)
            out.append("\n\n")
        else:
            out.append(_node_text(node))
    return _blocks("".join(out))


def wikitext_to_text(wikitext: str) -> str:
    """Plain prose of an article's wikitext (see the module docstring). Raises what the parser raises."""
    return _code_text(mwparserfromhell.parse(_split_at_stop(wikitext)[0]))


def _skip_template(code, tail: str, skip_templates: set[str]) -> str | None:
    hit = sorted({_name(t.name) for t in code.filter_templates(recursive=False)} & skip_templates)
    if hit:
        return hit[0]
    # Disambiguation markers usually close the page, after any See also: look for them in the unparsed tail.
    tail = " ".join(tail.lower().replace("_", " ").split())
    return next((name for name in sorted(skip_templates)
                 if f"{{{{{name}}}}}" in tail or f"{{{{{name}|" in tail or f"{{{{ {name}" in tail), None)


def _residue(text: str) -> str | None:
    prose = MATH_SPAN.sub("", text)
    return next((r for r in _RESIDUE if r in prose), None)


def text_or_reason(wikitext: str, skip_templates: set[str] = frozenset()) -> tuple[str, str | None, str]:
    """(text, None, "") for a usable article, else ("", reason, detail): `skip_template` (a disambiguation page
    and the like), `wikitext_unparsable`, `wikitext_residue` (unbalanced markup left in the text), `empty_text`."""
    head, tail = _split_at_stop(wikitext)
    try:
        code = mwparserfromhell.parse(head)
        hit = _skip_template(code, tail, skip_templates) if skip_templates else None
        if hit:
            return "", "skip_template", hit
        text = _code_text(code)
    except Exception as exc:  # noqa: BLE001 - a parser failure is this page's problem, not the job's
        return "", "wikitext_unparsable", f"{type(exc).__name__}: {exc}"[:300]
    residue = _residue(text)
    if residue:  # the parser's bold/italic state can swallow a template ('' unbalanced across it): parse again
        # without style tags, whose markers are then plain "''" runs, removed (in wikitext they are never text)
        try:
            retry = re.sub(r"'{2,}", "", _code_text(mwparserfromhell.parse(head, skip_style_tags=True)))
        except Exception:  # noqa: BLE001 - the first parse's answer stands
            retry = ""
        if retry and not _residue(retry):
            text, residue = retry, None
    if residue:
        prose = MATH_SPAN.sub("", text)
        at = prose.index(residue)
        return "", "wikitext_residue", f"{residue!r} left in the text: ...{prose[max(0, at - 40):at + 40]}..."
    if not text:
        return "", "empty_text", f"{len(wikitext)} characters of wikitext, no prose"
    return text, None, ""
