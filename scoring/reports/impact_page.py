"""`tidemark impact`'s report content: each task × model in a sentence, report.md and report.html's `Page`, from the
report dict report.json holds (jobs/commands/impact.py writes them); each record's figure is drawn by
scoring/reports/impact_figure.py (`plot_task`, imported here so that the command finds everything in one place).

A *record* is one task × model of --results (jobs/parts/impact/records.py): the full and clean scores, each split's
score, the leaked-minus-clean gap and its p; with reference results the difference-in-differences (`did`); with a
reference benchmark ConStat (`constat`, or `constat_reason`). Any of these may be missing.

Units (`is_proportion`): a record whose scores are proportions is shown in percent, its differences in percentage
points; any other metric in its own units, 3 decimals. Intervals are 95% (scoring/impact/stats.py's default; the
command has no level option).
"""
from __future__ import annotations

from pathlib import Path

from scoring.reports.cutoff_page import p_text
from scoring.reports.html import DASH, Figure, Page, Row, Section, Table, left_out, num, output_files, pct
from scoring.reports.impact_figure import CI, is_proportion, plot_task, signed

__all__ = ["conclusion", "is_proportion", "plot_task", "report_markdown", "report_page", "warnings"]

UNMATCHED_SHARE = 0.10  # warn when at least this share of a task's items had no evidence
SPLIT_LABELS = {"clean": "clean (no evidence of a leak)", "input_leaked": "question leaked, answer not",
                "input_and_answer_leaked": "question and answer leaked",
                "answer_leaked": "answer leaked, question not",
                "rephrased_leaked": "question found rephrased, not verbatim"}

FILES = (("report.md", "this report's sentences and tables as Markdown"),
         ("report.json", "every number here, per task and model (scores, CIs, gap, p, difference-in-differences, "
                         "ConStat with its fit), the matching and the thresholds"),
         ("items.parquet", "one row per task, model and item: its split, score, each evidence source's value and "
                           "flag, and the reference models' scores"))
RUN_JSON = ("run.json", "the configuration, counts, timings and the command line")

NOT_SHOWN = (
    "Verbatim overlap is not use: an item found in a training corpus may never have been trained on, or trained on "
    "once among billions of documents; and a detector's flag is a probability of membership, not a proof.",
    "The clean items are not a random sample of the benchmark (leaked items are often the older, more quoted, "
    "easier ones), so the clean score is not what an uncontaminated model would score on the whole benchmark.",
    "The difference-in-differences assumes the reference models are uncontaminated on these items and that the "
    "leaked items are as much easier for them as for the target (near a ceiling the same ease moves a strong model "
    "less).",
    "ConStat counts a model that is simply better at this benchmark than its reference-benchmark score predicts as "
    "inflated: it measures performance that does not generalise, whatever its cause.",
    "A rephrased reference benchmark can itself be contaminated (the rephrasings, or the originals they echo), "
    "which makes ConStat's expected score too high and its inflation too small.",
    "Items no evidence source matched are left out of the splits: they are neither clean nor leaked.",
    "A rephrase flag (overlap --semantic) rests on a threshold set at a false-flag rate on items that cannot be in "
    "the corpus, so some flagged items are false; and a rephrase the embedder's nearest windows missed leaves its "
    "item in the clean subset.")


# ---------------------------------------------------------------------------------------------- numbers in words

def score(x, prop: bool) -> str:
    return pct(x) if prop else num(x)


def _bare(x, prop: bool) -> str:
    return pct(x).rstrip("%") if prop else num(x)


def interval(ci, prop: bool, flip: bool = False) -> str:
    """"[44.1, 52.9]" (percent or plain, no unit); `flip`: the interval of −x (a "lower by" reads positive)."""
    lo, hi = (list(ci or []) + [None, None])[:2]
    if lo is None and hi is None:
        return DASH
    if flip:
        lo, hi = (None if hi is None else -hi), (None if lo is None else -lo)
    return f"[{_bare(lo, prop)}, {_bare(hi, prop)}]"


def amount(x, prop: bool) -> str:
    """A difference's size: "17.3 points" or "0.173"."""
    return f"{_bare(abs(x), prop)} points" if prop else num(abs(x))


def _gap_p(r: dict, permutations) -> str:
    """The gap's p: exact (hypergeometric) p has no floor; a permutation p's floor is 1/(permutations + 1)."""
    return p_text(r.get("p_value"), permutations if r.get("p_method") == "permutation" else None)


def _leaked_words(r: dict) -> str:
    names = {s["split"] for s in r.get("splits") or []} - {"clean"}
    rephrased = "rephrased_leaked" in names
    names.discard("rephrased_leaked")
    if rephrased and not names:
        return "whose question was found rephrased"
    if names == {"answer_leaked"}:
        words = "whose answer leaked"
    else:
        words = "whose question or answer leaked" if "answer_leaked" in names else "whose question leaked"
    return words + (", verbatim or rephrased," if rephrased else "")


def _overall(r: dict, prop: bool) -> str:
    full = f"{score(r.get('full_score'), prop)} overall"
    if r.get("clean_score") is None:
        return f"{full} on {num(r.get('n'))} items"
    clean = next((s for s in r.get("splits") or [] if s["split"] == "clean"), {})
    n_clean = clean.get("n", r.get("n_clean"))
    clean_score = f"{score(r['clean_score'], prop)} {interval(r.get('clean_ci'), prop)}"
    return f"{full}, {clean_score} on the {num(n_clean)} clean items"


def _did_words(r: dict, prop: bool) -> str:
    did = r.get("did")
    if did is None:
        return ""
    if 0 <= did <= r["gap"]:  # "of which" only where it is a part of the gap
        return f", of which {_bare(did, prop)} {interval(r.get('did_ci'), prop)} remain after the reference models' gap"
    lo, hi = (list(r.get("did_ci") or []) + [None, None])[:2]
    return (f", difference-in-differences against the reference models {signed(did, prop)} "
            f"[{signed(lo, prop)}, {signed(hi, prop)}]")


def _reference_words(r: dict) -> list[str]:
    """With --reference-results: why there is no difference-in-differences, or how many items it left out. (A reason
    that is the gap's own, "no leaked items ...", is already said by the gap's words.)"""
    if not r.get("reference_models"):
        return []
    why, dropped = r.get("did_reason"), r.get("did_n_dropped") or 0
    if r.get("did") is None and why and (r.get("gap") is not None or "reference" in why):
        return [f"no difference-in-differences: {str(why).rstrip('.')}"]
    if r.get("did") is not None and dropped:
        return [f"{dropped:,} items without a score from the target and every reference model are left out of the "
                "difference-in-differences"]
    return []


def _gap_words(r: dict, prop: bool, permutations) -> str:
    n_leaked, n_clean = r.get("n_leaked") or 0, r.get("n_clean") or 0
    gap = r.get("gap")
    if gap is not None:
        way = "higher" if gap >= 0 else "lower"
        return (f"the {n_leaked:,} items {_leaked_words(r)} score {amount(gap, prop)} {way} "
                f"{interval(r.get('gap_ci'), prop, flip=gap < 0)} ({_gap_p(r, permutations)})" + _did_words(r, prop))
    if not n_leaked:
        return f"no item leaked by the evidence (0 of {n_clean:,} matched items)"
    if not n_clean:
        return (f"every matched item leaked by the evidence ({n_leaked:,} of {n_leaked:,}): there is no clean score "
                "to compare with")
    return f"no gap: {str(r.get('gap_reason') or 'not computed').rstrip('.')}"


def _constat_words(r: dict, prop: bool) -> str:
    c = r.get("constat") or {}
    infl = r.get("constat_inflation", c.get("inflation"))
    if infl is None:
        return f"ConStat not run: {str(r.get('constat_reason') or 'no result').rstrip('.')}"
    p = p_text(r.get("constat_p", c.get("p_value")), c.get("n_boot"))
    way = "above" if infl >= 0 else "below"
    text = (f"ConStat: {amount(infl, prop)} {way} what the reference models predict "
            f"{interval(r.get('constat_ci', c.get('ci')), prop, flip=infl < 0)}, {p}")
    side = c.get("extrapolated_side")
    if side == "above":
        text += (" (unreliable: the target's reference-benchmark score is above every reference model's, where the "
                 "curve is held flat)")
    elif side == "below":
        text += " (understated: the target's reference-benchmark score is below every reference model's)"
    return text


def conclusion(record: dict, permutations: int | None = None) -> str:
    """One task × model in one sentence. `permutations` (report.json's settings) gives a permutation p's floor."""
    prop, r = is_proportion(record), record
    parts = [_overall(r, prop)]
    if "gap" in r or "gap_reason" in r:
        parts.append(_gap_words(r, prop, permutations))
    if r.get("n_unmatched"):
        parts.append(f"{r['n_unmatched']:,} items had no evidence and are left out of the split")
    parts += _reference_words(r)
    if "constat" in r or "constat_inflation" in r or "constat_reason" in r:
        parts.append(_constat_words(r, prop))
    return f"{r.get('task')} ({r.get('model')}): " + "; ".join(parts) + "."


def _records(report: dict) -> list[dict]:
    return list(report.get("tasks") or [])


def _permutations(report: dict):
    return (report.get("settings") or {}).get("permutations")


def warnings(report: dict) -> list[str]:
    """What changes how the numbers read: many items without evidence, ConStat outside the reference models'
    range, a gap with no reference models, result rows that could not be read."""
    out, seen = [], set()
    for r in _records(report):
        miss = r.get("n_unmatched") or 0
        total = max(r.get("n") or 0, miss + (r.get("n_clean") or 0) + (r.get("n_leaked") or 0))
        if miss and r.get("task") not in seen and miss >= UNMATCHED_SHARE * total:
            seen.add(r.get("task"))
            out.append(f"{r.get('task')}: {miss:,} of {total:,} items had no evidence (no source matched them by id "
                       "or text): they count in the score on every item but in no split, nor in the gap or the "
                       "difference-in-differences; the matching table says which source matched how many.")
    for r in _records(report):
        c = r.get("constat") or {}
        if c.get("extrapolated"):
            out.append(f"{r.get('task')} ({r.get('model')}): ConStat: {str(c.get('warning')).rstrip('.')}.")
    if any(r.get("gap") is not None and "did" not in r for r in _records(report)):
        out.append("No reference models (--reference-results): a gap alone does not tell leaked items from easier "
                   "ones (leaked items are often the older, more quoted, easier ones); the same gap on models that "
                   "cannot have seen the items (the difference-in-differences) would.")
    counts = report.get("counts") or {}
    if counts.get("results_quarantined"):
        q = counts["results_quarantined"]
        out.append(left_out(q, q + (counts.get("results_items") or 0), "result rows", "could not be read",
                            where=None))
    return out


# ---------------------------------------------------------------------------------------------- tables

def split_rows(r: dict) -> list[Row]:
    """Every item, each split, and the items without evidence: n, score, its CI; the clean row stands out."""
    prop = is_proportion(r)
    rows = [Row(["every scored item", num(r.get("n")), score(r.get("full_score"), prop),
                 interval(r.get("full_ci"), prop)], "muted")]
    for s in r.get("splits") or []:
        label = SPLIT_LABELS.get(s["split"], s["split"])
        if s["split"] == "input_leaked" and r.get("answer_checked") is False:  # no answer evidence was given
            label = "question leaked (answer not checked)"
        rows.append(Row([label, num(s.get("n")), score(s.get("score"), prop),
                         interval([s.get("ci_low"), s.get("ci_high")], prop)], "best" if s["split"] == "clean" else ""))
    if r.get("n_unmatched"):
        rows.append(Row(["no evidence (left out)", num(r["n_unmatched"]), DASH, DASH], "muted"))
    return rows


def comparison_rows(r: dict, permutations=None) -> list[list]:
    """The differences: every minus clean, leaked minus clean, the reference models' gaps, the DiD, ConStat."""
    prop = is_proportion(r)

    def row(label, x, ci=None, p=DASH):
        lo, hi = (list(ci or []) + [None, None])[:2]
        return [label, signed(x, prop), f"[{signed(lo, prop)}, {signed(hi, prop)}]" if ci else DASH, p]

    rows = []
    if r.get("full_minus_clean") is not None:
        rel = r.get("relative_change")
        rows.append(row("every item minus clean" + (f" ({100 * rel:+.1f}% of clean)" if rel is not None else ""),
                        r["full_minus_clean"], r.get("full_minus_clean_ci")))
    if r.get("gap") is not None:
        rows.append(row("leaked minus clean (the gap)", r["gap"], r.get("gap_ci"), _gap_p(r, permutations)))
    leaked = [s for s in r.get("splits") or [] if s["split"] != "clean" and s.get("gap") is not None]
    if len(leaked) > 1:  # each leaked split's own gap (with one, it is the gap above)
        rows += [row(f"{SPLIT_LABELS.get(s['split'], s['split'])} minus clean", s["gap"], s.get("gap_ci"),
                     _gap_p(s, permutations)) for s in leaked]
    if r.get("did") is not None:
        rows.append(row("reference models' gap (mean)", r.get("reference_gap")))
        missing = r.get("reference_missing") or {}
        rows += [row(f"gap of {m}" + (f" ({missing[m]:,} items missing)" if missing.get(m) else ""), g)
                 for m, g in zip(r.get("reference_models") or [], r.get("reference_gaps") or [])]
        rows.append(row("difference-in-differences (gap minus theirs)", r["did"], r.get("did_ci")))
    c = r.get("constat") or {}
    if c.get("inflation") is not None:
        rows.append(row(f"ConStat: actual minus expected ({score(c.get('actual'), prop)} vs "
                        f"{score(c.get('expected'), prop)})", c["inflation"], c.get("ci"),
                        p_text(c.get("p_value"), c.get("n_boot"))))
    return rows


SPLIT_HEADER = ["items", "n", "score", CI]
COMPARISON_HEADER = ["comparison", "difference", CI, "p"]


def _unit(r: dict) -> str:
    return "percentage points" if is_proportion(r) else f"{r.get('metric') or 'score'} units"


def matching_rows(report: dict) -> list[list]:
    return [[task, m.get("source"), m.get("role"), m.get("join"), num(m.get("matched")), num(m.get("unmatched")),
             num(m.get("matched_by_id")), num(m.get("matched_by_text"))]
            for task, ms in sorted((report.get("matching") or {}).items()) for m in ms]


MATCHING_HEADER = ["task", "evidence", "role", "join used", "matched", "unmatched", "by id", "by text"]


def rules(report: dict) -> list[str]:
    t = report.get("thresholds") or {}
    out = []
    if t:
        out += [f"Overlap evidence: a question leaked where more than {t.get('input_share', 0):g} of its n-grams are "
                f"in the corpus, an answer where more than {t.get('answer_share', 0):g} (0: any n-gram, GPT-3's and "
                "lm-evaluation-harness's rule).",
                f"Detector evidence (evaluate, audit): the threshold flags at most {100 * t.get('detector_fpr', 0):g}% "
                "of items the model cannot have seen.",
                f"Join of evidence to items: {t.get('join', 'auto')} (auto: per task and source, whichever of id and "
                "text matches more)."]
    return out + [f"{e.get('name')} ({e.get('job')}, {e.get('role')}): {e.get('rule', DASH)}; from {e.get('path')}"
                  for e in report.get("evidence") or []]


def facts(report: dict) -> list[tuple[str, str]]:
    recs, counts, s = _records(report), report.get("counts") or {}, report.get("settings") or {}
    refs = {m for r in recs for m in r.get("reference_models") or []}
    refs |= {p.get("model") for r in recs for p in ((r.get("constat") or {}).get("fit") or {}).get("points") or []}
    out = [("method", ", ".join(report.get("method") or []) or DASH),
           ("tasks", ", ".join(sorted({str(r.get("task")) for r in recs})) or DASH),
           ("models", ", ".join(sorted({str(r.get("model")) for r in recs})) or DASH),
           ("reference models", ", ".join(sorted(map(str, refs))) or "none")]
    if counts:
        out.append(("result rows", f"{num(counts.get('results_items'))} read, "
                                   f"{num(counts.get('results_quarantined'))} could not be read"))
    if report.get("evidence"):
        out.append(("evidence", ", ".join(str(e.get("name")) for e in report["evidence"])))
    if s:
        out.append(("resamples", f"{num(s.get('bootstrap'))} bootstrap resamples for the {CI}s, "
                                 f"{num(s.get('permutations'))} permutations for a real-valued gap's p (0/1 scores: "
                                 f"exact), {num(s.get('constat_bootstrap'))} ConStat rounds; seed {s.get('seed')}"))
    return out


# ---------------------------------------------------------------------------------------------- report.md

def _md(text) -> str:
    """A Markdown table cell: a pipe would end it."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], rows: list) -> list[str]:
    rows = [r.cells if isinstance(r, Row) else r for r in rows]
    return ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(_md(c) for c in r) + " |" for r in rows)]


def _title(r: dict) -> str:
    return f"{r.get('task')} ({r.get('model')})"


def report_markdown(report: dict) -> str:
    """report.md: the sentences first, the warnings, then per task its splits and differences, the matching, the
    thresholds and what the numbers do not show."""
    perms, recs = _permutations(report), _records(report)
    lines = ["# Tidemark contamination impact", ""]
    for i, r in enumerate(recs):
        lines += [f"**{conclusion(r, perms)}**" if i == 0 else conclusion(r, perms), ""]
    if not recs:
        lines += ["No task was measured.", ""]
    lines += [*(x for w in warnings(report) for x in (f"> **Warning:** {w}", "")),
              *(f"- {k}: {v}" for k, v in facts(report)), "", f"Brackets are {CI}s.", ""]
    for r in recs:
        lines += [f"## {_md(_title(r))}", "", conclusion(r, perms), ""]
        if r.get("figure"):
            lines += [f"![{_md(_title(r))}]({r['figure']})", ""]
        lines += _md_table(SPLIT_HEADER, split_rows(r)) + [""]
        comparisons = comparison_rows(r, perms)
        if comparisons:
            lines += [f"Differences in {_unit(r)}:", "", *_md_table(COMPARISON_HEADER, comparisons), ""]
    if report.get("matching"):
        lines += ["## How the evidence matched the items", "", *_md_table(MATCHING_HEADER, matching_rows(report)), ""]
    if rules(report):
        lines += ["## Thresholds and rules", "", *(f"- {_md(t)}" for t in rules(report)), ""]
    lines += ["## What these numbers do not show", "", *(f"- {t}" for t in NOT_SHOWN), ""]
    figures = "".join(f", `{r['figure']}`" for r in recs if r.get("figure"))
    lines += [f"Files: `report.json`, `items.parquet`, `run.json`{figures}.", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- report.html

def _task_section(r: dict, out_dir: Path, perms) -> Section:
    blocks: list = [conclusion(r, perms)]
    if r.get("figure"):
        blocks.append(Figure(out_dir / r["figure"], f"{_title(r)}: each split's score with its {CI}"
                             + ("; ConStat's fit" if r.get("constat") else "")))
    blocks.append(Table(SPLIT_HEADER, split_rows(r), f"{r.get('metric') or 'score'} per split (the clean row in bold; "
                                                     "items without evidence are in no split)."))
    comparisons = comparison_rows(r, perms)
    if comparisons:
        blocks.append(Table(COMPARISON_HEADER, comparisons, f"Differences, in {_unit(r)}."))
    if r.get("constat_reason") and not r.get("constat"):
        blocks.append(f"ConStat did not run: {r['constat_reason']}")
    return Section(_title(r), blocks)


def report_page(report: dict, out_dir) -> Page:
    """report.html's content (scoring/reports/html.py): the sentences first, then a section per task and model with
    its figure and tables, the matching, the thresholds and what the numbers do not show."""
    out_dir, perms, recs = Path(out_dir), _permutations(report), _records(report)
    sentences = [conclusion(r, perms) for r in recs] or ["No task was measured."]
    sections = [_task_section(r, out_dir, perms) for r in recs]
    if report.get("matching"):
        sections.append(Section("How the evidence matched the items", [Table(
            MATCHING_HEADER, matching_rows(report), "Per task, each evidence source: how many of the task's items it "
                                                    "matched, by id and by text, and which join was used.")]))
    if rules(report):
        sections.append(Section("Thresholds and rules", rules(report)))
    sections.append(Section("What these numbers do not show", list(NOT_SHOWN)))
    figures = [(r["figure"], f"{_title(r)}: the splits' scores" + (" and ConStat's fit" if r.get("constat") else ""))
               for r in recs if r.get("figure")]
    return Page(kind="contamination impact", headline=sentences[0], summary=" ".join(sentences[1:]),
                facts=facts(report), sections=sections, warnings=warnings(report),
                files=[*output_files(out_dir, [*FILES, *figures]), RUN_JSON])
