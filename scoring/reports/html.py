"""report.html: one self-contained page per decision a job makes, for a reader who is not an engineer (an auditor
handing it to a lawyer). Jobs only supply content as a `Page` (a headline sentence, key facts, sections of
paragraphs, tables and plots, warnings, the files written); `render` turns it into one HTML string. Nothing on
the page is fetched: plots are embedded as data: URIs, the CSS is inline and uses the system's fonts, there is
no script, so the file opens offline, in a mail attachment or an evidence bundle, years later, and prints.

Every string is HTML-escaped here; jobs pass plain text, `Code` for identifiers, and numbers (formatted here).
"""
from __future__ import annotations

import base64
import html
import math
import numbers
import os
import platform
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence, Union

import numpy as np

DASH = "–"  # what a missing or undefined number shows


@dataclass(frozen=True)
class Code:
    """Text shown in a monospace font: a path, a model name, a detector column."""

    text: str


@dataclass(frozen=True)
class Row:
    """A table row with a style: "best" (bold, the row the headline is about) or "muted" (a baseline)."""

    cells: Sequence
    style: str = ""


@dataclass(frozen=True)
class Marked:
    """Untrusted text shown as written (escaped, line breaks kept) with character spans highlighted: a sampled
    continuation with the runs it shares with the true one."""

    text: str
    spans: Sequence[tuple[int, int]] = ()


Cell = Union[str, int, float, None, Code, Marked]


@dataclass(frozen=True)
class Table:
    header: Sequence[str]
    rows: Sequence[Union[Row, Sequence[Cell]]]
    caption: str = ""


@dataclass(frozen=True)
class Figure:
    """A PNG the job already wrote; a missing file is named in the page rather than failing the job."""

    path: Path
    caption: str


Block = Union[str, Table, Figure]


@dataclass(frozen=True)
class Section:
    title: str
    blocks: Sequence[Block] = ()


@dataclass(frozen=True)
class Page:
    kind: str  # what ran, e.g. "corpus audit": the page's title is "Tidemark <kind>"
    headline: str  # the decision and its uncertainty, in one plain sentence
    summary: str = ""  # a few sentences more under the headline: what qualifies it
    facts: Sequence[tuple[str, Cell]] = ()  # what was examined, with what: shown right under the headline
    sections: Sequence[Section] = ()
    warnings: Sequence[str] = ()  # shown before any number, because they change how every number reads
    files: Sequence[tuple[str, str]] = ()  # (name, what it holds) for the files beside this report
    command: str = ""  # the exact command line, credentials already redacted
    versions: Mapping[str, str] = field(default_factory=dict)
    created: str = ""  # ISO date and time, UTC


# ---------------------------------------------------------------------------------------------- number formats

def num(x, digits: int = 3) -> str:
    """A float with `digits` decimals, an int with thousands separators; None/NaN/inf as a dash."""
    if x is None:
        return DASH
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}"
    x = float(x)
    return f"{x:.{digits}f}" if math.isfinite(x) else DASH


def pct(x, digits: int = 1) -> str:
    """A proportion (0..1) as a percentage."""
    return DASH if x is None or not math.isfinite(float(x)) else f"{100 * float(x):.{digits}f}%"


def pct_interval(ci: Sequence | None, digits: int = 1) -> str:
    """"[39.0%, 82.0%]": an interval of proportions."""
    lo, hi = (list(ci or []) + [None, None])[:2]
    return f"[{pct(lo, digits)}, {pct(hi, digits)}]"


def pct_ci(x, ci: Sequence | None, digits: int = 1) -> str:
    """"60.0% [39.0%, 82.0%]": a proportion with its 95% interval."""
    return f"{pct(x, digits)} {pct_interval(ci, digits)}"


def left_out(n: int, total: int, what: str, how: str = "could not be used", then: str = "are left out",
             where: str | None = "quarantine.parquet") -> str:
    """The warning every page gives when inputs were quarantined: how many of how many, what that means for the
    numbers, and where each one's reason is."""
    return f"{n:,} of {total:,} {what} {how} and {then}" + (f" ({where} gives each one's reason)." if where else ".")


def num_ci(x, ci: Sequence | None, digits: int = 3) -> str:
    lo, hi = (list(ci or []) + [None, None])[:2]
    return f"{num(x, digits)} [{num(lo, 2)}, {num(hi, 2)}]"


# ---------------------------------------------------------------------------------------------- provenance

VERSIONED = ("tidemark", "torch", "transformers", "ray", "pyarrow", "numpy", "scikit-learn")


def environment() -> dict:
    """Versions of what produced the numbers, and when (read from package metadata: nothing is imported)."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = "not installed"
    return {"versions": versions, "created": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


# ---------------------------------------------------------------------------------------------- rendering

_NUMERIC = re.compile(r"^[+\-−]?(\d[\d,]*(\.\d+)?|\.\d+)(%| ±.*| \[.*\])?$")  # right-aligned cells


def _esc(text, clean: Callable[[str], str]) -> str:
    return html.escape(clean(str(text)), quote=True)


def _marked(m: Marked, clean) -> str:
    out, at = [], 0
    for a, b in sorted(m.spans):
        a, b = max(a, at), max(b, at)
        out.append(_esc(m.text[at:a], clean) + (f"<mark>{_esc(m.text[a:b], clean)}</mark>" if b > a else ""))
        at = b
    return "".join(out) + _esc(m.text[at:], clean)


def _cell(value: Cell, clean, tag: str = "td", align: bool = True) -> str:
    if isinstance(value, Code):
        return f"<{tag}><code>{_esc(value.text, clean)}</code></{tag}>"
    if isinstance(value, Marked):
        return f"<{tag} class=text>{_marked(value, clean)}</{tag}>"
    text = value if isinstance(value, str) else num(value)
    numeric = align and (not isinstance(value, str) or bool(_NUMERIC.match(value.strip())))
    return f'<{tag}{" class=num" if numeric else ""}>{_esc(text, clean)}</{tag}>'


def _table(t: Table, clean) -> str:
    out = ["<div class=table-wrap><table>"]
    if t.caption:
        out.append(f"<caption>{_esc(t.caption, clean)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th scope=col>{_esc(h, clean)}</th>" for h in t.header) + "</tr></thead>")
    out.append("<tbody>")
    for row in t.rows:
        cells, style = (row.cells, row.style) if isinstance(row, Row) else (row, "")
        first, *rest = list(cells) or [""]
        head = _cell(first, clean, "th", align=False).replace("<th", "<th scope=row", 1)  # a label, even "32"
        out.append(f'<tr{f" class={style}" if style else ""}>{head}{"".join(_cell(c, clean) for c in rest)}</tr>')
    out.append("</tbody></table></div>")
    return "\n".join(out)


def _figure(f: Figure, clean) -> str:
    path = Path(f.path)
    if not path.is_file():
        return f"<p class=missing>Plot {_esc(path.name, clean)} was not written ({_esc(f.caption, clean)}).</p>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    cap = _esc(f.caption, clean)
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{cap}">'
            f"<figcaption>{cap} <span class=file>({_esc(path.name, clean)})</span></figcaption></figure>")


def _blocks(blocks: Sequence[Block], clean) -> str:
    """Each block in order; consecutive figures share a grid, side by side where the page is wide enough."""
    out: list[str] = []
    figures: list[str] = []
    for b in [*blocks, None]:
        if isinstance(b, Figure):
            figures.append(_figure(b, clean))
            continue
        if figures:
            out.append("<div class=figures>" + "".join(figures) + "</div>")
            figures = []
        if isinstance(b, Table):
            out.append(_table(b, clean))
        elif b is not None:
            out.append(f"<p>{_esc(b, clean)}</p>")
    return "\n".join(out)


def _facts(facts, clean) -> str:
    items = "".join(f"<dt>{_esc(k, clean)}</dt><dd>{_cell(v, clean, 'span')}</dd>" for k, v in facts)
    return f"<dl class=facts>{items}</dl>" if items else ""


def _provenance(page: Page, clean) -> str:
    parts = ["<section class=provenance><h2>How this report was produced</h2>"]
    if page.command:
        parts.append(f"<p>Command:</p><pre>{_esc(page.command, clean)}</pre>")
    if page.created:
        parts.append(f"<p>Created {_esc(page.created, clean)}.</p>")
    if page.versions:
        parts.append(_table(Table(["software", "version"], [[k, Code(v)] for k, v in page.versions.items()]), clean))
    if page.files:
        parts.append("<p>Files beside this report (the full data behind every number here):</p>")
        parts.append(_table(Table(["file", "what it holds"], [[Code(n), d] for n, d in page.files]), clean))
    parts.append("</section>")
    return "\n".join(parts)


def render(page: Page, clean: Callable[[str], str] = lambda s: s) -> str:
    """The page as one HTML document. `clean` is applied to every string before escaping (the jobs pass their
    credential redaction); images are embedded, so the result depends on the plot files at call time."""
    title = f"Tidemark {page.kind}"
    summary = f"<p class=summary>{_esc(page.summary, clean)}</p>" if page.summary else ""
    body = [f"<header><p class=kind>{_esc(title, clean)}</p><h1 class=headline>{_esc(page.headline, clean)}</h1>"
            f"{summary}</header>"]
    if page.warnings:
        body.append("<aside class=warnings role=note><h2>Read this first</h2><ul>"
                    + "".join(f"<li>{_esc(w, clean)}</li>" for w in page.warnings) + "</ul></aside>")
    body.append(_facts(page.facts, clean))
    for s in page.sections:
        body.append(f"<section><h2>{_esc(s.title, clean)}</h2>{_blocks(s.blocks, clean)}</section>")
    body.append(_provenance(page, clean))
    return ("<!DOCTYPE html>\n<html lang=en>\n<head>\n<meta charset=utf-8>\n"
            '<meta name=viewport content="width=device-width, initial-scale=1">\n'
            f"<title>{_esc(title + ': ' + page.headline, clean)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def stamped(page: Page) -> Page:
    """The page with the versions and date filled in where the job left them out (jobs/kit/report_out.write_page
    writes it as OUT/report.html)."""
    env = environment()
    return replace(page, versions=page.versions or env["versions"], created=page.created or env["created"])


def output_files(out_dir: Path, described: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (name, description) pairs whose file or directory exists in `out_dir`: a page lists what is there."""
    return [(n, d) for n, d in described if os.path.exists(Path(out_dir) / n)]


# System fonts only (no web font is fetched); print rules keep tables and plots whole on paper.
CSS = """
:root { color-scheme: light; --ink: #1b1f24; --muted: #57606a; --rule: #d0d7de; --accent: #0b5cad; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--ink); background: #fff; line-height: 1.5; max-width: 62rem; margin: 0 auto; padding: 2rem 1.5rem 4rem;
  font-size: 16px; }
header { border-bottom: 3px solid var(--accent); padding-bottom: 1rem; margin-bottom: 1.25rem; }
.kind { text-transform: uppercase; letter-spacing: .08em; font-size: .8rem; color: var(--muted); margin: 0 0 .4rem; }
h1.headline { font-size: 1.5rem; line-height: 1.3; margin: 0; font-weight: 650; }
.summary { font-size: 1.05rem; margin: .6rem 0 0; }
h2 { font-size: 1.2rem; margin: 2rem 0 .6rem; border-bottom: 1px solid var(--rule); padding-bottom: .2rem; }
.warnings { background: #fff8e1; border: 1px solid #e0b400; border-left: 6px solid #e0b400; border-radius: 4px;
  padding: .2rem 1rem .4rem; margin: 1rem 0; }
.warnings h2 { border: 0; margin: .6rem 0 .2rem; font-size: 1rem; }
.warnings ul { margin: .2rem 0; padding-left: 1.2rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1.2rem; margin: 1rem 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.table-wrap { overflow-x: auto; margin: .8rem 0 1.2rem; }
table { border-collapse: collapse; font-size: .9rem; min-width: 50%; }
caption { caption-side: top; text-align: left; color: var(--muted); padding-bottom: .3rem; }
th, td { border-bottom: 1px solid var(--rule); padding: .3rem .6rem; text-align: left; vertical-align: top; }
thead th { border-bottom: 2px solid var(--ink); vertical-align: bottom; }
tbody th { font-weight: normal; overflow-wrap: anywhere; min-width: 7rem; max-width: 22rem; }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tr.best th, tr.best td { font-weight: 650; background: #eef5ff; }
tr.muted th, tr.muted td { color: var(--muted); font-style: italic; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "Liberation Mono", monospace;
  font-size: .85em; }
pre { background: #f6f8fa; border: 1px solid var(--rule); padding: .6rem .8rem; white-space: pre-wrap;
  overflow-wrap: anywhere; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(24rem, 1fr)); gap: 1rem; }
figure { margin: 1rem 0 1.5rem; }
.figures figure { margin: .5rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--rule); }
figcaption, .file, .missing { color: var(--muted); font-size: .9rem; }
td.text { white-space: pre-wrap; overflow-wrap: anywhere; min-width: 14rem; }
mark { background: #ffe08a; color: inherit; }
.provenance { color: var(--muted); }
@media print {
  body { max-width: none; padding: 0; font-size: 11pt; }
  h2 { break-after: avoid; }
  figure, tr, .warnings { break-inside: avoid; }
  .table-wrap { overflow: visible; }
}
"""
