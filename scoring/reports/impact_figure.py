"""`tidemark impact`'s figure: one PNG per task × model record (scoring/reports/impact_page.py has the words and
the page; jobs/commands/impact.py writes the bytes as task_NN.png). Left, each split's score with its 95% CI and the
score on every item as a line; right, with ConStat, the reference models on the reference benchmark × benchmark
plane, the fitted curve, the target, its expected score and the inflation between them.

`is_proportion` decides the units of a record for the figure and the words alike.
"""
from __future__ import annotations

import re

from scoring.reports.figures import png_bytes, pyplot
from scoring.reports.html import DASH, num

CI = "95% CI"
ACCURACY = re.compile(r"acc|exact_match|^em$|pass@|correct", re.IGNORECASE)
SHORT = {"clean": "clean", "input_leaked": "question\nleaked", "input_and_answer_leaked": "question +\nanswer",
         "answer_leaked": "answer\nonly", "rephrased_leaked": "question\nrephrased"}


def _scores(r: dict) -> list[float]:
    """Every benchmark score of a record (not the differences, not the reference benchmark's)."""
    out = [r.get("full_score"), r.get("clean_score"), *(r.get("full_ci") or []), *(r.get("clean_ci") or [])]
    for s in r.get("splits") or []:
        out += [s.get("score"), s.get("ci_low"), s.get("ci_high")]
    c = r.get("constat") or {}
    out += [c.get("actual"), c.get("expected")]
    out += [p.get("bench_score") for p in (c.get("fit") or {}).get("points") or []]
    return [float(v) for v in out if v is not None]


def is_proportion(r: dict) -> bool:
    """Percent (differences in points) when every score of the record lies in [0, 1] and either its metric looks
    like an accuracy (acc, acc_norm, exact_match, em, pass@k) or its scores are 0/1 (every split's CI is Wilson's,
    which stats.mean_ci uses only for 0/1 scores). Anything else (BLEU, F1 as a number, a log-likelihood) is shown
    as it is."""
    if not all(0.0 <= v <= 1.0 for v in _scores(r)):
        return False
    metric = r.get("metric")
    if any(m and ACCURACY.search(str(m)) for m in (metric if isinstance(metric, list) else [metric])):
        return True
    splits = r.get("splits") or []
    return bool(splits) and all(s.get("method") == "wilson" for s in splits)


def signed(x, prop: bool) -> str:
    """A difference with its sign: "+17.3" (points) or "+0.173"."""
    if x is None:
        return DASH
    return f"{100 * x:+.1f}" if prop else f"{x:+.3f}"


def _plain(text: str) -> str:
    """Data as literal plot text: matplotlib would read $…$ as mathematics."""
    return text.replace("$", r"\$")


def _splits_panel(ax, r: dict, f: float, prop: bool) -> None:
    rows = [("every\nitem", r.get("n"), r.get("full_score"), r.get("full_ci"), "#777777")]
    colours = {"clean": "#4477aa", "input_leaked": "#ee6677", "input_and_answer_leaked": "#aa3377",
               "answer_leaked": "#ccbb44", "rephrased_leaked": "#66ccee"}
    rows += [(SHORT.get(s["split"], s["split"]), s.get("n"), s.get("score"), [s.get("ci_low"), s.get("ci_high")],
              colours.get(s["split"], "#333333")) for s in r.get("splits") or []]
    for k, (_, _, y, ci, colour) in enumerate(rows):
        if y is None:
            continue
        lo, hi = ci if ci and None not in ci else (y, y)
        ax.errorbar([k], [f * y], yerr=[[f * (y - lo)], [f * (hi - y)]], fmt="o", ms=6, capsize=4, color=colour)
    if r.get("full_score") is not None:
        ax.axhline(f * r["full_score"], ls="--", lw=1, color="#777777", label="score on every item")
        ax.legend(fontsize=7, loc="best")
    ax.set_xticks(range(len(rows)), [f"{name}\nn={num(n)}" for name, n, *_ in rows], fontsize=7)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylabel("score (%)" if prop else _plain(f"mean {r.get('metric') or 'score'}"), fontsize=8)
    ax.set_title(f"score per split, with its {CI}", fontsize=9, loc="left")
    ax.tick_params(labelsize=7)


def _constat_panel(ax, r: dict, c: dict, f: float, prop: bool) -> None:
    fit = c.get("fit") or {}
    xs = [p["reference_score"] for p in fit.get("points") or []] + [(fit.get("target") or {}).get("reference_score")]
    fx = f if all(x is not None and 0.0 <= x <= 1.0 for x in xs) else 1.0
    pts = fit.get("points") or []
    ax.scatter([fx * p["reference_score"] for p in pts], [f * p["bench_score"] for p in pts], s=22, color="#4477aa",
               label="reference models", zorder=3)
    for p in pts:
        ax.annotate(_plain(str(p["model"])), (fx * p["reference_score"], f * p["bench_score"]), fontsize=6,
                    xytext=(3, -8), textcoords="offset points", color="#4477aa")
    curve = fit.get("curve") or {}
    if curve.get("reference_score"):
        ax.plot([fx * x for x in curve["reference_score"]], [f * y for y in curve["bench_score"]], "-", lw=1.2,
                color="#228833", label="fitted curve (isotonic, flat beyond)")
    t = fit.get("target") or {}
    if t:
        x, actual, expected = fx * t["reference_score"], f * c["actual"], f * c["expected"]
        ax.plot([x, x], [expected, actual], "-", lw=2.5, color="#cc3311", alpha=0.6,
                label=f"inflation {signed(c['inflation'], prop)}")
        ax.scatter([x], [expected], s=40, facecolors="none", edgecolors="#cc3311", label="expected", zorder=4)
        ax.scatter([x], [actual], s=110, marker="*", color="#cc3311", label=_plain(f"target: {t.get('model')}"),
                   zorder=5)
    unit = " (%)" if prop else ""
    ax.set_xlabel(_plain(f"reference benchmark ({c.get('reference_task', '?')}){' (%)' if fx != 1 else ''}"),
                  fontsize=8)
    ax.set_ylabel(f"benchmark{unit}", fontsize=8)
    side = c.get("extrapolated_side")
    ax.set_title("ConStat" + (f": target {side} the reference models' range" if side else ""), fontsize=9, loc="left")
    ax.margins(x=0.08)  # room for the last model's name
    ax.legend(fontsize=6, loc="best")
    ax.tick_params(labelsize=7)


def plot_task(record: dict) -> bytes:
    """One record's figure: each split's score with its CI and the full score as a line; with ConStat, a second
    panel with the reference models, the fitted curve, the target, its expected score and the inflation."""
    plt = pyplot()
    prop = is_proportion(record)
    f = 100.0 if prop else 1.0
    c = record.get("constat") if (record.get("constat") or {}).get("fit") else None
    left = bool(record.get("splits")) or c is None
    panels = int(left) + int(c is not None)
    fig, axes = plt.subplots(1, panels, squeeze=False, layout="constrained", figsize=(0.8 + 4.4 * panels, 4.2))
    axs = list(axes[0])
    if left:
        _splits_panel(axs.pop(0), record, f, prop)
    if c is not None:
        _constat_panel(axs.pop(0), record, c, f, prop)
    fig.suptitle(_plain(f"{record.get('task')} · {record.get('model')} · {record.get('metric') or 'score'}"),
                 fontsize=10)
    return png_bytes(fig)
