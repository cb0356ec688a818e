"""Does `tidemark cutoff` find a cutoff that is there, and only then? (`make bench`'s `cutoff`; also
`python -m bench.cutoff_bench --out DIR [--quick]`)

Every model is a tiny GPT-2 trained here on a controlled dated study (scoring/studies/dated.py: real SOTU and
Python-documentation passages, dated by the study), so the month it read last is known; every answer is the real
job (`run_cutoff`, the local runner) on the model's scores.

1. Recovery: models trained on the months up to M of two sources: the cutoff per source and detector, its CI, p.
2. The null: models trained on every month and on none. Their own p, then the false-positive rate of p_no_cutoff
   over re-drawn null sets: the months' rows re-drawn at random from each month's scored rows (twice as many as a
   set holds), as the canary bench re-draws its coins, with Wilson intervals.
3. A step in the texts: Python's documentation in topic order (each month a topic or two) under a model that read
   none of it, without and with a reference model that also read none (`--ref-model`): what the differential does.
4. Versions: documents with a version per month (edits that add and remove text), a model trained on month M's
   versions: the most familiar month, its CI and p; and a model trained on no version.
5. Text only: a model that memorised its training months, served by the loopback server with sampling and no
   log-probabilities; `--api-logprobs none` with ngram_coverage per month.
What it cannot say: how sharp a real model's cutoff is (a real crawl mixes months), nor how a real source drifts.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

FULL = {"months": 24, "cut": 11, "per_month": 12, "spare": 12, "words": 48, "steps": 600, "repeats": 4,
        "background": 150, "seeds": (0, 1, 2), "null_seeds": (0, 1), "redraws": 300, "permutations": 9999,
        "bootstrap": 1000, "versions": {"groups": 60, "months": 12, "cut": 6, "words": 96, "steps": 600},
        "text_only": {"months": 10, "cut": 4, "per_month": 4, "words": 48, "repeats": 20, "steps": 400,
                      "samples": 5}}
QUICK = {"months": 14, "cut": 6, "per_month": 8, "spare": 8, "words": 40, "steps": 300, "repeats": 4,
         "background": 80, "seeds": (0,), "null_seeds": (0,), "redraws": 60, "permutations": 999, "bootstrap": 200,
         "versions": {"groups": 30, "months": 8, "cut": 4, "words": 96, "steps": 300},
         "text_only": {"months": 8, "cut": 3, "per_month": 3, "words": 40, "repeats": 20, "steps": 120,
                       "samples": 3}}
METHODS = "min_k_pp,loss"


def log(msg: str) -> None:
    print(f"[cutoff-bench] {msg}", file=sys.stderr, flush=True)


def wilson(k: int, n: int) -> list[float]:
    from scoring.stats.proportions import wilson_ci

    return [round(x, 4) for x in wilson_ci(k, n)]


def measure(dated: str, model: str, out: Path, cfg: dict, **kw) -> dict:
    """The real job on a study; returns report.json."""
    from jobs.commands.cutoff import CutoffConfig, run_cutoff

    run_cutoff(CutoffConfig(texts=dated, model=model, out=str(out), progress=False, runner="local",
                            permutations=cfg["permutations"], bootstrap=cfg["bootstrap"],
                            **{"methods": METHODS, **kw}))
    return json.loads((out / "report.json").read_text())


def answers(report: dict) -> list[dict]:
    """One record per source and detector."""
    out = []
    for s in report["sources"]:
        for det, a in [(s["detector"], s), *s["detectors"].items()]:
            out.append({"source": s["source"], "detector": det, "cutoff": a["cutoff"], "cutoff_ci": a["cutoff_ci"],
                        "best": a["best_break"], "p": a["p_no_cutoff"], "differential": a["differential"],
                        "at_range_edge": a.get("at_range_edge")})
    return out


def months_off(a: str | None, b: str) -> int | None:
    from scoring.cutoff.periods import month_of

    return None if a is None else month_of(a) - month_of(b)


def study(work: Path, cfg: dict, seed: int, cutoff, **kw) -> dict:
    from jobs.kit.dated_studies import build_study

    return build_study(work, months=cfg["months"], cutoff=cutoff, per_month=cfg["per_month"], words=cfg["words"],
                       train_steps=cfg["steps"], repeats=cfg["repeats"], background=cfg["background"], seed=seed,
                       **kw)


def recovery(cfg: dict, work: Path) -> list[dict]:
    runs = []
    for seed in cfg["seeds"]:
        s = study(work / f"recovery-{seed}", cfg, seed, cfg["cut"])
        truth = s["truth"]["cutoff"]
        rep = measure(s["dated"], s["model"], work / f"recovery-{seed}" / "out", cfg, seed=seed)
        for a in answers(rep):
            lo_hi = a["cutoff_ci"]
            runs.append({**a, "seed": seed, "truth": truth, "months_off": months_off(a["cutoff"], truth),
                         "ci_covers": bool(lo_hi and lo_hi[0] <= truth <= lo_hi[1])})
        log(f"recovery seed {seed}: truth {truth}; " + "; ".join(f"{a['source']}/{a['detector']} {a['cutoff']} "
                                                               f"{a['cutoff_ci']} p={a['p']:.2g}" for a in answers(rep)))
    return runs


def redrawn(rows_path: Path, cfg: dict, seed: int, label: str) -> list[dict]:
    """p_no_cutoff on `redraws` re-drawn null sets, per source and detector."""
    from dataclasses import replace

    import pyarrow.parquet as pq

    from scoring.cutoff.breakpoint import CutoffSettings, estimate_break
    from scoring.cutoff.estimate import differential, score_columns
    from scoring.cutoff.periods import month_of
    from scoring.studies.dated import redraw

    table = pq.read_table(rows_path)
    rows = table.select(["source", "period"]).to_pylist()
    months = np.array([month_of(r["period"]) for r in rows])
    sources = np.array([r["source"] for r in rows])
    rng = np.random.default_rng([seed, 11])
    settings = CutoffSettings(permutations=999, bootstrap=50, seed=seed)
    ps: dict = {}
    for k in range(cfg["redraws"]):
        idx = np.asarray(redraw(rows, cfg["per_month"], rng))
        for col in score_columns(table):
            scores, _ = differential(table, col)
            for src in sorted(set(sources)):
                pick = idx[sources[idx] == src]
                res = estimate_break(months[pick], scores[pick], replace(settings, seed=k))
                ps.setdefault((src, col), []).append(res["p_no_cutoff"])
    out = []
    for (src, col), p in sorted(ps.items()):
        p = np.asarray(p)
        out.append({"model": label, "source": src, "detector": col, "redraws": int(p.size),
                    **{f"p_below_{a}": round(float((p < a).mean()), 4) for a in (0.05, 0.01)},
                    **{f"p_below_{a}_ci": wilson(int((p < a).sum()), p.size) for a in (0.05, 0.01)},
                    "p_values": [round(float(x), 4) for x in p]})
    return out


def reference(rows: list[dict], cfg: dict, sources, seed: int, path: Path) -> str:
    """A reference model of the same family that read none of the months: trained on other passages of the same
    sources (none of the dated ones), with another seed."""
    from jobs.kit.studies import train_tiny_gpt2
    from scoring.studies.contamination import torch_threads
    from scoring.studies.dated import source_passages

    dated = {r["text"] for r in rows}
    rng = np.random.default_rng(seed + 100)
    texts = []
    for source in sources:
        other = [t for t in source_passages(source, cfg["words"]) if t not in dated]
        texts += [other[i] for i in rng.permutation(len(other))[:cfg["background"] * 2]]
    with torch_threads(1):
        return train_tiny_gpt2(texts, path, steps=cfg["steps"], seed=seed + 100, context=64, batch_size=8)["path"]


def nulls(cfg: dict, work: Path) -> dict:
    """Models trained on every month and on none; each scored alone and minus a reference that read none."""
    own, rates = [], []
    for seed in cfg["null_seeds"]:
        ref = None
        for label, cutoff in (("every month", cfg["months"] - 1), ("no month", None)):
            d = work / f"null-{label.split()[0]}-{seed}"
            s = study(d, cfg, seed, cutoff, spare=cfg["spare"])
            ref = ref or reference(s["rows"], cfg, ("sotu", "pydoc"), seed, work / f"null-reference-{seed}")
            for scores, kw in (("target alone", {}), ("target minus reference", {"ref_model": ref})):
                out = d / ("out" if not kw else "out-ref")
                rep = measure(s["dated"], s["model"], out, cfg, seed=seed, **kw)
                own += [{**a, "model": label, "scores": scores, "seed": seed} for a in answers(rep)]
                rates += [{**r, "scores": scores, "seed": seed} for r in redrawn(out / "rows.parquet", cfg, seed, label)]
                log(f"null ({label}, {scores}, seed {seed}): " + "; ".join(
                    f"{a['source']}/{a['detector']} p={a['p']:.2g}" for a in answers(rep)))
    return {"own": own, "redrawn": rates}


def text_step(cfg: dict, work: Path) -> dict:
    """pydoc in topic order under models that read none of it: raw scores, then the differential."""
    d = work / "text-step"
    s = study(d, cfg, 0, None, sources=("pydoc",), in_source_order=("pydoc",), spare=cfg["spare"])
    ref = reference(s["rows"], cfg, ("pydoc",), 0, d / "reference")
    out = {}
    for label, kw in (("target alone", {}), ("target minus reference", {"ref_model": ref})):
        rep = measure(s["dated"], s["model"], d / label.split()[-1], cfg, **kw)
        out[label] = {"answers": answers(rep),
                      "redrawn": redrawn(d / label.split()[-1] / "rows.parquet", cfg, 0, label)}
        log(f"text step, {label}: " + "; ".join(f"{a['detector']} {a['cutoff']} p={a['p']:.2g}"
                                                for a in answers(rep)))
    return out


def versions(cfg: dict, work: Path) -> list[dict]:
    """A model trained on month M's versions and one trained on none, each scored alone and minus a reference model
    that read no version."""
    from jobs.kit.dated_studies import build_study

    v = cfg["versions"]
    runs, ref = [], None
    for label, cut in (("trained on one month's versions", v["cut"]), ("trained on no version", None)):
        d = work / f"versions-{cut}"
        s = build_study(d, kind="versions", months=v["months"], cutoff=cut, groups=v["groups"], words=v["words"],
                        train_steps=v["steps"], repeats=cfg["repeats"], background=cfg["background"])
        ref = ref or reference(s["rows"], {**cfg, "words": v["words"]}, ("sotu",), 0, work / "versions-reference")
        truth = s["truth"]["cutoff"]
        for scores, kw in (("target alone", {}), ("target minus reference", {"ref_model": ref})):
            rep = measure(s["dated"], s["model"], d / ("out" if not kw else "out-ref"), cfg, **kw)
            for a in answers(rep):
                runs.append({**a, "model": label, "scores": scores, "truth": truth,
                             "months_off": months_off(a["best"], truth) if truth else None,
                             "ci_covers": bool(truth and a["cutoff_ci"]
                                               and a["cutoff_ci"][0] <= truth <= a["cutoff_ci"][1])})
            log(f"versions ({label}, {scores}): truth {truth}; " + "; ".join(
                f"{a['detector']} {a['cutoff']} {a['cutoff_ci']} p={a['p']:.2g}" for a in answers(rep)))
    return runs


def text_only(cfg: dict, work: Path) -> list[dict]:
    """A memorising model behind the loopback server (sampling, no log-probabilities), ngram_coverage per month."""
    from bench.loopback_runs import serve
    from jobs.kit.dated_studies import build_study

    t = cfg["text_only"]
    d = work / "text-only"
    s = build_study(d, months=t["months"], cutoff=t["cut"], per_month=t["per_month"], words=t["words"],
                    sources=("sotu",), background=0, repeats=t["repeats"], train_steps=t["steps"],
                    train={"vocab_size": 1000, "context": 128, "positions": 512})
    proc, url = serve(s["model"])
    try:
        rep = measure(s["dated"], "bench", d / "out", cfg, api_base=url, api_logprobs="none", methods="ngram_coverage",
                      samples=t["samples"], min_side=2)
    finally:
        proc.kill()
    truth = s["truth"]["cutoff"]
    runs = [{**a, "truth": truth, "months_off": months_off(a["cutoff"], truth),
             "ci_covers": bool(a["cutoff_ci"] and a["cutoff_ci"][0] <= truth <= a["cutoff_ci"][1])}
            for a in answers(rep)]
    log(f"text only: truth {truth}; " + "; ".join(f"{a['cutoff']} {a['cutoff_ci']} p={a['p']:.2g}" for a in runs))
    return runs


def run_bench(cfg: dict, work: Path) -> dict:
    t0 = time.perf_counter()
    work.mkdir(parents=True, exist_ok=True)
    res = {"config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()}}
    for name, fn in (("recovery", recovery), ("null", nulls), ("text_step", text_step), ("versions", versions),
                     ("text_only", text_only)):
        t = time.perf_counter()
        res[name] = fn(cfg, work)
        res[f"{name}_seconds"] = round(time.perf_counter() - t, 1)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def pooled_rates(res: dict) -> dict:
    """Per kind of scores (alone, minus reference): the share of p < 0.05 and < 0.01 over every null model, source,
    detector and re-drawn set, with Wilson intervals (sets drawn from one model's pool are not independent of
    each other: the pooled share averages over pools, the per-pool rows show how much one pool can move it)."""
    pooled: dict = {}
    for r in res["null"]["redrawn"]:
        pooled.setdefault(r["scores"], []).extend(r["p_values"])
    out = {}
    for scores, ps in pooled.items():
        ps = np.asarray(ps)
        out[scores] = {"sets": int(ps.size), "p_values": ps,
                       **{f"p_below_{a}": float((ps < a).mean()) for a in (0.05, 0.01)},
                       **{f"p_below_{a}_ci": wilson(int((ps < a).sum()), ps.size) for a in (0.05, 0.01)}}
    return out


def _fmt(a: dict) -> str:
    ci = f"[{a['cutoff_ci'][0]}, {a['cutoff_ci'][1]}]" if a.get("cutoff_ci") else "-"
    return f"{a['cutoff'] or 'none'} | {ci} | {a['p']:.2g}"


def markdown(res: dict) -> str:
    cfg = res["config"]
    lines = [f"Recovery: tiny GPT-2s trained on the months up to M of two sources ({cfg['per_month']} passages of "
             f"{cfg['words']} words a month and source, {cfg['months']} months, each trained passage seen "
             f"{cfg['repeats']}x in {cfg['steps']} steps); alpha 0.01:", "",
             "| seed | source | detector | true M | cutoff | 95% CI | p_no_cutoff | months off | CI covers M |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in res["recovery"]:
        lines.append(f"| {r['seed']} | {r['source']} | {r['detector']} | {r['truth']} | {_fmt(r)} | "
                     f"{r['months_off'] if r['months_off'] is not None else '-'} | {'yes' if r['ci_covers'] else 'no'} |")
    lines += ["", "The null: models trained on every month or on none, scored alone and minus a reference model that "
              "read none of the months; their own p, then p_no_cutoff on "
              f"{cfg['redraws']} re-drawn null sets ({cfg['per_month']} of each month's {cfg['per_month'] + cfg['spare']} "
              "scored passages; Wilson 95% intervals):", "",
              "| model | scores | seed | source | detector | own cutoff | own p | share p < 0.05 | share p < 0.01 |",
              "|---|---|---|---|---|---|---|---|---|"]
    own = {(a["model"], a["scores"], a["seed"], a["source"], a["detector"]): a for a in res["null"]["own"]}
    for r in res["null"]["redrawn"]:
        a = own[(r["model"], r["scores"], r["seed"], r["source"], r["detector"])]
        lines.append(f"| {r['model']} | {r['scores']} | {r['seed']} | {r['source']} | {r['detector']} | "
                     f"{a['cutoff'] or 'none'} | "
                     f"{a['p']:.2g} | {r['p_below_0.05']:.3f} [{r['p_below_0.05_ci'][0]:.3f}, "
                     f"{r['p_below_0.05_ci'][1]:.3f}] | {r['p_below_0.01']:.3f} [{r['p_below_0.01_ci'][0]:.3f}, "
                     f"{r['p_below_0.01_ci'][1]:.3f}] |")
    for scores, r in pooled_rates(res).items():
        lines.append(f"\nPooled, {scores}: p < 0.05 in {r['p_below_0.05']:.3f} [{r['p_below_0.05_ci'][0]:.3f}, "
                     f"{r['p_below_0.05_ci'][1]:.3f}] and p < 0.01 in {r['p_below_0.01']:.3f} "
                     f"[{r['p_below_0.01_ci'][0]:.3f}, {r['p_below_0.01_ci'][1]:.3f}] of {r['sets']:,} re-drawn "
                     "sets (source x detector x model x seed).")
    lines += ["", "A step in the texts (Python's documentation in topic order, a model that read none of it):", "",
              "| scores | detector | cutoff | 95% CI | p | share of re-drawn sets with p < 0.01 |", "|---|---|---|---|---|---|"]
    for label, v in res["text_step"].items():
        rates = {r["detector"]: r for r in v["redrawn"]}
        for a in v["answers"]:
            lines.append(f"| {label} | {a['detector']} | {_fmt(a)} | {rates[a['detector']]['p_below_0.01']:.3f} |")
    lines += ["", "Versions (each document edited every month, whole sentences replaced; one model trained on month M's "
              "versions, one on none; each scored alone and minus a reference model that read no version):", "",
              "| model | scores | detector | true M | most familiar month | 95% CI | p | CI covers M |",
              "|---|---|---|---|---|---|---|---|"]
    for r in res["versions"]:
        lines.append(f"| {r['model']} | {r['scores']} | {r['detector']} | {r['truth'] or '-'} | {r['best']} | "
                     f"{'[' + ', '.join(r['cutoff_ci']) + ']' if r['cutoff_ci'] else '-'} | {r['p']:.2g} | "
                     f"{'yes' if r['ci_covers'] else ('-' if not r['truth'] else 'no')} |")
    lines += ["", "Text only (loopback server, sampling, no log-probabilities; ngram_coverage per month):", "",
              "| detector | true M | cutoff | 95% CI | p | CI covers M |", "|---|---|---|---|---|---|"]
    for r in res["text_only"]:
        lines.append(f"| {r['detector']} | {r['truth']} | {_fmt(r)} | {'yes' if r['ci_covers'] else 'no'} |")
    return "\n".join(lines) + "\n"


def plot(res: dict, path: Path) -> None:
    from scoring.reports.figures import png_bytes, pyplot

    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4))
    off = [r["months_off"] for r in res["recovery"] if r["months_off"] is not None]
    missed = sum(r["months_off"] is None for r in res["recovery"])
    a.hist(off, bins=np.arange(-4.5, 5.5), color="#4477aa", alpha=0.8)
    a.set_xlabel("estimated cutoff - true cutoff (months)")
    a.set_ylabel("answers (seed x source x detector)")
    a.set_title(f"Recovery ({missed} answer(s) found no cutoff)", fontsize=10)
    bins = np.linspace(0, 1, 21)
    for scores, r in pooled_rates(res).items():
        b.hist(r["p_values"], bins=bins, histtype="step", lw=1.5, density=True,
               label=f"{scores}: p<0.05 in {r['p_below_0.05']:.1%}, p<0.01 in {r['p_below_0.01']:.1%}")
    b.axhline(1.0, color="grey", lw=0.8, ls=":")
    b.set_xlabel("p_no_cutoff on re-drawn null sets")
    b.set_ylabel("density (uniform = 1)")
    b.set_title("Null models (every month, no month), re-drawn sets", fontsize=10)
    b.legend(fontsize=6)
    fig.tight_layout()
    path.write_bytes(png_bytes(fig))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cutoff_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--work", default="/tmp/tidemark-cutoff-bench")
    args = ap.parse_args(argv)
    from bench.common import environment, load_average

    env = environment("cpu")
    res = run_bench(QUICK if args.quick else FULL, Path(args.work))
    write_outputs(res, Path(args.out), env, args.quick, load_average())
    print(markdown(res))
    return 0


def write_outputs(res: dict, out: Path, env: dict, quick: bool, load) -> None:
    from bench.common import write_json

    out.mkdir(parents=True, exist_ok=True)
    write_json(out, "cutoff", {"name": "cutoff", "quick": quick, "environment": env, "load_average_after": load,
                               **res})
    (out / "cutoff.md").write_text(markdown(res))
    plot(res, out / "cutoff.png")


if __name__ == "__main__":
    sys.exit(main())
