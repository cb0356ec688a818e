"""The translated-contamination study's page (bench/results/semantic_crosslingual.md) from its JSON."""
from __future__ import annotations

from bench.semantic_report import _table, pct

LABELS = {"ngram13": "13-gram overlap", "embedding": "embedding (all-MiniLM-L6-v2, top k) + verifier",
          "embedding_k10": "embedding + verifier, top 10", "anchors": "anchor candidates + verifier, no cosine floor",
          "anchors_numbers": "anchor candidates, numbers only"}


def floor_share(rank: dict) -> str:
    lo, hi = (f(v["above_floor"]["rate"] for v in rank.values()) for f in (min, max))
    return "no case" if hi == 0 else f"{lo:.0%}-{hi:.0%} of cases"


def render_md(r: dict) -> str:
    cfg, sz, env = r["config"], r["sizes"], r["environment"]
    langs = cfg["languages"]
    out = ["# Translated contamination with known truth (issue 57): GSM8K items planted in other languages", "",
           f"Command: `{r['command']}` · {env.get('timestamp', '')} · {env.get('cpu', '')} · git "
           f"{env.get('git', {}).get('commit', '')[:10]} · wall {r['wall_seconds']} s.", "",
           "## What was run", "",
           f"- Translations: `{cfg['package']}` (GSM-Symbolic's GSM8K templates, translations checked by native "
           f"speakers; names, units and number words localised). {sz['templates']} templates common to English and "
           f"{', '.join(langs)} ({cfg['slow_templates_left_out']} left out: their generator is slow).",
           f"- Benchmark: the {sz['templates']} English originals. Per language, a corpus of documents of "
           f"{cfg['doc_problems'][0]}-{cfg['doc_problems'][1]} problems in that language ({cfg['siblings']} "
           "same-template siblings per template, other numbers and names) with a random half of the originals' "
           "translations planted; the other half are that language's negatives.",
           f"- Null: {sz['null']} English draws of the same templates in no corpus, each searched against every "
           "language's corpus; thresholds set on half of them at 1% (pooled over languages), measured on the other "
           f"half. Windows of {sz['window_size']} words, stride {sz['window_stride']}; top k = {cfg['k']}, anchor "
           f"candidates m = {cfg['m']}. Intervals: 95% Clopper-Pearson.", "",
           "| language | documents | windows | planted |", "|---|---|---|---|"]
    out += [f"| {lg} | {v['documents']} | {v['windows']} | {v['planted']} |"
            for lg, v in sz["per_language"].items()]
    out += ["", "## What survives a translation", "",
            "The share of translations that keep every number, and every name, of the English original (the "
            "verifier's anchors, scoring/semantic/anchors.py):", ""]
    out += _table(["language", "every number", "every name"],
                  [[lg, pct(s["every_number"]), pct(s["every_name"])] for lg, s in r["survival"].items()])
    out += ["", "Where the English embedder puts the planted translation (rank of its best window among the "
            "language's windows by cosine, 0 = nearest):", ""]
    out += _table(["language", "median rank", f"in the top {cfg['k']}", "windows", "its cosine (median)",
                   "cosine at or above the floor (0.5)"],
                  [[lg, f"{v['median']:g}", pct(v["in_top_k"]), str(v["windows"]), f"{v['cosine_median']:.3f}",
                    pct(v["above_floor"])] for lg, v in r["planted_rank_under_minilm"].items()])
    out += ["", "## Recall and false flags", ""]
    rows = []
    for name, rules in r["methods"].items():
        for rule, m in rules.items():
            rows.append([LABELS.get(name, name), rule, f"{m['threshold']:.4f}", pct(m["recall"]),
                         pct(m["false_flags"]), pct(m["null_half_a"]), pct(m["null_held_out"])])
    out += _table(["method", "threshold rule", "threshold", "translations found", "negatives flagged",
                   "null (half A)", "null held out (half B)"], rows)
    out += ["", "## What the numbers say", ""]
    emb = r["methods"]["embedding"]
    default = next(m for rule, m in emb.items() if rule.startswith("default"))
    surv, rank = r["survival"], r["planted_rank_under_minilm"]
    out += [f"- With the default rule (all-MiniLM-L6-v2 top {cfg['k']} + the verifier at its default threshold) "
            f"{pct(default['recall'])} of the planted translations are found, {pct(default['false_flags'])} of the "
            "negatives flagged. The translations localise names (every name of the original kept in "
            f"{min(v['every_name']['rate'] or 0 for v in surv.values()):.0%}-"
            f"{max(v['every_name']['rate'] or 0 for v in surv.values()):.0%} of them, by language) and keep every "
            f"number in {min(v['every_number']['rate'] for v in surv.values()):.0%}-"
            f"{max(v['every_number']['rate'] for v in surv.values()):.0%}; and the English embedder gives the "
            f"planted translation a cosine at or above the 0.5 floor in {floor_share(rank)} (median cosine "
            f"{min(v['cosine_median'] for v in rank.values()):.2f}-{max(v['cosine_median'] for v in rank.values()):.2f}"
            " by language). A multilingual embedder would lift the cosines; the names a localised translation "
            "changes would still cost the verifier's score."]
    for name in ("anchors", "anchors_numbers"):
        rules = r["methods"][name]
        cal = rules["from the null at 1%"]
        loose = min((m for rule, m in rules.items() if rule.startswith("fixed")), key=lambda m: m["threshold"])
        out.append(f"- {LABELS[name]}: at the threshold the null sets at 1%, {pct(cal['recall'])} found; at "
                   f"{loose['threshold']:g}, {pct(loose['recall'])} found and {pct(loose['false_flags'])} of the "
                   "negatives flagged. The numbers a translation keeps do not tell it from a same-template sibling "
                   "(a template's fixed numbers and small ones are in every sibling, and a window of several "
                   "problems pools their numbers).")
    out += ["", "Recall by language (threshold from the null):", ""]
    rows = []
    for name, rules in r["methods"].items():
        m = rules.get("from the null at 1%") or next(iter(rules.values()))
        rows.append([LABELS.get(name, name)] + [pct(m["recall_by_language"][lg]) for lg in langs])
    out += _table(["method"] + langs, rows)
    out += ["", f"Seconds: {r['seconds']}.", ""]
    return "\n".join(out)
