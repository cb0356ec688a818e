"""Per task and model, the numbers `tidemark impact` reports (report.json's `tasks`) and the rows of items.parquet:
the scores aligned to the task's items, the splits from the evidence (jobs/parts/impact/join.py), and the
statistics of scoring/impact/ on them.

A task's items are every item any model of --results was scored on; a model that lacks one has a missing score
there (dropped from its statistics and counted). The full score is over every scored item; the splits, the gap
and the difference-in-differences are over the items the evidence matched (`unmatched` ones are counted apart).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

REF_PREFIX = "ref:"


def scores_of(results: pa.Table, task: str, model: str, ids: list[str]) -> np.ndarray:
    t = results.filter(pc.and_(pc.equal(results.column("task"), task), pc.equal(results.column("model"), model)))
    got = dict(zip(t.column("item").to_pylist(), t.column("score").to_pylist()))
    return np.array([got.get(i, np.nan) for i in ids], dtype=np.float64)


def models_of(results: pa.Table, task: str) -> list[str]:
    t = results.filter(pc.equal(results.column("task"), task))
    return sorted(set(t.column("model").to_pylist()))


def reference_task(cfg, task: str, tasks: list[str], own_tasks: list[str] | None = None) -> str | None:
    """The task of another results set that pairs with a task of --results: --task-map's, else the same name, else
    the only one. ConStat's reference benchmark (`own_tasks` None): a --task-map entry that names no task there
    pairs nothing, and its only task pairs with every benchmark task. --reference-results (`own_tasks` the target's
    tasks): an entry that names none of its tasks is passed over (it may be ConStat's), and the only-task rule needs
    one task on each side (a plain file's task is its file's stem, so `target.jsonl` and `ref.jsonl` pair)."""
    pairs = dict(p.split("=", 1) for p in (cfg.task_map or []) if "=" in p)
    if task in pairs and (pairs[task] in tasks or own_tasks is None):
        return pairs[task] if pairs[task] in tasks else None
    if task in tasks:
        return task
    return tasks[0] if len(tasks) == 1 and (own_tasks is None or len(own_tasks) == 1) else None


def reference_pairs(cfg, results: pa.Table, ref_res: pa.Table) -> dict[str, str | None]:
    """Each task of --results -> its task in --reference-results (None where none pairs). A reference that shares no
    task or no item with the target is an input error (ValueError: one line, exit 2), not a null in the report."""
    tasks = sorted(set(results.column("task").to_pylist()))
    ref_tasks = sorted(set(ref_res.column("task").to_pylist()))
    pairs = {t: reference_task(cfg, t, ref_tasks, tasks) for t in tasks}
    if not any(pairs.values()):
        raise ValueError(f"--reference-results share no task with --results (results: {tasks}; reference results: "
                         f"{ref_tasks}); pair them with --task-map TASK=REFERENCE_TASK")
    shared = 0
    for t, r in pairs.items():
        if r:
            ids = set(results.filter(pc.equal(results.column("task"), t)).column("item").to_pylist())
            shared += len(ids & set(ref_res.filter(pc.equal(ref_res.column("task"), r)).column("item").to_pylist()))
    if not shared:
        paired = ", ".join(f"{t} -> {r}" for t, r in pairs.items() if r)
        raise ValueError(f"--reference-results hold none of the items of --results (tasks paired: {paired}; items "
                         "are matched by id: give both files the same `id`s)")
    return pairs


def reference_shortfall(task: str, rtask: str | None, refs: np.ndarray | None, references: list[str],
                        ref_tasks: list[str]) -> tuple[dict, str | None]:
    """(what the reference results lack of a task's items, per model; the reason a difference-in-differences
    cannot be computed from them, or None)."""
    if rtask is None:
        return {}, (f"the reference results hold no task paired with {task!r} (their tasks: {ref_tasks}); pair them "
                    "with --task-map TASK=REFERENCE_TASK")
    n = refs.shape[1]
    missing = {r: int((~np.isfinite(row)).sum()) for r, row in zip(references, refs)}
    empty = [r for r, k in missing.items() if k == n]
    if empty and len(empty) == len(references):
        return missing, f"the reference results ({rtask}) hold none of this task's {n:,} items"
    if empty:
        return missing, f"reference model {empty[0]} holds none of this task's {n:,} items ({rtask})"
    return missing, None


def split_numbers(scores: np.ndarray, split: np.ndarray, refs: np.ndarray | None, cfg) -> dict:
    """The clean-subset score beside the full one, each split's score (and each leaked split's own gap to clean,
    with its test), the gap of every leaked item to clean and its test, and (with reference models) the
    difference-in-differences."""
    from scoring.impact.splits import SPLITS
    from scoring.impact.stats import clean_vs_full, difference_in_differences, gap_test, mean_ci

    boot = {"n_boot": cfg.bootstrap, "seed": cfg.seed}
    matched = split != "unmatched"
    clean = split == "clean"
    full = clean_vs_full(scores, clean, **boot)
    out = {"n": int(np.isfinite(scores).sum()), "n_unmatched": int((~matched).sum()),
           "full_score": full["full_score"], "full_ci": mean_ci(scores, **boot)["ci"],
           "clean_score": full["clean_score"], "clean_ci": full["clean_ci"], "full_minus_clean": full["diff"],
           "full_minus_clean_ci": full["diff_ci"], "relative_change": full["relative_change"], "splits": []}
    for name in SPLITS:
        mask = split == name
        if mask.any():
            m = mean_ci(scores[mask], **boot)
            entry = {"split": name, "n": m["n"], "score": m["mean"], "ci_low": m["ci"][0] if m["ci"] else None,
                     "ci_high": m["ci"][1] if m["ci"] else None, "method": m["method"]}
            if name != "clean":  # this split against clean alone: what a rephrase adds apart from verbatim copies
                pair = mask | clean
                g = gap_test(scores[pair], mask[pair], permutations=cfg.permutations, **boot)
                entry.update({k: g[k] for k in ("gap", "gap_ci", "p_value", "p_method")})
            out["splits"].append(entry)
    leaked = matched & ~clean
    g = gap_test(scores[matched], leaked[matched], permutations=cfg.permutations, **boot)
    out.update(gap=g["gap"], gap_ci=g["gap_ci"], p_value=g["p_value"], p_method=g["p_method"],
               n_leaked=g["n_leaked"], n_clean=g["n_clean"], gap_reason=g.get("reason"))
    if refs is not None and refs.size:
        d = difference_in_differences(scores[matched], refs[:, matched], leaked[matched], **boot)
        out.update(did=d["did"], did_ci=d["did_ci"], reference_gap=d["reference_gap"],
                   reference_gaps=d["reference_gaps"], did_reason=d.get("reason"), did_n_dropped=d["n_dropped"])
    return out


def constat_numbers(cfg, model: str, task: str, ids: list[str], read: dict, references: list[str],
                    ref_results_task: str) -> dict:
    """ConStat for one target model on one task (`ref_results_task`: the task's name in --reference-results)."""
    from scoring.impact.constat import constat

    results, ref_res = read["results"][0], read["reference"][0] if read["reference"] else None
    refbench = read["reference_benchmark"][0]
    ref_tasks = sorted(set(refbench.column("task").to_pylist()))
    rtask = reference_task(cfg, task, ref_tasks)
    if rtask is None:
        return {"constat_reason": f"no reference-benchmark task for {task!r} (tasks there: {ref_tasks}; use "
                                  "--task-map BENCH=REFERENCE)"}
    r_ids = sorted(set(refbench.filter(pc.equal(refbench.column("task"), rtask)).column("item").to_pylist()))
    bench = {model: scores_of(results, task, model, ids)}
    for r in references:
        bench[r] = scores_of(ref_res, ref_results_task, r, ids) if ref_res is not None else np.full(len(ids), np.nan)
    reference = {m: scores_of(refbench, rtask, m, r_ids) for m in [model, *references]}
    missing = [m for m in [model, *references] if not np.isfinite(reference[m]).any() or not np.isfinite(bench[m]).any()]
    if missing:
        return {"constat_reason": f"no scores for {missing} on {task!r} or on the reference task {rtask!r}"}
    try:
        c = constat(bench, reference, model, references, n_boot=cfg.constat_bootstrap, seed=cfg.seed)
    except ValueError as exc:
        return {"constat_reason": str(exc)}
    return {"constat_inflation": c["inflation"], "constat_ci": c["ci"], "constat_p": c["p_value"],
            "constat": {**c, "reference_task": rtask}}


def chosen_references(cfg, read: dict) -> list[str]:
    ref = read["reference"][0] if read["reference"] else None
    available = sorted(set(ref.column("model").to_pylist())) if ref is not None else []
    if cfg.reference_models:
        named = [m.strip() for m in cfg.reference_models.split(",") if m.strip()]
        unknown = [m for m in named if m not in available]
        if unknown:
            raise ValueError(f"--reference-models {unknown} are not models of --reference-results ({available})")
        return named
    return available


def measure_tasks(cfg, read: dict, sources: list[dict], methods: set[str]) -> tuple[list[dict], list[pa.Table], dict]:
    """(one record per task and model, items.parquet's tables, per task each evidence source's join facts)."""
    from jobs.parts.impact.join import label_items, task_items

    results = read["results"][0]
    ref_res = read["reference"][0] if read["reference"] else None
    references = chosen_references(cfg, read)
    pairs = reference_pairs(cfg, results, ref_res) if ref_res is not None and references else {}
    ref_tasks = sorted(set(ref_res.column("task").to_pylist())) if ref_res is not None else []
    records, tables, matching = [], [], {}
    for task in sorted(set(results.column("task").to_pylist())):
        items = task_items(results, task)
        ids = items.column("item").to_pylist()
        labelled, split = None, np.full(len(ids), "unmatched", dtype=object)
        if "splits" in methods:
            labelled, matching[task] = label_items(items, sources, cfg.join)
            split = np.asarray(labelled.column("split").to_pylist(), dtype=object)
        rtask = pairs.get(task)
        refs = (np.vstack([scores_of(ref_res, rtask, r, ids) for r in references]) if rtask
                else np.full((len(references), len(ids)), np.nan)) if pairs else None
        missing, shortfall = reference_shortfall(task, rtask, refs, references, ref_tasks) if pairs else ({}, None)
        for model in models_of(results, task):
            scores = scores_of(results, task, model, ids)
            rec = {"task": task, "model": model, "metric": _facts(read, task, model, "metric"),
                   "filter": _facts(read, task, model, "filter")}
            if "splits" in methods:
                rec.update(split_numbers(scores, split, refs, cfg),
                           answer_checked=any(src["role"] == "answer" for src in sources))
                if refs is not None:
                    rec.update(reference_models=references, reference_task=rtask, reference_missing=missing)
                    if rec.get("did") is None and shortfall:
                        rec["did_reason"] = shortfall
            else:
                rec.update(n=int(np.isfinite(scores).sum()), full_score=float(np.nanmean(scores)))
            if "constat" in methods:
                rec.update(constat_numbers(cfg, model, task, ids, read, references, rtask or task))
            records.append(rec)
            cols = {"task": [task] * len(ids), "model": [model] * len(ids), "item": ids,
                    "split": [str(s) for s in split], "score": scores}
            if labelled is not None:
                cols.update({c: labelled.column(c) for c in labelled.column_names if c not in ("item", "split")})
            for r, row in zip(references, refs if refs is not None else []):
                cols[REF_PREFIX + r] = row
            tables.append(pa.table(cols))
    return records, tables, matching


def _facts(read: dict, task: str, model: str, key: str):
    for f in read["results"][2]:
        if f.get("task") == task and f.get("model") == model and f.get(key) is not None:
            v = f[key]
            return v[0] if isinstance(v, list) and len(v) == 1 else v
    return None


def write_items(tables: list[pa.Table], path) -> None:
    """items.parquet: one row per task, model and item (schemas differ between tasks: promoted to one)."""
    from curation.io.atomic import atomic_write_parquet

    if not tables:
        return
    table = pa.concat_tables(tables, promote_options="default")
    atomic_write_parquet(table, path)
