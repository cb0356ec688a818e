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

What MediaWiki would not show is dropped, and counted (`render`'s `dropped`, per reason), rather than losing the
article:
- `<ref>`s go first, as MediaWiki's preprocessor takes extension tags before templates: a template left open inside
  a reference, or braces a reference leaves behind ("{{cite web|...}}}}</ref>"), are inside the reference;
- a table opened in the middle of a line ("text {| class=wikitable" then its rows) is dropped from its "{|" to its
  "|}" (`table_mid_line`), as a table at a line's start is;
- a paragraph where the parser leaves a template or table open (an unclosed "{{" spanning lines, a "{|") is
  dropped alone (`markup_paragraph`), not the article; a stray closer ("}}", "|}" with nothing open, e.g. after a
  reference that swallowed its template's end) is removed alone (`stray_closer`); an article with no paragraph left
  is `wikitext_residue`.
Markup MediaWiki itself shows as text is kept and not counted: a broken link ("[[link]" renders its brackets).
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
# Markup a paragraph may not keep: MediaWiki hides what these open or close. "[[" and "]]" are not here: the parser
# reads every well-formed link, and MediaWiki shows a broken one ("[[link]") as the text it is.
_RESIDUE = ("{{", "}}", "{|", "|}")
# <ref>...</ref> and <ref .../>, removed before parsing (see the module docstring); a <ref> never closed is left to
# the parser, which drops it as a tag.
_REF = re.compile(r"<ref\b[^>]*?/>|<ref\b[^>]*>.*?</ref\s*>", re.IGNORECASE | re.DOTALL)
_MID_LINE_TABLE = re.compile(r"(?<=\S)[ \t]*\{\|")
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


def drop_tables(wikitext: str, dropped: dict | None = None) -> str:
    """The wikitext without its tables: every block from a line that opens "{|" (indented or in a list item too)
    to its matching "|}", nested tables included. Tables are apparatus (infoboxes, data, layout); removing them by
    lines keeps an article whose table the parser would leave half-open ("{|{{Infobox ...", a template in a style
    attribute) instead of losing it to `wikitext_residue`. A table opened after text on its line, with its rows on
    the lines that follow, is cut from its "{|" (counted in `dropped` as `table_mid_line`)."""
    out, depth = [], 0
    lines = wikitext.split("\n")
    for k, line in enumerate(lines):
        if not depth and not _TABLE_LINE.match(line):
            m = _MID_LINE_TABLE.search(line)
            nxt = lines[k + 1].lstrip() if k + 1 < len(lines) else ""
            if m and nxt[:1] in ("|", "!"):  # a table, not a literal "{|" in a sentence
                out.append(line[:m.start()])
                line = line[m.start():].lstrip()
                if dropped is not None:
                    dropped["table_mid_line"] = dropped.get("table_mid_line", 0) + 1
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


def strip_refs(wikitext: str) -> tuple[str, int]:
    """(the wikitext without its <ref>s, how many there were)."""
    return _REF.subn("", wikitext)


def _split_at_stop(wikitext: str, dropped: dict | None = None) -> tuple[str, str]:
    stop = _STOP_HEADING.search(wikitext)
    head, tail = (wikitext[:stop.start()], wikitext[stop.start():]) if stop else (wikitext, "")
    return drop_tables(strip_refs(head)[0], dropped), tail


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


def _without_markup_paragraphs(text: str, dropped: dict) -> tuple[str, str]:
    """(the text without the paragraphs where a template or table opens and never closes, and without stray
    closers ("}}", "|}" with nothing open: removed alone, the paragraph kept); the first paragraph dropped)."""
    kept, first = [], ""
    for block in text.split("\n\n"):
        prose = MATH_SPAN.sub("", block)
        if "{{" in prose or "{|" in prose:
            dropped["markup_paragraph"] = dropped.get("markup_paragraph", 0) + 1
            first = first or block
            continue
        if _residue(block):
            parts = re.split(r"(\$[^$\n]*\$)", block)  # a formula's braces are TeX: left alone
            closers = sum(part.count("}}") + part.count("|}") for part in parts[::2])
            dropped["stray_closer"] = dropped.get("stray_closer", 0) + closers
            parts[::2] = [repair_punctuation(" ".join(part.replace("}}", " ").replace("|}", " ").split()))
                          for part in parts[::2]]
            block = "".join(parts).strip()
        if block:
            kept.append(block)
    return "\n\n".join(kept), first


def render(wikitext: str, skip_templates: set[str] = frozenset()) -> tuple[str, str | None, str, dict]:
    """(text, None, "", dropped) for a usable article, else ("", reason, detail, dropped): `skip_template` (a
    disambiguation page and the like), `wikitext_unparsable`, `wikitext_residue` (markup in every paragraph),
    `empty_text`. `dropped` counts what was removed that MediaWiki would not show (the module docstring)."""
    dropped: dict[str, int] = {}
    head, tail = _split_at_stop(wikitext, dropped)
    try:
        code = mwparserfromhell.parse(head)
        hit = _skip_template(code, tail, skip_templates) if skip_templates else None
        if hit:
            return "", "skip_template", hit, dropped
        text = _code_text(code)
    except Exception as exc:  # noqa: BLE001 - a parser failure is this page's problem, not the job's
        return "", "wikitext_unparsable", f"{type(exc).__name__}: {exc}"[:300], dropped
    if _residue(text):  # the parser's bold/italic state can swallow a template ('' unbalanced across it): parse again
        # without style tags, whose markers are then plain "''" runs, removed (in wikitext they are never text)
        try:
            retry = re.sub(r"'{2,}", "", _code_text(mwparserfromhell.parse(head, skip_style_tags=True)))
        except Exception:  # noqa: BLE001 - the first parse's answer stands
            retry = ""
        if retry and not _residue(retry):
            text = retry
    first = ""
    if _residue(text):
        text, first = _without_markup_paragraphs(text, dropped)
    if not text and first:
        residue = _residue(first)
        at = MATH_SPAN.sub("", first).index(residue)
        prose = MATH_SPAN.sub("", first)
        return "", "wikitext_residue", f"{residue!r} left in every paragraph: ...{prose[max(0, at - 40):at + 40]}...", \
            dropped
    if not text:
        return "", "empty_text", f"{len(wikitext)} characters of wikitext, no prose", dropped
    return text, None, "", dropped


def text_or_reason(wikitext: str, skip_templates: set[str] = frozenset()) -> tuple[str, str | None, str]:
    """`render` without what it dropped: (text, None, "") or ("", reason, detail)."""
    return render(wikitext, skip_templates)[:3]
