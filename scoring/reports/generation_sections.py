"""The parts of evaluate's report that a text-only run and a set test add (report.md lines and report.html
sections): what the server was asked and what it cost, what was not scored and why, the set test with what it
does and does not show, and the top-scored rows' sampled continuations beside the true one, the runs they share
marked. Built from run.json's `generation`, `set_test` and `examples`; every text is escaped by html.render."""
from __future__ import annotations

from typing import Mapping

from scoring.reports.html import Code, Marked, Section, Table, num, pct

SHOWS = ("What it shows: whether the model treats the suspect set differently from the reference set, in the one "
         "statistic named before the test; with two sets drawn alike (e.g. a benchmark's items and new items "
         "written the same way), a small p means the suspect set left a trace in the model.")
DOES_NOT_SHOW = ("What it does not show: which items were seen, or that any difference comes from training. A "
                 "reference set from another time, source or style differs in ways the detector also picks up; the "
                 "blind baseline (text-only classifiers that never see the model) measures how much. A large p is "
                 "not proof of absence: a model can have seen a set without reproducing it.")


def set_test_sentence(t: Mapping) -> str:
    p = t["p_value"]
    verdict = ("scores the suspect set as more member-like than the reference set" if p < 0.05 else
               "does not score the suspect set as more member-like than the reference set")
    level = " (significant at 1%)" if p < 0.01 else " (significant at 5%)" if p < 0.05 else ""
    return (f"p = {p:.3g}: the model {verdict}{level}, by {t['column']} (one-sided Mann-Whitney U, "
            f"{t['n_suspect']:,} suspect vs {t['n_reference']:,} reference rows, AUC {t['auc']:.3f}).")


def set_test_markdown(t: Mapping | None) -> list[str]:
    if not t:
        return []
    return ["## Set test (suspect = label 1, reference = label 0)", "", set_test_sentence(t), "", t["meaning"], "",
            SHOWS, "", DOES_NOT_SHOW, ""]


def trace_sentence(t: Mapping | None) -> str:
    """What `--trace-index` found, in a sentence (run.json's `trace`), or "" without one."""
    if not t:
        return ""
    share = f" ({100 * t['texts_with_span'] / t['texts']:.1f}%)" if t.get("texts") else ""
    return (f"{t['texts_with_span']:,} of {t['texts']:,} generated samples{share} contain a span of at least "
            f"{t['min_words']} words found verbatim in the corpus index {t['index']} ({t['spans']:,} spans); each "
            f"span's documents are in {t['out']} (report.html, spans.parquet, documents.parquet).")


def set_test_section(t: Mapping, blind: Mapping | None) -> Section:
    rows = [[Code(t["column"]), t["n_suspect"], t["n_reference"], num(t["mean_suspect"], 4),
             num(t["mean_reference"], 4), num(t["auc"]), num(t["u"], 1), f"{t['p_value']:.3g}", t["method"]]]
    blocks = [set_test_sentence(t), t["meaning"], SHOWS, DOES_NOT_SHOW,
              Table(["detector", "suspect rows", "reference rows", "mean (suspect)", "mean (reference)", "AUC", "U",
                     "p (one-sided)", "U computed"], rows)]
    if blind and blind.get("all") is not None:
        blocks.append(f"Blind baseline on the same two sets (no model): AUC {num(blind['all'], 2)}.")
    return Section("Set test: suspect vs reference", blocks)


def _spend(gen: Mapping) -> list[tuple[str, str]]:
    plan, spent, probe = gen.get("plan") or {}, gen.get("spent") or {}, gen.get("probe") or {}
    honours = ", ".join(f"{k}: {'yes' if probe.get(v) else 'no'}" for k, v in
                        (("n", "n"), ("seed", "seed_accepted"), ("reproducible seed", "seed_reproducible"),
                         ("top_p", "top_p"), ("stop", "stop"), ("generated-token log-probs", "generated_logprobs")))
    return [("endpoint", f"/{gen.get('endpoint')}"), ("the server honours", honours),
            ("planned", f"{plan.get('requests', 0):,} requests, <= "
                        f"{plan.get('prompt_tokens', 0) + plan.get('completion_tokens', 0):,} tokens"),
            ("sent this run", _sent(spent)),
            ("sent for these results, over every run", _sent(gen.get("spent_all_runs") or {}))]


def _sent(spent: Mapping) -> str:
    return (f"{spent.get('requests_sent', 0):,} requests ({spent.get('requests_reused', 0):,} answered from the "
            f"journal, {spent.get('requests_failed', 0):,} failed), {spent.get('prompt_tokens', 0):,} prompt + "
            f"{spent.get('completion_tokens', 0):,} generated tokens")


def generation_markdown(gen: Mapping | None, examples) -> list[str]:
    if not gen:
        return []
    md = ["## Text-only run", ""] + [f"- {k}: {v}" for k, v in _spend(gen)]
    for column, reasons in (gen.get("not_scored") or {}).items():
        md.append(f"- not scored by `{column}`: " + ", ".join(f"{n:,} ({r})" for r, n in reasons.items()))
    answers = gen.get("decop_answers") or {}
    if answers.get("decop_asked"):
        md.append(f"- DE-COP answers without a parsable letter: {answers['decop_unparsable']:,} of "
                  f"{answers['decop_asked']:,}")
    md.append("")
    for ex in examples or []:
        md += [f"### `{ex['id']}` (label {ex['label']}, {ex['column']} = {ex['score']:.3f})", "",
               _quoted(ex["prompt"]), "", "True continuation:", "", _quoted(ex["target"]), ""]
        for s in ex["samples"]:
            md += [f"Sample {s['sample']} (coverage {s['coverage']:.2f}):", "", _quoted(s["text"]), ""]
    return md


def _quoted(text: str) -> str:
    """Untrusted text as a Markdown block quote, every line of it."""
    return "> " + text.replace("\n", "\n> ")


def generation_sections(gen: Mapping | None, examples) -> list[Section]:
    if not gen:
        return []
    from scoring.generation.text import covered_spans

    sections = [Section("What the server was asked", [
        "Text-only mode: the model's answers are text, and every score is computed from generations.parquet "
        "(`tidemark rescore --generations` recomputes them without the server).",
        Table(["", ""], [[k, v] for k, v in _spend(gen)]),
        *([Table(["detector", "rows not scored", "why"], [[Code(c), sum(r.values()), ", ".join(r)]
                                                          for c, r in gen["not_scored"].items()])]
          if gen.get("not_scored") else [])])]
    answers = gen.get("decop_answers") or {}
    if answers.get("decop_asked"):
        sections[0].blocks.append(f"DE-COP: {answers['decop_unparsable']:,} of {answers['decop_asked']:,} answers "
                                  f"({pct(answers['decop_unparsable'] / answers['decop_asked'])}) had no parsable "
                                  "letter and were left out of the share.")
    for ex in examples or []:
        rows = []
        for s in ex["samples"]:
            rows.append([f"sample {s['sample']}, coverage {s['coverage']:.2f}",
                         Marked(ex["target"], covered_spans(ex["target"], s["text"], ex["n"])),
                         Marked(s["text"], [tuple(x) for x in s["spans"]])])
        sections.append(Section(f"Row {ex['id']} (label {ex['label']}; {ex['column']} = {ex['score']:.3f})", [
            "The prompt (the passage's first part) as sent:", Table(["", "prompt"], [["prompt", Marked(ex["prompt"])]]),
            Table(["", "true continuation (runs the sample reproduced, marked)",
                   f"sampled continuation (runs of >= {ex['n']} tokens found in the true one, marked)"], rows)]))
    return sections
