"""`tidemark overlap --semantic`'s report content: the rephrased items' headline, their report.md section, the
report.html section (every flagged item beside its corpus passage with the words they share marked, all escaped by
the renderer) and semantic.png's bytes, from report.json's `semantic` block. Kept apart from overlap_report.py,
which stays the verbatim scan's; `with_semantic` joins the two (or makes the page alone, with --n 0)."""
from __future__ import annotations

import difflib
import html
import re
from dataclasses import replace
from pathlib import Path

from scoring.reports.figures import png_bytes, pyplot
from scoring.reports.html import Code, Figure, Marked, Page, Section, Table, num, pct, pct_interval
from scoring.reports.overlap_report import read_warnings

WORD = re.compile(r"\w+")
MIN_RUN = 2  # a run of shared words this long is marked whatever its words; a lone word only if it is an anchor


def headline(s: dict) -> str:
    return (f"{s['flagged']:,} of {s['n']:,} benchmark items ({pct(s['share'])}, 95% CI "
            f"{pct_interval(s['share_ci'])}) have a rephrase in the corpus.")


def threshold_sentence(s: dict) -> str:
    if s["expected_false_flag_rate"] is None:
        return (f"Threshold {num(s['threshold'], 2)} on the decision score: {s['threshold_reason']}.")
    if s.get("threshold_source") == "default":
        return (f"Threshold {num(s['threshold'], 3)} on the decision score, the default ({s['threshold_reason']}): "
                f"an expected false-flag rate of {pct(s['expected_false_flag_rate'])} (at most "
                f"{pct(s['false_flag_upper_bound'])}, one-sided 95% Clopper-Pearson) on items like the study's.")
    n = s["null"]
    return (f"Threshold {num(s['threshold'], 3)} on the decision score, set on {n['n']:,} null items (items that "
            f"cannot be in the corpus): it flags {n['flagged']:,} of them, an expected false-flag rate of "
            f"{pct(s['expected_false_flag_rate'])} (at most {pct(s['false_flag_upper_bound'])}, one-sided 95% "
            "Clopper-Pearson).")


def rule_sentence(s: dict) -> str:
    v, w = s["verifier"], s["window"]
    return (f"Each item's {s['top_k']} nearest corpus windows ({w['size']} words, every {w['stride']}: {w['how']}) "
            f"by cosine under {s['embedder']['name']} are checked for its anchors (numbers, code, names, rare "
            f"words); a window below cosine {v['cosine_floor']} scores 0, an item with too few anchors to check "
            f"scores only when its window's cosine exceeds {v['abstain_cosine']}. A flag means the same problem in "
            f"other words, not a copy. {judge_sentence(s.get('judge'))}")


def judge_sentence(j: dict | None) -> str:
    if not j:
        return "No LLM judge was asked (--judge-model)."
    b = j["benchmark"]
    budget = f", {j['unjudged_by_budget']:,} left to the verifier by --judge-budget {j['budget']}" if \
        j["unjudged_by_budget"] else ""
    failed = f", {j['failed']:,} requests failed (the verifier decides those)" if j["failed"] else ""
    null = j["null"]
    rate = (f" With the judge, the null has {null['flagged']:,} of its {null['n']:,} items flagged "
            f"({pct(null['false_flag_rate'])}, at most {pct(null['false_flag_upper_bound'])}, one-sided 95%).") \
        if null else ""
    return (f"Then the LLM judge {j['model']} was asked whether each decided passage holds the item (items the "
            f"verifier flags, near misses from a decision score of {num(j['lower_bar'], 2)}, and items too short to "
            f"check): {j['judged']:,} pairs judged ({j['calls']:,} calls, {j['cached']:,} answers reused{budget}"
            f"{failed}); its verdict decides. On the benchmark it kept {b['flagged'] - b['rescued']:,} of the "
            f"verifier's {b['verifier_flagged']:,} flags and added {b['rescued']:,}.{rate}")


def anchor_words(item: str) -> set[str]:
    from scoring.semantic.anchors import KINDS, anchors

    a = anchors(item)
    return {x.lower() for kind in KINDS for x in a.of(kind)}


def shared_spans(item: str, passage: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Character spans of the words an item and a passage share, in each: runs of MIN_RUN or more words in the
    same order (difflib over lowercased `\\w+` words), and single words that are the item's anchors."""
    a, b = list(WORD.finditer(item)), list(WORD.finditer(passage))
    aw, bw = [m.group().lower() for m in a], [m.group().lower() for m in b]
    keep_a, keep_b = set(), set()
    for blk in difflib.SequenceMatcher(None, aw, bw, autojunk=False).get_matching_blocks():
        if blk.size >= MIN_RUN:
            keep_a.update(range(blk.a, blk.a + blk.size))
            keep_b.update(range(blk.b, blk.b + blk.size))
    anchors = anchor_words(item) & set(aw) & set(bw)
    keep_a.update(i for i, w in enumerate(aw) if w in anchors)
    keep_b.update(i for i, w in enumerate(bw) if w in anchors)
    return joined(a, keep_a), joined(b, keep_b)


def joined(matches: list, keep: set[int]) -> list[tuple[int, int]]:
    """The kept words' spans, consecutive kept words joined into one (with what lies between them)."""
    spans: list[tuple[int, int]] = []
    for i in sorted(keep):
        if spans and i - 1 in keep:
            spans[-1] = (spans[-1][0], matches[i].end())
        else:
            spans.append(matches[i].span())
    return spans


def plot_semantic(s: dict) -> bytes:
    """semantic.png: flagged and unflagged items by their nearest window's cosine and by their decision score."""
    plt = pyplot()
    bins = s["histogram"]["bins"]
    edges = [i / bins for i in range(bins)]
    fig, axes = plt.subplots(1, 2, figsize=(8.8, 3.2))
    for ax, key, label in ((axes[0], "cosine", "nearest window's cosine"), (axes[1], "decision", "decision score")):
        h = s["histogram"][key]
        ax.bar(edges, h["unflagged"], width=1 / bins, align="edge", color="#bbbbbb", label="not flagged")
        ax.bar(edges, h["flagged"], width=1 / bins, align="edge", bottom=h["unflagged"], color="#cc3311",
               label="flagged")
        ax.set_xlim(0, 1)
        ax.set_xlabel(label)
        ax.set_ylabel("benchmark items")
    axes[1].axvline(s["threshold"], color="#222222", linestyle="--", linewidth=1, label="threshold")
    axes[1].legend(fontsize=8)
    fig.suptitle("Benchmark items by their nearest corpus window")
    fig.tight_layout()
    return png_bytes(fig)


def markdown(r: dict) -> str:
    s = r["semantic"]
    c = s["counts"]
    lines = ["## Rephrased items (`--semantic`)", "", f"**{headline(s)}**", "", f"- {threshold_sentence(s)}",
             f"- {rule_sentence(s)}",
             f"- corpus: {c['corpus_files']} file(s), {c['corpus_documents']:,} documents, "
             f"{c['corpus_quarantined']:,} records quarantined, {c['windows']:,} windows embedded; embedder "
             f"`{s['embedder']['path']}` (weights {s['embedder']['weights_digest'][:12]})", ""]
    judged = bool(s.get("judge"))
    if s["flagged_items"]:
        lines += [f"| id | decision | cosine |{' judge |' if judged else ''} corpus document | passage |",
                  f"|---|---|---|{'---|' if judged else ''}---|---|"]
        for t in s["flagged_items"]:
            # escaped: a Markdown viewer renders raw HTML, and a corpus passage is untrusted text
            passage = html.escape(" ".join(t["passage"].split())[:160]).replace("|", "\\|")
            lines.append(f"| {t['id']} | {t['decision_score']:.3f} | {t['cosine']:.3f} |"
                         f"{f' {verdict(t)} |' if judged else ''} {t['doc_id']} "
                         f"(chars {t['char_start']}-{t['char_end']}) | {passage} |")
        lines.append("")
    lines += ["Per item: `semantic.parquet` (join on `id`). Plot: `semantic.png`.", ""]
    return "\n".join(lines)


def verdict(t: dict) -> str:
    """A shown item's judge column: the verdict, and whether the item ends up flagged."""
    if t.get("judge") is None:
        return "not asked (verifier decides)"
    return f"{t['judge']} ({'flagged' if t['rephrased'] else 'not flagged'})"


def sections(r: dict, out: Path, title: str = "Rephrased items (semantic overlap)", lead: bool = True
             ) -> list[Section]:
    """The semantic section: (its headline and threshold when `lead`; a page of its own says them at the top), the
    rule, the figure, every flagged item shown (report.json holds up to semantic_run.SHOWN) beside its passage, the
    settings."""
    s = r["semantic"]
    blocks = [*([headline(s), threshold_sentence(s)] if lead else []), rule_sentence(s),
              Figure(out / "semantic.png", "Flagged and unflagged items by nearest cosine and by decision score")]
    judged = bool(s.get("judge"))
    if s["flagged_items"]:
        rows = []
        for t in s["flagged_items"]:
            item_spans, passage_spans = shared_spans(t["item"], t["passage"])
            rows.append([Code(t["id"]), Marked(t["item"], item_spans), Marked(t["passage"], passage_spans),
                         f"{t['doc_id']} (chars {t['char_start']}-{t['char_end']})", num(t["cosine"]),
                         num(t["decision_score"]), *([verdict(t)] if judged else [])])
        more = s.get("flagged_items_listed", s["flagged"]) - len(s["flagged_items"])
        caption = ("Items flagged by the verifier or the judge, with the judge's verdict; s" if judged else "S") + \
            "hared words are marked" + (f"; {more:,} more are in semantic.parquet" if more > 0 else "")
        blocks.append(Table(["id", "benchmark item", "corpus passage", "corpus document", "cosine", "decision",
                             *(["judge"] if judged else [])], rows, caption=caption))
    else:
        blocks.append("No item reached the threshold.")
    v = s["verifier"]
    blocks.append(Table(["setting", "value"], [
        ["embedder", Code(f"{s['embedder']['name']} ({s['embedder']['path']})")],
        ["weights digest", Code(s["embedder"]["weights_digest"])],
        ["windows", f"{s['window']['size']} words every {s['window']['stride']} ({s['window']['how']})"],
        ["nearest windows per item", s["top_k"]],
        ["verifier weights", ", ".join(f"{k} {w:g}" for k, w in v["weights"].items())
         + f"; numbers up to {v['small_number_max']} weigh {v['small_number_weight']:g}; rare words only for an "
           f"item whose other anchors weigh < {v['min_weight']:g}, else 0"],
        ["abstain below", f"{v['min_weight']:g} of anchor weight"],
        ["windows embedded", s["counts"]["windows"]], *judge_settings(s.get("judge"))],
        caption="How the rephrased items were found"))
    return [Section(title, blocks)]


def judge_settings(j: dict | None) -> list[list]:
    if not j:
        return []
    return [["LLM judge", Code(f"{j['model']} at {j['api_base']} ({j['endpoint']})")],
            ["judge prompts", ", ".join(f"{k} {n:,}" for k, n in j["kinds"].items()) or "none asked"],
            ["judge prompt digests", Code(", ".join(f"{k} {d}" for k, d in j["prompts"].items()))],
            ["judge verdicts", ", ".join(f"{k} {n:,}" for k, n in j["verdicts"].items()) or "none"],
            ["judge budget", "none" if j["budget"] is None else f"{j['budget']:,} pairs"]]


FILES = [("semantic.parquet", "one row per benchmark item: nearest cosine, the corpus window its decision rests on, "
                              "the verifier's counts, decision score, rephrased"),
         ("semantic.png", "flagged and unflagged items by cosine and decision score"),
         ("semantic", "per corpus part: each item's nearest windows (candidates.parquet), their texts once each "
                      "(windows.parquet), the quarantined records, the completion markers"),
         ("null_quarantine.parquet", "null rows that could not be read")]


def files(s: dict) -> list[tuple[str, str]]:
    judge = [("semantic/judge.jsonl", "the LLM judge's raw answer and verdict per judged pair (the journal of every "
                                      "answer under semantic/judge/)")] if s.get("judge") else []
    return [f for f in FILES if s["null"] is not None or f[0] != "null_quarantine.parquet"] + judge


def semantic_page(r: dict, out: Path) -> Page:
    """The page of a run with --n 0: the semantic pass alone."""
    s, c = r["semantic"], r["counts"]
    sc = s["counts"]
    warnings = read_warnings(c, sc, "semantic/quarantine.parquet/")
    facts = [("benchmark", Code(r["inputs"]["benchmark"])), ("corpus", Code(r["inputs"]["corpus"])),
             ("rows", f"{c['rows_in']:,} in, {c['rows_scored']:,} checked, {c['rows_quarantined']:,} quarantined"),
             ("corpus read", f"{sc['corpus_files']:,} files, {sc['corpus_documents']:,} documents, "
                             f"{sc['windows']:,} windows"), ("verbatim n-grams", r.get("verbatim", ""))]
    return Page(kind="corpus overlap (rephrased)", headline=headline(s), summary=threshold_sentence(s), facts=facts,
                sections=sections(r, out, title="Rephrased items, with their evidence", lead=False),
                warnings=warnings, files=[("report.json", "the numbers on this page"),
                                          ("report.md", "this report as Markdown"), *files(s)])


def judge_warning(page: Page, j: dict | None) -> Page:
    """A judge that never said yes decides nothing: every flag it was asked about is vetoed, right or wrong. A tiny
    model does exactly this (bench/results/semantic_judge_study.md: SmolLM2-135M, 0 yes of 607 pairs)."""
    if not j or not j.get("judged") or j.get("verdicts", {}).get("yes", 0):
        return page
    unparsed = j.get("verdicts", {}).get("unparsed", 0)
    return replace(page, warnings=[*page.warnings, f"The LLM judge said yes to none of the {j['judged']:,} pairs it "
                                   f"judged ({unparsed:,} answers unparsed), so it vetoed every flag it was asked "
                                   "about: check its answers in semantic/judge.jsonl before trusting a clean result."])


def with_semantic(md: str, page: Page | None, r: dict, out: Path) -> tuple[str, Page]:
    """report.md and report.html with the semantic section: added to the verbatim report, or alone (--n 0)."""
    s = r["semantic"]
    if page is None:
        page = semantic_page(r, out)
        c = r["counts"]
        body = "\n".join(["# Tidemark overlap (rephrased items)", "",
                          f"- benchmark `{r['inputs']['benchmark']}`: {c['rows_in']} rows in, {c['rows_scored']} "
                          f"checked, {c['rows_quarantined']} quarantined (`benchmark_quarantine.parquet`)",
                          f"- verbatim n-grams: {r['verbatim']}", "", ""])
    else:
        page = replace(page, sections=[*page.sections, *sections(r, out)], files=[*page.files, *files(s)])
        body = md.rstrip("\n") + "\n\n"
    if s["expected_false_flag_rate"] is None:
        page = replace(page, warnings=[*page.warnings, "The rephrase threshold is not calibrated (no --null): how "
                                       "often it flags an item that is not in the corpus is not known."])
    elif s.get("threshold_source") == "default":
        page = replace(page, warnings=[*page.warnings, "The rephrase threshold is the default, calibrated on the "
                                       "study's GSM8K-style null, not on this benchmark: give --null (items that "
                                       "cannot be in the corpus) for a false-flag rate that is this benchmark's."])
    return body + markdown(r), judge_warning(page, s.get("judge"))
