"""`make bench`'s summary.md: every benchmark's headline numbers as Markdown, from the results dicts bench/run.py
collected (this run's, and those already in --out for benchmarks a --only run left out)."""
from __future__ import annotations

import sys


def throughput_cell(r: dict) -> str:
    if "error" in r:
        return "failed: " + r["error"].split(":")[0]
    return f"{r['tokens_per_s']:,.0f} ({r['speedup_vs_reference_b1']:.2f}×)"


def _mb(x) -> str:
    return "—" if x is None else f"{x / 1e6:,.1f}"


def render_summary(results: dict, errors: dict, total: float, args) -> str:
    any_env = next((r["environment"] for r in results.values() if r.get("environment")), None)
    lines = ["# Tidemark benchmarks" + (" (quick sanity run)" if args.quick else ""), ""]
    if any_env:
        lines += [f"- device: {any_env['device_name']}; torch {any_env['torch']}, transformers "
                  f"{any_env['transformers']}; {any_env['torch_threads']} torch threads",
                  f"- when: {any_env['timestamp']}; commit {any_env['git']['commit']}"
                  + (" (with uncommitted changes)" if any_env["git"]["dirty"] else ""),
                  f"- command: `python -m bench.run {' '.join(sys.argv[1:])}`; total {total:.0f} s"]
        loads = [r["environment"]["load_average"] for r in results.values()
                 if (r.get("environment") or {}).get("load_average")]
        cpus = any_env["cpu_count"] or 1
        if loads and max(l[0] for l in loads) > cpus:
            lines.append(f"- **measured under concurrent load**: 1-minute load average up to "
                         f"{max(l[0] for l in loads):.1f} on {cpus} CPUs; compare ratios within this run only")
        lines.append("")
    for name, err in errors.items():
        lines += [f"**{name} failed**: `{err}`", ""]
    if "throughput" in results:
        lines += ["## Scorer throughput (tokens/s; speed-up vs the batch-1 reference loop)", ""]
        for res in results["throughput"]["models"]:
            methods = list(res["cells"][0]["methods"])
            lines += [f"**{res['model']}** — {res['params'] / 1e6:.2f}M params, vocab {res['vocab']}, {res['dtype']}, "
                      f"best of {res['repeats']}; batch sizes: " + ", ".join(
                          f"{m}={res['cells'][0]['methods'][m]['batch_size']}" for m in methods), "",
                      "| length | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
            for c in res["cells"]:
                cell = c["cell"] if c["cell"] != "mixed" else (
                    f"mixed ({c['n_seqs']} seqs, median {c['length_median']:.0f}, max {c['length_max']})")
                lines.append(f"| {cell} | " + " | ".join(throughput_cell(c["methods"][m]) for m in methods) + " |")
            worst = max(r["max_abs_diff_vs_reference_first_seq"] for c in res["cells"] for r in c["methods"].values()
                        if "error" not in r)
            lines += ["", f"Largest |Δ| of any stat vs the reference loop (first sequence of each cell): {worst:.2e}",
                      ""]
        lines += ["Plot: `scorer_throughput.png`.", ""]
    if "memory" in results:
        mem = results["memory"]
        lines += ["## Peak memory of one micro-batch (MB above the weights; CPU, torch profiler)", "",
                  "| B × T | vocab | B×T×V fp32 | Tidemark peak | Tidemark largest tensor | naive padded peak |",
                  "|---|---|---|---|---|---|"]
        for m in mem["models"]:
            for r in m["rows"]:
                lines.append(f"| {r['batch']} × {r['length']} | {r['vocab']:,} | {_mb(r['btv_fp32_bytes'])} | "
                             f"{_mb(r['tidemark']['peak_bytes'])} | {_mb(r['tidemark']['largest_alloc_bytes'])} | "
                             + (_mb(r['naive_padded']['peak_bytes']) if 'peak_bytes' in r['naive_padded']
                                else r['naive_padded'].get('skipped', '—')) + " |")
        lines += ["", f"Tidemark never allocated a B×T×V fp32 tensor: **{mem['tidemark_never_allocated_btv_fp32']}**."]
        for f in mem["flatness"]:
            if "tidemark_peak_growth_over_those_vocabs" in f:
                lines.append(f"- B×T = {f['batch']}×{f['length']}: vocab ×{f['vocab_growth']} → Tidemark peak "
                             f"×{f['tidemark_peak_growth_over_those_vocabs']}")
        lines.append("")
    if "detectors" in results:
        d = results["detectors"]
        lines += ["## Single-pass detectors: all seven vs `loss` alone", "",
                  f"{d['texts']} passages, {d['tokens']:,} tokens, model {d['params'] / 1e6:.2f}M params, scorer batch "
                  f"{d['scorer_batch_size']}.", "",
                  "| | loss alone (s) | all seven (s) | ratio |", "|---|---|---|---|",
                  f"| Tidemark (one forward, shared token stats) | {d['tidemark']['loss_only_s']:.2f} | "
                  f"{d['tidemark']['all_s']:.2f} | **{d['ratio_all_vs_loss_tidemark']:.3f}×** (target ≤ 1.3×) |",
                  f"| research style (one batch-1 forward per metric) | {d['research_style']['loss_only_s']:.2f} | "
                  f"{d['research_style']['all_s']:.2f} | {d['ratio_all_vs_loss_research_style']:.2f}× |", "",
                  f"All seven: Tidemark {d['speedup_all_tidemark_vs_research_style']:.1f}× faster than research style. "
                  "Largest score difference between the two: "
                  f"{max(v for v in d['max_abs_score_diff_research_vs_tidemark'].values() if v is not None):.1e}.", ""]
        if d.get("gradnorm"):
            g = d["gradnorm"]
            lines += [f"GradNorm (`gradnorm`, its gradient view: {g['passes_per_text']}): {g['seconds']:.2f} s for "
                      f"{g['texts']} texts, {g['seconds_per_1000_texts']:.1f} s per 1,000, {g['ratio_vs_loss']:.1f}× "
                      f"`loss` alone ({g['loss_passes_per_text']}).", ""]
    if "e2e" in results:
        e = results["e2e"]
        lines += ["## `tidemark evaluate` end to end vs a bare batch-1 loop", "",
                  f"{e['texts']} passages, {e['tokens']:,} tokens (mean {e['mean_tokens_per_text']}), "
                  f"{len(e['methods'])} detectors.", "",
                  "| | seconds | rows/s |", "|---|---|---|",
                  f"| `tidemark evaluate`, default runner ({e['evaluate'].get('runner', 'ray')}) | "
                  f"{e['evaluate']['seconds']:.1f} | {e['evaluate']['rows_per_s']:.1f} |",
                  *([f"| `tidemark evaluate --runner ray` (Ray start-up included) | "
                     f"{e['evaluate_ray']['seconds']:.1f} | {e['evaluate_ray']['rows_per_s']:.1f} |"]
                    if "evaluate_ray" in e else []),
                  f"| bare batch-1 loop (load + loop; faster of the runs before and after evaluate: "
                  f"{' s, '.join(f'{x:.1f}' for x in e['bare_loop_b1'].get('runs_s', []))} s) | "
                  f"{e['bare_loop_b1']['total_s']:.1f} | "
                  f"{e['bare_loop_b1']['rows_per_s']:.1f} |",
                  f"| bare Tidemark scorer, no Ray | {e['bare_scorer']['total_s']:.1f} | "
                  f"{e['texts'] / e['bare_scorer']['total_s']:.1f} |", "",
                  f"Ratio evaluate / bare loop: **{e['ratio_evaluate_vs_bare_loop']:.2f}×** (target ≤ 2.5×); "
                  f"evaluate / bare scorer: {e['ratio_evaluate_vs_bare_scorer']:.2f}×"
                  + (f"; `--runner ray` / bare loop: {e['ratio_evaluate_ray_vs_bare_loop']:.2f}×"
                     if "ratio_evaluate_ray_vs_bare_loop" in e else "") + ".", ""]
        if "as_processes" in e:
            p = e["as_processes"]
            lines += [f"As fresh processes (imports included): the loop script {p['bare_loop_s']:.1f} s, "
                      f"`tidemark evaluate` {p['evaluate_auto_s']:.1f} s ({e['ratio_as_processes']:.2f}×), with "
                      f"`--runner ray` {p['evaluate_ray_s']:.1f} s ({e['ratio_as_processes_ray']:.2f}×).", ""]
        if e["evaluate"].get("phases_s"):
            lines += ["Where `evaluate`'s time went (`run.json: phases_s`; the blind baseline runs in a helper process "
                      "during scoring, so its row is only the wait for it):", "",
                      "| phase | seconds |", "|---|---|"]
            lines += [f"| {k} | {v:.2f} |" for k, v in e["evaluate"]["phases_s"].items()] + [""]
    if "curation" in results:
        c = results["curation"]
        lines += ["## Curation throughput (one core)", "", f"{c['note']}.", "",
                  "| step | posts | seconds | posts/s | questions/s |", "|---|---|---|---|---|"]
        for label, r in (("parse (both passes, HTML stripped)", c["parse"]),
                         ("parse + row-level filters", c["parse_and_filter"])):
            lines.append(f"| {label} | {r['posts']} | {r['seconds']:.3f} | {r['posts_per_s']:,.0f} | "
                         f"{r['questions_per_s']:,.0f} |")
        lines.append("")
    if "shift_audit" in results:
        s = results["shift_audit"]
        lines += ["## Blind-baseline shift audit", "", f"{s['benchmark']}; {s['rows']:,} rows in buckets "
                  f"{s['buckets']}; classifiers {', '.join(s['classifiers'] or [])}; {s['n_folds']} grouped folds, "
                  f"{s['n_bootstrap']} bootstrap resamples.", "",
                  f"Wall time **{s['seconds']:.1f} s** (target < {s['target_seconds']} s), {s['rows_per_s']:,.0f} rows/s; "
                  f"blind AUC {s['blind_auc_overall']:.3f} overall.", ""]
    if "api" in results:
        a = results["api"]
        lines += ["## Scoring a served model (loopback API)", "", f"{a['model']}; {a['server']}.", "",
                  "| method | concurrency | rows | rows/s | calls/token | tokens/call | max abs lp error |",
                  "|---|---|---|---|---|---|---|"]
        for r in a["runs"]:
            lines.append(f"| {r['method']} | {r['concurrency'] or '-'} | {r['rows']} | {r['rows_per_s']:,.2f} | "
                         f"{r.get('calls_per_token', '-')} | {r.get('tokens_per_call', '-')} | "
                         f"{r.get('max_abs_lp_error', 0):.1e} |")
        lines.append("")
    if "paraphrase" in results:
        lines += ["## The paraphrased setting (AUC)", "", results["paraphrase"]["table_md"]]
    if "canary" in results:
        from bench.canary_bench import markdown as canary_md

        lines += ["## The canary test: false positives under the null, power against repetitions", "",
                  canary_md(results["canary"])]
    if "generation" in results:
        from bench.generation_bench import markdown as generation_md

        lines += ["## Text-only audits: known membership, the null, throughput, cost", "",
                  generation_md(results["generation"])]
    if "cutoff" in results:
        from bench.cutoff_bench import markdown as cutoff_md

        lines += ["## Training cutoffs: recovery, the null, a step in the texts, versions, text only", "",
                  cutoff_md(results["cutoff"])]
    if "impact" in results:
        from bench.impact_bench import markdown as impact_md

        lines += ["## Contamination impact: a leaked half of a benchmark, measured against the truth", "",
                  impact_md(results["impact"])]
    if "trace" in results:
        from bench.trace_bench import markdown as trace_md

        lines += ["## Tracing outputs to corpus documents: a model that read some passages many times, and a control",
                  "", trace_md(results["trace"])]
    if "chaos" in results:
        lines += ["## Node loss on a two-node Ray cluster", "",
                  "| scenario | fault at (s) | what the job did | seconds (clean) | lost | identical | counts |",
                  "|---|---|---|---|---|---|---|"]
        for name, r in results["chaos"]["scenarios"].items():
            if "skipped" in r:
                lines.append(f"| {name} | skipped: {r['skipped']} | | | | | |")
                continue
            lines.append(f"| {name} | {r['runs'][0]['fault_at_s']} | {r['outcome']} | {r['seconds']} "
                         f"({r['clean_seconds']}) | {r['seconds_lost']} | {r['identical_to_uninterrupted']} | "
                         f"{r['counts_reconcile']} |")
        lines.append("")
    return "\n".join(lines) + "\n"
