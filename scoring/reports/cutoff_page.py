"""`tidemark cutoff`'s report content: each answer in a sentence, report.md, report.html's `Page` and curve.png's
bytes, from the report dict report.json holds (jobs/commands/cutoff.py writes them).

An *answer* is one source × detector record of scoring/cutoff/estimate.py: `cutoff` (None unless p_no_cutoff <
alpha), `cutoff_ci`, `p_no_cutoff` (None where not tested, with `not_tested` saying why), `best_break`,
`estimator`, `differential` and `per_period`. The report holds the first source's first detector at the top
level, each source's first detector under `sources`, and each source's other detectors under its `detectors`.
"""
from __future__ import annotations

from pathlib import Path

from scoring.cutoff.periods import month_of, month_start
from scoring.reports.figures import png_bytes, pyplot
from scoring.reports.html import Code, Figure, Page, Row, Section, Table, left_out, num, output_files

LEVEL = 0.95  # the CI level where report.json's settings do not say
DIFFERENTIAL = "target minus reference model"

FILES = (("report.md", "this report's answers and tables as Markdown"),
         ("report.json", "every answer (per source and detector: cutoff, CI, p, the curve by month) and settings"),
         ("rows.parquet", "every scored row: id, date, month, source, group and one score per detector "
                          "(--from-rows recomputes every answer from it, without the model)"),
         ("quarantine.parquet", "the rows that could not be dated or scored, each with its reason"),
         ("curve.png", "the score by month, per source, with the cutoff marked"))
# run.json is written just after report.html (it records the whole run), so it is listed without looking for it.
RUN_JSON = ("run.json", "the configuration, counts, timings and the command line")

NOT_SHOWN = (
    "A month before the drop is not certainly in training, and one after it may still be partly in: training data "
    "is not a clean cut by date.",
    "Near-duplicates and reposts of old text carry old content into new months, and blur the step.",
    "A cutoff is per source: a model can have read one source later than another, so one source's date does not "
    "carry over to the rest.",
    "The step could be a change in the texts themselves (a new source, filter or site software) rather than in the "
    "model; a reference model (--ref-model) that cannot have read the range removes what every model sees.",
    "p is the chance of a drop at least this large at some month if there were no cutoff inside the range (with a "
    "linear trend allowed; for versions, if no month's versions stood out), not the probability that the date is "
    "right.",
    "The CI is over the documents (for versions, the groups) that were sampled, with the months as given; it does "
    "not cover a different sample of months or sources.")


# ---------------------------------------------------------------------------------------------- words

def p_text(p, permutations=None) -> str:
    """p as words that do not overstate it: at its floor 1/(B+1) no resample reached the statistic, and a
    smaller p cannot be shown with B resamples, so "p ≤ floor" rather than a bare number."""
    if p is None:
        return "p not computed"
    floor = 1.0 / (permutations + 1) if permutations else None
    if floor is not None and p <= floor * (1 + 1e-9):
        return f"p ≤ {floor:.2g}"
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def _ci_words(level: float) -> str:
    return f"{100 * level:g}% CI"


def _range(answer: dict) -> tuple[str, str]:
    rows = answer.get("per_period") or []
    return (rows[0]["period"], rows[-1]["period"]) if rows else ("?", "?")


def _who(answer: dict, name) -> str:
    who = str(name if name is not None else answer.get("source") or "all")
    return f"{who} ({DIFFERENTIAL})" if answer.get("differential") else who


def conclusion(answer: dict, name: str | None = None, level: float = LEVEL) -> str:
    """One source × detector answer in one sentence. `name` names it where the record has no `source` (a
    detector's answer under `detectors`)."""
    who, versions = _who(answer, name), answer.get("estimator") == "versions"
    if answer.get("p_no_cutoff") is None:
        return f"{who}: not tested: {str(answer.get('not_tested') or 'no estimate').rstrip('.')}."
    p = p_text(answer["p_no_cutoff"], answer.get("permutations"))
    cutoff = answer.get("cutoff")
    if cutoff:
        lo, hi = answer.get("cutoff_ci") or [cutoff, cutoff]
        ci = f"{_ci_words(level)} {lo} to {hi}"
        if versions:
            return (f"{who}: the model finds the {cutoff} versions most familiar ({ci}; {p} that no month stands "
                    f"out): its effective cutoff for this source is about {cutoff}.")
        return (f"{who}: the model's familiarity drops after {cutoff} ({ci}; {p} that there is no drop); texts "
                f"written after {hi} can serve as non-members.")
    first, last = _range(answer)
    best = answer.get("best_break")
    if versions:
        return (f"{who}: no month's versions stand out between {first} and {last} ({p} that none does; best "
                f"candidate {best}): the model may have read all of this range or none of it; these versions "
                "cannot date its training.")
    # no admissible break at all: p is 1 by construction, so say why rather than quote it
    why = f"{p} that there is none; best candidate {best}" if best else "no month has a fitted drop after it"
    return (f"{who}: no drop in familiarity between {first} and {last} ({why}): the model may have read all of "
            "this range or none of it; these dates cannot label members and non-members.")


def verdict(answer: dict) -> str:
    """A few words for a table cell or a plot title."""
    if answer.get("p_no_cutoff") is None:
        return "not tested"
    versions, cutoff = answer.get("estimator") == "versions", answer.get("cutoff")
    if cutoff:
        return f"{cutoff} versions most familiar" if versions else f"drops after {cutoff}"
    return "no month stands out" if versions else "no drop"


def _level(report: dict) -> float:
    return float((report.get("settings") or {}).get("level") or LEVEL)


def _sources(report: dict) -> list[dict]:
    return list(report.get("sources") or [report])


def _answers(source: dict) -> list[tuple[str, dict]]:
    """(detector, answer) for every detector of a source, its own (first) detector first."""
    return [(str(source.get("detector")), source), *((str(k), v) for k, v in (source.get("detectors") or {}).items())]


def warnings(report: dict) -> list[str]:
    """What changes how the answers read: a most-familiar month at the range's edge, no reference model,
    quarantined rows."""
    out = []
    for s in _sources(report):
        if s.get("at_range_edge") and s.get("p_no_cutoff") is not None:
            out.append(f"{s.get('source', 'all')}: the most familiar month is at the range's edge: the true cutoff may "
                       "lie outside the range, or a drift that every model shares may make the last versions "
                       "easiest; extend the range or use --ref-model.")
    if not report.get("ref_model") and not any(a.get("differential") for s in _sources(report)
                                               for _, a in _answers(s)):
        out.append("The scores are the target model's alone. A reference model (--ref-model) that cannot have read "
                   "the range would remove drift that every model shares (later texts easier or harder for any "
                   "model), which can look like a cutoff or hide one.")
    counts = report.get("counts") or {}
    if counts.get("quarantined"):
        out.append(left_out(counts["quarantined"], counts.get("in", counts["quarantined"]), "dated rows",
                            "could not be dated or scored"))
    return out


# ---------------------------------------------------------------------------------------------- curve.png

def _mid(period: str):
    """The middle of a month, as a naive datetime (matplotlib's date axis)."""
    m = month_of(period)
    a, b = month_start(m).replace(tzinfo=None), month_start(m + 1).replace(tzinfo=None)
    return a + (b - a) / 2


def _plain(text: str) -> str:
    """Data as literal plot text: matplotlib would read $…$ as mathematics."""
    return text.replace("$", r"\$")


def _draw_fit(ax, rows: list[dict], x: list, best) -> None:
    """The two-line fit as two segments (not joined across the break) and the one-line H0 fit."""
    if all("trend" in r for r in rows):
        ax.plot(x, [r["trend"] for r in rows], ":", color="#777777", lw=1, label="one line (no cutoff)")
    if best and all("fit" in r for r in rows):
        before = [i for i, r in enumerate(rows) if r["period"] <= best]
        after = [i for i, r in enumerate(rows) if r["period"] > best]
        for k, part in enumerate((before, after)):
            ax.plot([x[i] for i in part], [rows[i]["fit"] for i in part], "--", color="#228833", lw=1.2,
                    label="two lines, break at the best month" if k == 0 else None)


def _panel(ax, answer: dict, level: float) -> None:
    rows = answer.get("per_period") or []
    ax.set_title(_plain(f"{answer.get('source', 'all')}: {verdict(answer)}"), fontsize=9, loc="left")
    if not rows:
        ax.text(0.5, 0.5, _plain(answer.get("not_tested") or "no months"), transform=ax.transAxes, ha="center",
                va="center", fontsize=8, wrap=True)
        return
    x = [_mid(r["period"]) for r in rows]
    ax.fill_between(x, [r["ci_low"] for r in rows], [r["ci_high"] for r in rows], color="#4477aa", alpha=0.2,
                    lw=0, label=f"{100 * level:g}% band")
    ax.plot(x, [r["score"] for r in rows], "o-", ms=3, lw=1, color="#4477aa", label="mean score")
    _draw_fit(ax, rows, x, answer.get("best_break"))
    cutoff = answer.get("cutoff")
    if cutoff:
        lo, hi = answer.get("cutoff_ci") or [cutoff, cutoff]
        ax.axvspan(month_start(month_of(lo)).replace(tzinfo=None),
                   month_start(month_of(hi) + 1).replace(tzinfo=None), color="#cc6677", alpha=0.15, lw=0,
                   label="cutoff's CI")
        ax.axvline(_mid(cutoff), color="#cc6677", lw=1.5, label="cutoff")
    ax.set_ylabel("normalised score" if answer.get("estimator") == "versions" else "mean score", fontsize=8)
    ax.tick_params(labelsize=8)


def plot_curve(report: dict) -> bytes:
    """curve.png's bytes: one panel per source (own y scale, shared months), the score by month with its band,
    the fits, and the cutoff with its CI where there is one."""
    plt = pyplot()
    sources = _sources(report)
    # shared months: the sources' cutoffs line up, so a later one is seen to be later
    fig, axes = plt.subplots(len(sources), 1, sharex=True, squeeze=False, layout="constrained",
                             figsize=(7.2, 1.6 + 2.4 * len(sources)))
    for ax, s in zip(axes[:, 0], sources):
        _panel(ax, s, _level(report))
    # one legend for all panels (the same symbols), below them, where it hides no data
    handles = {}
    for ax in axes[:, 0]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    if handles:
        fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=3, fontsize=7)
    axes[-1, 0].set_xlabel("month (written; for versions, the version's month)", fontsize=8)
    first = sources[0]
    diff = f" ({DIFFERENTIAL})" if first.get("differential") else ""
    fig.suptitle(_plain(f"{first.get('detector')}{diff} by month: larger = more familiar"), fontsize=10)
    return png_bytes(fig)


# ---------------------------------------------------------------------------------------------- report.md

def _md(text) -> str:
    """A Markdown table cell: a pipe would end it."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ci_cell(lo, hi, digits: int = 3) -> str:
    return f"[{num(lo, digits)}, {num(hi, digits)}]"


def _month_ci(answer: dict) -> str:
    ci = answer.get("cutoff_ci") or answer.get("best_break_ci")
    return f"{ci[0]} to {ci[1]}" if ci else "–"


def _answer_cells(detector: str, a: dict) -> list:
    """source table cells: detector, estimator, month, its CI, p, statistic, reading."""
    return [detector, a.get("estimator", "–"), a.get("cutoff") or a.get("best_break") or "–", _month_ci(a),
            p_text(a.get("p_no_cutoff"), a.get("permutations")), num(a.get("statistic")), verdict(a)]


ANSWER_HEADER = ["detector", "estimator", "cutoff (else best candidate)", "its CI", "p (no cutoff)", "statistic",
                 "reading"]


def _md_table(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(_md(c) for c in r) + " |" for r in rows)]


def _period_rows(answer: dict) -> list[list]:
    return [[r["period"], num(r["n"]), num(r["score"], 4), _ci_cell(r["ci_low"], r["ci_high"], 4)]
            for r in answer.get("per_period") or []]


def _counts_line(report: dict) -> str | None:
    c = report.get("counts")
    if not c:
        return None
    reasons = ", ".join(f"{k} {v:,}" for k, v in sorted((c.get("reasons") or {}).items()))
    return (f"{c.get('in', 0):,} rows in, {c.get('scored', 0):,} scored, {c.get('quarantined', 0):,} quarantined"
            + (f" ({reasons})" if reasons else ""))


def _resamples(report: dict) -> str:
    """The run's settings (report.json's `settings`; the first answer's where a hand-made report has none)."""
    s = report.get("settings") or _sources(report)[0]
    return (f"{num(s.get('permutations'))} permutations for p, {num(s.get('bootstrap'))} bootstrap resamples for "
            f"the {_ci_words(_level(report))}s; a cutoff is reported where p < {s.get('alpha', '–')}")


def report_markdown(report: dict) -> str:
    """report.md: the answers first, then per source its detectors and its curve, then what it does not show."""
    level, sources = _level(report), _sources(report)
    lines = ["# Tidemark training cutoff", ""]
    for i, s in enumerate(sources):
        text = conclusion(s, level=level)
        lines += [f"**{text}**" if i == 0 else text, ""]
    for w in warnings(report):
        lines += [f"> **Warning:** {w}", ""]
    if report.get("model"):
        ref = report.get("ref_model")
        lines.append(f"- model `{report['model']}`" + (f"; reference model `{ref}`" if ref else ""))
    counts = _counts_line(report)
    if counts:
        lines.append(f"- rows: {counts} (`quarantine.parquet` gives each quarantined row's reason)")
    lines += [f"- {_resamples(report)}", ""]
    for s in sources:
        lines += [f"## {_md(s.get('source', 'all'))}", "", conclusion(s, level=level), ""]
        lines += _md_table(ANSWER_HEADER, [_answer_cells(d, a) for d, a in _answers(s)]) + [""]
        if s.get("per_period"):
            lines += [f"The curve ({s.get('detector')}):", ""]
            lines += _md_table(["month", "n", "score", _ci_words(level)], _period_rows(s)) + [""]
    lines += ["## What this does not show", "", *(f"- {t}" for t in NOT_SHOWN), ""]
    if report.get("meaning"):
        lines += ["## What p and the CI mean", "", str(report["meaning"]), ""]
    lines += ["Files: `report.json`, `rows.parquet`, `quarantine.parquet`, `curve.png`, `run.json`.", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- report.html

def _joined(sources: list[dict], value) -> str:
    """One fact over the sources: the value alone where every source has the same, else `source: value` each."""
    values = [value(s) for s in sources]
    if len(set(values)) == 1:
        return values[0] + (" (every source)" if len(values) > 1 else "")
    return "; ".join(f"{s.get('source', 'all')}: {v}" for s, v in zip(sources, values))


def _facts(report: dict, sources: list[dict]) -> list[tuple]:
    first, periods = sources[0], [r["period"] for s in sources for r in s.get("per_period") or []]
    ref = report.get("ref_model")
    facts = [("model", Code(str(report["model"])))] if report.get("model") else []
    facts += [("reference model", Code(str(ref)) if ref else "none (the target's scores alone)"),
              ("detector", Code(str(first.get("detector")))),
              ("estimator", _joined(sources, lambda s: str(s.get("estimator", "–"))))]
    counts = _counts_line(report)
    facts.append(("rows", counts or _joined(sources, lambda s: num(s.get("rows")))))
    if periods:
        facts.append(("months", f"{min(periods)} to {max(periods)}; "
                                + _joined(sources, lambda s: f"{num(s.get('months'))} with rows")))
    facts += [("p (no cutoff)", _joined(sources, lambda s: p_text(s.get("p_no_cutoff"), s.get("permutations")))),
              ("statistic", _joined(sources, lambda s: num(s.get("statistic")))),
              ("resamples", _resamples(report))]
    return facts


def _source_section(s: dict, level: float) -> Section:
    blocks: list = [conclusion(s, level=level)]
    drop = s.get("drop")
    if drop:
        blocks.append(f"The two-line fit drops by {num(drop.get('size'))} {_ci_cell(*(drop.get('ci') or [None] * 2))} "
                      f"{drop.get('at', '')} (in the detector's units).")
    if s.get("estimator") == "versions" and s.get("groups") is not None:
        blocks.append(f"{num(s['groups'])} groups with versions in two or more months (normalised: "
                      f"{s.get('normalisation', 'center')}); {num(s.get('groups_single_month', 0))} seen in one "
                      "month only are left out.")
    marked = s.get("cutoff")
    rows = [Row(r, "best" if r[0] == marked else "") for r in _period_rows(s)]
    if rows:
        blocks.append(Table(["month", "n", "score", _ci_words(level)], rows,
                            f"{s.get('detector')}: mean score per month (larger = more familiar), "
                            "the cutoff month in bold."))
    return Section(f"{s.get('source', 'all')}, month by month", blocks)


def _detectors_table(sources: list[dict]) -> Table:
    rows = [Row([s.get("source", "all"), Code(d), *_answer_cells(d, a)[1:]], "" if k else "best")
            for s in sources for k, (d, a) in enumerate(_answers(s))]
    return Table(["source", *ANSWER_HEADER], rows, "Every detector's answer, per source (the bold row is the one "
                                                  "the sentences above and the plot are about).")


def report_page(report: dict, out_dir) -> Page:
    """report.html's content (scoring/reports/html.py): the answers in sentences first, then what they rest on."""
    level, sources = _level(report), _sources(report)
    sentences = [conclusion(s, level=level) for s in sources]
    first = sources[0]
    sections = [
        Section("Every source's answer", [_detectors_table(sources)]),
        Section("The curve", [Figure(Path(out_dir) / "curve.png",
                                     f"{first.get('detector')} by month, per source, with the cutoff and its CI")]),
        *(_source_section(s, level) for s in sources),
        Section("What this does not show", list(NOT_SHOWN)),
    ]
    if report.get("meaning"):
        sections.append(Section("What p and the CI mean", [str(report["meaning"])]))
    return Page(kind="training cutoff", headline=sentences[0], summary=" ".join(sentences[1:]),
                facts=_facts(report, sources), sections=sections, warnings=warnings(report),
                files=[*output_files(Path(out_dir), FILES), RUN_JSON])
