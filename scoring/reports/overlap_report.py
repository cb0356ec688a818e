"""`tidemark overlap`'s report content: the headline, report.md, report.html's `Page` and shares.png's bytes, from
the dict that report.json holds (jobs/commands/overlap.py writes them)."""
from __future__ import annotations

from pathlib import Path

from scoring.reports.figures import png_bytes, pyplot
from scoring.reports.html import Code, Figure, Page, Section, Table, left_out, num, pct, pct_interval


def _rule(r: dict) -> str:
    s = r["settings"]
    return (f"at least one {s['n']}-gram in the corpus" if not s["threshold"]
            else f"more than {s['threshold']:.0%} of its {s['n']}-grams in the corpus")


def headline(r: dict) -> str:
    o = r["contamination"]["overall"]
    if not o["checked"]:
        return f"No benchmark row is long enough to check ({r['settings']['n']} words or more)."
    return (f"{o['contaminated']:,} of {o['checked']:,} benchmark rows ({pct(o['share'])}, 95% CI "
            f"{pct_interval(o['ci95'])}) have {_rule(r)}.")


def _read(c: dict, n: int) -> str:
    if c.get("corpus_ngrams") is None:
        return f"{c.get('corpus_tokens') or 0:,} words indexed"
    return f"{c['corpus_ngrams']:,} {n}-grams scanned"


def plot_shares(r: dict) -> bytes:
    """shares.png: how many rows have each share of their n-grams in the corpus."""
    plt = pyplot()
    h = r["contamination"]["histogram"]
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    ax.bar(range(len(h["rows"])), h["rows"], color="#4477aa")
    ax.set_xticks(range(len(h["bins"])), h["bins"], rotation=35, ha="right", fontsize=8)
    ax.set_xlabel(f"share of a row's {r['settings']['n']}-grams found in the corpus")
    ax.set_ylabel("benchmark rows")
    ax.set_title("Benchmark rows by verbatim overlap with the corpus")
    fig.tight_layout()
    return png_bytes(fig)


def _group_rows(by: dict) -> list[list]:
    return [[key, value, g["checked"], g["contaminated"], f"{pct(g['share'])} ({pct_interval(g['ci95'])})"]
            for key, values in by.items() for value, g in values.items()]


def report_markdown(r: dict) -> str:
    c, o, s = r["counts"], r["contamination"]["overall"], r["settings"]
    lines = ["# Tidemark overlap", "", f"**{headline(r)}**", "",
             f"- benchmark `{r['inputs']['benchmark']}`: {c['rows_in']} rows in, {c['rows_scored']} checked, "
             f"{c['rows_quarantined']} quarantined (`benchmark_quarantine.parquet`); "
             f"{r['contamination']['rows_too_short']} shorter than {s['n']} words (no n-gram to check)",
             f"- corpus `{r['inputs']['corpus']}`{' (its index)' if r['inputs'].get('mode') == 'index' else ''}: "
             f"{c['corpus_files']} file(s), {c['corpus_bytes']:,} bytes, {c['corpus_documents']:,} documents, "
             f"{c['corpus_quarantined']:,} records quarantined, {_read(c, s['n'])}",
             f"- rule: lowercased `\\w+` words, n = {s['n']}; a row is contaminated when it has {_rule(r)}; "
             f"mean share over checked rows {num(r['contamination']['mean_share'])}", ""]
    by = r["contamination"]["by"]
    if by:
        lines += ["| by | value | rows checked | contaminated | share (95% CI) |", "|---|---|---|---|---|"]
        lines += [f"| {a} | {b} | {n} | {k} | {t} |" for a, b, n, k, t in _group_rows(by)] + [""]
    if r["contamination"]["top"]:
        lines += ["## Most contaminated rows", "", "| id | share | longest match (words) | corpus documents | "
                  "snippet |", "|---|---|---|---|---|"]
        for t in r["contamination"]["top"]:
            lines.append(f"| {t['id']} | {t['share']:.3f} | {t['longest_match_words']} | "
                         f"{', '.join(t['sources'][:3])} | {t['snippet'][:120]} |")
        lines.append("")
    lines += ["Per row: `rows.parquet` (join on `id` with an evaluation's per-row results to report accuracy on "
              "clean and contaminated rows). Plot: `shares.png`.", ""]
    if o["checked"] == 0:
        lines.append("No row could be checked.")
    return "\n".join(lines)


def report_page(r: dict, out: Path) -> Page:
    c, s = r["counts"], r["settings"]
    summary = (f"Word {s['n']}-grams of each row (lowercased `\\w+` words) looked up in every document of the "
               "corpus, the decontamination check of GPT-3 and lm-evaluation-harness. A verbatim match shows the text "
               "is in the corpus; no match does not show a paraphrase or translation is not.")
    sections = [Section("Shares of each row's n-grams found in the corpus", [
        Figure(out / "shares.png", "Benchmark rows by the share of their n-grams found in the corpus"),
        Table(["share", "rows"], list(zip(r["contamination"]["histogram"]["bins"],
                                          r["contamination"]["histogram"]["rows"])))])]
    if r["contamination"]["by"]:
        sections.append(Section("By bucket, label and split", [
            Table(["by", "value", "rows checked", "contaminated", "share (95% CI)"],
                  _group_rows(r["contamination"]["by"]))]))
    if r["contamination"]["top"]:
        sections.append(Section("Most contaminated rows, with their evidence", [
            Table(["id", "share", "longest match (words)", "occurrences", "corpus documents", "matched text"],
                  [[Code(t["id"]), num(t["share"]), t["longest_match_words"], t["corpus_occurrences"],
                    ", ".join(t["sources"][:5]), t["snippet"]] for t in r["contamination"]["top"]])]))
    warnings = read_warnings(c, c, "quarantine.parquet/")
    facts = [("benchmark", Code(r["inputs"]["benchmark"])), ("corpus", Code(r["inputs"]["corpus"])),
             ("rows", f"{c['rows_in']:,} in, {c['rows_scored']:,} checked, {c['rows_quarantined']:,} quarantined, "
                      f"{r['contamination']['rows_too_short']:,} too short to check"),
             ("corpus read", f"{c['corpus_files']:,} files, {c['corpus_bytes']:,} bytes, "
                             f"{c['corpus_documents']:,} documents, {_read(c, r['settings']['n'])}")]
    files = [("rows.parquet", "one row per benchmark row: share, longest match, corpus documents, snippet"),
             ("report.json", "the numbers on this page"), ("report.md", "this report as Markdown"),
             ("matches.parquet", "per corpus part: the benchmark n-grams found and where"),
             ("quarantine.parquet", "corpus records that could not be read")]
    return Page(kind="corpus overlap", headline=headline(r), summary=summary, facts=facts, sections=sections,
                warnings=warnings, files=files)


def read_warnings(counts: dict, corpus: dict, corpus_where: str) -> list[str]:
    """What a reader must know before any share: the benchmark rows (`counts`) and the corpus records (`corpus`:
    the verbatim scan's counts or the semantic pass's) that could not be read, and where they are listed."""
    out = []
    if counts["rows_quarantined"]:
        out.append(left_out(counts["rows_quarantined"], counts["rows_in"], "benchmark rows", "could not be read",
                            where="benchmark_quarantine.parquet"))
    if corpus["corpus_quarantined"]:
        out.append(f"{corpus['corpus_quarantined']:,} corpus records could not be read and were not searched "
                   f"({', '.join(f'{k}: {v:,}' for k, v in sorted(corpus['corpus_reasons'].items()))}; "
                   f"{corpus_where}).")
    return out
