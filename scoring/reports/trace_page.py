"""`tidemark trace`'s report: the summary in sentences, each text with its traced spans highlighted and the documents
beside it (their snippets with the match highlighted), report.md, and a figure of the longest span per text. Every
passage is untrusted (model output, corpus text): it goes into the page as `Marked` text, which scoring/reports/
html.py escapes."""
from __future__ import annotations

from pathlib import Path

from scoring.reports.html import Code, Figure, Marked, Page, Section, Table, num, output_files, pct

TEXTS_SHOWN = 50  # texts with a span shown in the page, longest span first (every one is in spans.parquet)
DOCS_SHOWN = 5  # documents shown per text, most relevant first

FILES = (("spans.parquet", "one row per kept span: the text's id, its words [start, end), the span, its corpus count, "
                           "rarity and rank, the first documents' ids, offsets and files"),
         ("documents.parquet", "one row per text, document and span occurrence: the document's id, file, word offset, "
                               "BM25 relevance and rank, and the snippet around the match"),
         ("report.json", "the counts, the shares of texts with a span of at least N words, the longest spans, the "
                         "documents cited most, the index and the settings"),
         ("report.md", "this summary as Markdown"),
         ("quarantine.parquet", "the texts that could not be traced, with the reason"),
         ("longest.png", "each text's longest traced span"),
         ("run.json", "the configuration, counts, timings and the command line"))

NOT_SHOWN = (
    "A traced span occurs verbatim in the corpus; that is not proof the model copied it from there. Common phrases, "
    "quotations, boilerplate and text the model produced independently all occur too: read the rarity and the "
    "length, and compare with a model that did not train on the corpus.",
    "The documents are the span's first occurrences in corpus order (at most --docs-per-span per span), not every "
    "one: `count` says how many there are.",
    "Words are lowercased \\w+ words: case, punctuation and spacing are ignored, so a span may differ from the "
    "document in those.",
    "BM25 ranks a document by the passages shown of it, not by its whole text.",
    "A span shorter than --min-words is not shown even where it is rare.")


def headline(report: dict) -> str:
    c, s = report["counts"], report["summary"]
    n = c["traced"]
    if not n:
        return "No text could be traced."
    w = report["settings"]["min_words"]
    k = s["texts_with_span"]
    docs = s["documents_cited_most"]
    tail = f"; the document cited by most texts is {docs[0]['doc_id']} ({docs[0]['texts']:,})" if docs else ""
    return (f"{k:,} of {n:,} texts ({pct(k / n)}) contain a span of at least {w} words that occurs verbatim in the "
            f"corpus, {s['spans']:,} such spans in all{tail}.")


def share_rows(report: dict) -> list[list]:
    return [[f"≥ {r['words']} words", f"{r['texts']:,}", pct(r["share"])] for r in report["summary"]["share_with_span"]]


def report_markdown(report: dict) -> str:
    c = report["counts"]
    lines = ["# Tidemark trace", "", headline(report), "",
             f"Texts: {c['rows_in']:,} in, {c['traced']:,} traced, {c['quarantined']:,} quarantined "
             f"{c['reasons'] or ''}".rstrip(), "",
             "| texts with a span of | texts | share |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {d} |" for a, b, d in share_rows(report)]
    lines += ["", "Longest spans:", "", "| text | words | count | rarity | span |", "|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['words']} | {r['count']:,} | {num(r['rarity'], 1)} | "
              f"{_md(r['span'])} |" for r in report["summary"]["longest_spans"]]
    lines += ["", "Documents cited by most texts:", ""]
    lines += [f"- {d['doc_id']}: {d['texts']:,} texts" for d in report["summary"]["documents_cited_most"]]
    return "\n".join(lines) + "\n"


def _md(text: str, width: int = 120) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[:width - 1] + "…"


def char_spans(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Word spans [start, end) as character spans of `text` (words as the trace counts them); none where
    lowercasing changes the words (no reliable highlight)."""
    from scoring.overlap.ngrams import word_spans

    found = word_spans(text) or []
    return [(found[s][0], found[e - 1][1]) for s, e in spans if s < e <= len(found)]


def _text_section(row: dict, spans: list[dict], docs: list[dict]) -> Section:
    from scoring.trace.spans import merged

    words = merged([(s["start"], s["end"]) for s in spans])
    blocks: list = [Table(["text", "spans"], [[Marked(row["text"], char_spans(row["text"], words)),
                                               "\n".join(f"{s['words']} words ×{s['count']:,}" for s in
                                                         sorted(spans, key=lambda s: s["rank"])[:8])]])]
    seen, shown = set(), []
    for d in docs:
        if d["doc_id"] in seen or len(seen) >= DOCS_SHOWN:
            continue
        seen.add(d["doc_id"])
        snip = d["snippet"]
        cell = Marked(snip, [(d["match_start"], d["match_end"])]) if snip else "(the index holds no text)"
        shown.append([d["doc_rank"], Code(d["doc_id"]), Code(d["file"] or "–"), num(d["bm25"], 2), cell])
    if shown:
        blocks.append(Table(["rank", "document", "file", "BM25", "passage"], shown,
                            "The documents holding the text's spans, most relevant to the whole text first."))
    return Section(f"{row['id']}", blocks)


def report_page(report: dict, rows: list[dict], spans, docs, out_dir) -> Page:
    c = report["counts"]
    by_text: dict[str, list[dict]] = {}
    for s in spans.to_pylist():
        by_text.setdefault(s["id"], []).append(s)
    docs_by: dict[str, list[dict]] = {}
    for d in docs.to_pylist():
        docs_by.setdefault(d["id"], []).append(d)
    traced = sorted((r for r in rows if r["id"] in by_text),
                    key=lambda r: -max(s["words"] for s in by_text[r["id"]]))
    sections = [Section("How many texts reproduce the corpus", [
        Table(["texts with a span of", "texts", "share"], share_rows(report)),
        Figure(Path(out_dir) / "longest.png", "Each text's longest span found verbatim in the corpus.")])]
    sections += [_text_section(r, by_text[r["id"]], docs_by.get(r["id"], [])) for r in traced[:TEXTS_SHOWN]]
    cited = report["summary"]["documents_cited_most"]
    if cited:
        sections.append(Section("Documents cited by most texts", [Table(
            ["document", "texts"], [[Code(d["doc_id"]), f"{d['texts']:,}"] for d in cited])]))
    sections.append(Section("What this does not show", list(NOT_SHOWN)))
    idx = report["index"]
    facts = [("index", Code(idx["path"])), ("corpus documents", f"{idx['documents'] or 0:,}"),
             ("texts", f"{c['rows_in']:,} in, {c['traced']:,} traced, {c['quarantined']:,} quarantined"),
             ("minimum span", f"{report['settings']['min_words']} words"),
             ("time", f"{report['seconds']} s ({report['seconds_per_text']} s a text)")]
    more = f" Showing the {TEXTS_SHOWN} texts with the longest spans; every span is in spans.parquet." \
        if report["summary"]["texts_with_span"] > TEXTS_SHOWN else ""
    warnings = [] if idx.get("text_store") else [
        "This index was built without the documents' text: spans, counts and document ids are shown, passages are "
        "not (rebuild it with this version of `tidemark index-corpus`)."]
    return Page(kind="trace", headline=headline(report), summary=more.strip(), facts=facts, sections=sections,
                warnings=warnings, files=output_files(Path(out_dir), FILES))


def plot_longest(report: dict, longest: list[int]) -> bytes:
    """A histogram of each text's longest traced span (0: none of at least --min-words)."""
    from scoring.reports.figures import png_bytes, pyplot

    fig, ax = pyplot().subplots(figsize=(7, 3.4))
    vals = list(longest) or [0]
    ax.hist(vals, bins=min(40, max(5, len(set(vals)))), color="#3b6ea5")
    ax.axvline(report["settings"]["min_words"], color="#999", ls="--", lw=1, label="--min-words")
    ax.set_xlabel("longest span found in the corpus (words; 0: none kept)")
    ax.set_ylabel("texts")
    ax.legend(frameon=False)
    fig.tight_layout()
    return png_bytes(fig)
