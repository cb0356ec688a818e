"""Debiased release mode: shrink what a blind classifier can see, keeping only real members and non-members.

Nothing is generated or paraphrased; rows are only edited (explicit dates removed or masked) or dropped, and every
dropped row carries a `reason` so the build can write it to its exclusion output. The levers, in order:

1. ``mask_dates``: remove (default) or mask explicit dates and years. Removal takes the preposition with it
   ("held in 2024, the" -> "held, the"), because a "[DATE]" token would itself separate classes whenever only one
   class mentions dates.
2. ``match_length``: per bucket, equalise the character-length distribution of members and non-members (quantile
   bins; the class ratio of the bucket is kept). Reason ``debias_length_match``.
3. ``match_topics``: per bucket, pair every item of the smaller class with its nearest TF-IDF neighbour in the
   larger class (greedy, one-to-one); the unpaired, and pairs below `topic_min_similarity`, go.
   Reason ``debias_unpaired``. This selects topic-matched members from a larger member pool.
4. ``drop_confident``: adversarial filtering (as AFLite, Sakaguchi et al. 2020): drop the items the blind
   classifiers rank most confidently on the correct side, using out-of-fold predictions, a step at a time, with
   fresh folds each round, until the blind AUC is at or under the target or the drop budget is spent.
   Reason ``debias_confident``.

Levers 1–3 take True/False or "auto" (apply only when the classifier that sees that signal -- dates, format, bow --
is above the target). The blind AUC checked against the target is the largest of the overall AUC and the AUCs of
buckets with at least `min_bucket_n` rows; the final figure comes from an audit on fresh folds (a different seed
from every filtering round), so it is not the number the filter optimised.
"""
from __future__ import annotations

import math
import sys
from collections import Counter, defaultdict
from typing import Any, Sequence

import numpy as np

from curation.shift.audit import CLASSIFIERS, FLAG_AUC, prefix_groups, run_audit, summarise_scores, top_features
from curation.shift.debias_steps import length_match, pair_by_topic, strip_dates

REASONS = ("debias_length_match", "debias_unpaired", "debias_confident", "debias_over_cap")


# --------------------------------------------------------------------------------------------------------------
# The debias loop
# --------------------------------------------------------------------------------------------------------------
def _measure(audit: dict, min_bucket_n: int) -> float:
    """The figure held against the target: the worst of overall and every bucket big enough to estimate."""
    vals = [audit["overall"]["auc"]] + [b["auc"] for b in audit["buckets"].values() if b["n"] >= min_bucket_n]
    vals = [v for v in vals if v is not None and not math.isnan(v)]
    return max(vals) if vals else math.nan


def _compact(audit: dict) -> dict:
    keep = ("n", "n_member", "auc", "auc_ci", "tpr_at_1_fpr", "tpr_at_5_fpr", "classifier", "classifiers")
    return {"overall": {k: audit["overall"].get(k) for k in keep},
            "buckets": {b: {k: r.get(k) for k in keep} for b, r in audit["buckets"].items()}}


def _wants(setting, audit: dict, classifier: str, target: float) -> bool:
    if setting == "auto":
        if classifier not in audit["overall"]["classifiers"]:
            return False
        aucs = [audit["overall"]["classifiers"][classifier]] + [
            b["classifiers"][classifier] for b in audit["buckets"].values()]
        return any(a is not None and not math.isnan(a) and a > target for a in aucs)
    return bool(setting)


def _rank01(s: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return (rankdata(s) - 0.5) / max(s.size, 1)


def debias_rows(rows: list[dict], *, target_auc: float = 0.60, seed: int = 0,
                mask_dates: bool | str = "auto", date_mode: str = "remove",
                match_length: bool | str = "auto", length_bins: int = 20,
                match_topics: bool | str = "auto", topic_min_similarity: float = 0.0,
                drop_confident: bool = True, step_frac: float = 0.05, max_drop_frac: float = 0.5,
                min_bucket_n: int = 50, min_per_class: int = 10, max_rounds: int = 40,
                cutoff_year: int | None = None, n_folds: int = 5, n_bootstrap: int = 1000,
                group_prefix_words: int | None = 32, progress: bool = True,
                classifiers: Sequence[str] = CLASSIFIERS) -> tuple[list[dict], list[dict], dict]:
    """Reduce blind separability of benchmark rows (`id`, `input`, `label`, `bucket`, …).

    Returns (kept rows, dropped rows each with `reason` and `detail`, report). The report holds the blind audit
    before and after (`before`, `after`: overall + per bucket), `reached`, a plain-language `message`, what each
    lever did, and the drop counts by reason and label (`before_compact`/`after_compact` leave out the feature
    lists, for a manifest). `max_drop_frac` is the drop budget as a fraction of the input: length and topic
    matching are applied in full and count towards it, and the confident-item filter stops when it is spent."""
    from tqdm.auto import tqdm

    rng = np.random.default_rng(seed)
    rows = [dict(r) for r in rows]
    n_in = len(rows)
    originals = [r["input"] for r in rows]
    texts = list(originals)
    y = np.array([int(r["label"]) for r in rows], dtype=np.int64)
    buckets = np.array([str(r.get("bucket", "all")) for r in rows], dtype=object)
    # Groups from the original texts, fixed for the whole run: edits must not let truncations of one text split.
    groups = prefix_groups(originals, group_prefix_words) if group_prefix_words else None
    alive = np.ones(n_in, dtype=bool)
    reason: dict[int, tuple[str, str]] = {}
    audit_kw = dict(cutoff_year=cutoff_year, n_folds=n_folds, group_prefix_words=None, progress=progress,
                    classifiers=classifiers)
    budget = int(math.floor(max_drop_frac * n_in))

    def audit(sel: np.ndarray, round_seed: int, nb: int = 0, features: bool = False):
        idx = np.flatnonzero(sel)
        res, oof = run_audit([texts[i] for i in idx], y[idx], list(buckets[idx]),
                             None if groups is None else groups[idx], seed=round_seed, n_bootstrap=nb,
                             with_features=features, **audit_kw)
        return idx, res, oof

    def drop(indices: list[tuple[int, str]], why: str) -> int:
        n = 0
        for i, d in indices:
            if alive[i]:
                alive[i] = False
                reason[i] = (why, d)
                n += 1
        return n

    say = (lambda msg: print(f"[debias] {msg}", file=sys.stderr)) if progress else (lambda msg: None)
    _, before, before_oof = audit(alive, seed, n_bootstrap, features=True)
    m_before = _measure(before, min_bucket_n)
    say(f"blind AUC before: {m_before:.3f} (target {target_auc:.2f})")
    report: dict[str, Any] = {
        "target_auc": target_auc, "n_in": n_in, "measure": f"max(overall, buckets with n >= {min_bucket_n})",
        "before": before, "blind_auc_before": m_before, "levers": {}, "max_drop_frac": max_drop_frac,
    }
    latest, latest_idx, latest_oof = before, np.flatnonzero(alive), before_oof
    if not m_before > target_auc:
        report.update({"after": before, "blind_auc_after": m_before, "reached": True, "n_kept": n_in,
                       "n_dropped": 0, "dropped_by_reason": {}, "dropped_by_reason_label": {},
                       "n_modified": 0, "modified_ids": [], "before_compact": _compact(before),
                       "after_compact": _compact(before),
                       "message": f"Blind AUC {m_before:.3f} is already at or under the target {target_auc:.2f}; "
                                  f"nothing changed."})
        return rows, [], report

    # 1. dates --------------------------------------------------------------------------------------------------
    if _wants(mask_dates, latest, "dates", target_auc):
        changed: Counter = Counter()
        n_expr = 0
        for i in range(n_in):
            new, n = strip_dates(texts[i], date_mode)
            if n:
                texts[i] = new
                n_expr += n
                changed["member" if y[i] else "non-member"] += 1
        report["levers"]["mask_dates"] = {"applied": True, "mode": date_mode, "n_expressions": n_expr,
                                          "n_rows_changed": sum(changed.values()),
                                          "n_rows_changed_by_label": dict(changed)}
        say(f"dates: {date_mode}d {n_expr} expressions in {sum(changed.values())} rows")
        if n_expr:
            latest_idx, latest, latest_oof = audit(alive, seed + 1)
    else:
        report["levers"]["mask_dates"] = {"applied": False}

    # 2. length ------------------------------------------------------------------------------------------------
    if _wants(match_length, latest, "format", target_auc):
        lengths = np.array([len(t) for t in texts], dtype=np.float64)
        todo = []
        for b in sorted(set(buckets[alive])):
            todo += length_match(np.flatnonzero(alive & (buckets == b)), y, lengths, rng, length_bins)
        n = drop(todo, "debias_length_match")
        report["levers"]["match_length"] = {"applied": True, "n_bins": length_bins, "n_dropped": n}
        say(f"length match: dropped {n}")
    else:
        report["levers"]["match_length"] = {"applied": False}

    # 3. topics ------------------------------------------------------------------------------------------------
    if _wants(match_topics, latest, "bow", target_auc):
        todo, sims = [], []
        for b in sorted(set(buckets[alive])):
            idx = np.flatnonzero(alive & (buckets == b))
            mem, non = idx[y[idx] == 1], idx[y[idx] == 0]
            if not len(mem) or not len(non):
                continue
            small, large = (mem, non) if len(mem) <= len(non) else (non, mem)
            pairs = pair_by_topic(texts, small, large)
            paired_large = {j for j, _ in pairs.values()}
            for i in small:
                if int(i) not in pairs:
                    todo.append((int(i), f"bucket {b}: no partner left in the other class"))
            for i, (j, s) in pairs.items():
                sims.append(s)
                if s < topic_min_similarity:
                    d = f"bucket {b}: nearest partner similarity {s:.3f} < {topic_min_similarity}"
                    todo += [(i, d), (j, d)]
            todo += [(int(j), f"bucket {b}: not the nearest TF-IDF neighbour of any item of the smaller class")
                     for j in large if int(j) not in paired_large]
        n = drop(todo, "debias_unpaired")
        report["levers"]["match_topics"] = {
            "applied": True, "min_similarity": topic_min_similarity, "n_dropped": n,
            "pair_similarity_median": float(np.median(sims)) if sims else None}
        say(f"topic pairing: dropped {n}")
    else:
        report["levers"]["match_topics"] = {"applied": False}

    # 4. confident items, iteratively ------------------------------------------------------------------------
    rounds: list[dict] = []
    if latest_oof is None or not alive[latest_idx].all() or int(alive.sum()) != latest_idx.size:
        latest_idx, latest, latest_oof = audit(alive, seed + 2)  # rows changed since the last audit
    idx, oof = latest_idx, latest_oof
    m_now = _measure(latest, min_bucket_n)
    stop_why = "target reached" if m_now <= target_auc else ""
    bar = tqdm(total=max_rounds, desc="debias rounds", file=sys.stderr, disable=not progress, leave=False)
    r = 0
    while drop_confident and m_now > target_auc and r < max_rounds:
        spent = n_in - int(alive.sum())
        if spent >= budget:
            stop_why = f"drop budget spent ({spent} of {n_in} rows, max_drop_frac={max_drop_frac})"
            break
        hot = [c for c in oof if (latest["overall"]["classifiers"][c] or 0) > target_auc
               or any((b["classifiers"][c] or 0) > target_auc for b in latest["buckets"].values())]
        bkeys = buckets[idx]
        conf = np.zeros(idx.size)
        why_c = np.array([""] * idx.size, dtype=object)
        score_at = np.zeros(idx.size)
        for c in hot:
            for b in set(bkeys):
                sel = bkeys == b
                rk = _rank01(oof[c][sel])
                cc = np.where(y[idx][sel] == 1, rk, 1 - rk)
                better = cc > conf[sel]
                conf[sel] = np.where(better, cc, conf[sel])
                why_c[sel] = np.where(better, c, why_c[sel])
                score_at[sel] = np.where(better, oof[c][sel], score_at[sel])
        if not hot:
            stop_why = "no single classifier above the target"
            break
        hot_buckets = (set(bkeys) if latest["overall"]["auc"] > target_auc else
                       {b for b, rec in latest["buckets"].items()
                        if rec["auc"] > target_auc and rec["n"] >= min_bucket_n})
        todo = []
        for b in sorted(hot_buckets):
            sel = np.flatnonzero(bkeys == b)
            n_drop = max(2, int(math.ceil(step_frac * sel.size)))
            n_m = int(y[idx[sel]].sum())
            k_m = int(round(n_drop * n_m / max(sel.size, 1)))
            for lab, k in ((1, k_m), (0, n_drop - k_m)):
                cls = sel[y[idx[sel]] == lab]
                k = min(k, max(cls.size - min_per_class, 0))
                for j in cls[np.argsort(-conf[cls], kind="stable")[:k]]:
                    todo.append((int(idx[j]), f"round {r + 1}: {why_c[j]} P(member)={score_at[j]:.3f}, "
                                              f"label {lab}, rank-confidence {conf[j]:.3f}"))
        todo = todo[: max(budget - spent, 0)]
        n = drop(todo, "debias_confident")
        rounds.append({"round": r + 1, "blind_auc": m_now, "classifiers": hot, "n_dropped": n,
                       "n_alive": int(alive.sum())})
        say(f"round {r + 1}: blind AUC {m_now:.3f}, dropped {n} ({int(alive.sum())} left)")
        bar.update(1)
        r += 1
        if n == 0:
            stop_why = f"nothing left to drop (min_per_class={min_per_class} per class and bucket)"
            break
        idx, latest, oof = audit(alive, seed + 2 + r)
        m_now = _measure(latest, min_bucket_n)
        if m_now <= target_auc:
            stop_why = "target reached"
    bar.close()
    if not stop_why:
        stop_why = "drop_confident disabled" if not drop_confident else f"max_rounds={max_rounds} reached"
    report["levers"]["drop_confident"] = {"applied": bool(drop_confident), "step_frac": step_frac,
                                          "rounds": rounds, "stopped": stop_why}

    # Final: with CIs and features. After filtering rounds it is a fresh-fold audit, not the one the stopping
    # rule looked at; without any, the latest audit already saw the final rows on folds no lever used.
    if rounds:
        _, after, _ = audit(alive, seed + 1000, n_bootstrap, features=True)
    else:
        after = summarise_scores(y[idx], oof, list(buckets[idx]), n_bootstrap=n_bootstrap, seed=seed)
        after["top_features"] = top_features([texts[i] for i in idx], y[idx])
        after["config"] = latest["config"]
    m_after = _measure(after, min_bucket_n)
    reached = bool(m_after <= target_auc)
    kept, dropped = [], []
    by_reason: Counter = Counter()
    by_reason_label: dict[str, Counter] = defaultdict(Counter)
    modified = []
    for i, row in enumerate(rows):
        if alive[i]:
            if texts[i] != originals[i]:
                row["input"] = texts[i]
                modified.append(row.get("id", i))
            kept.append(row)
        else:
            why, detail = reason[i]
            dropped.append({**row, "reason": why, "detail": detail or "", "stage": "debias"})
            by_reason[why] += 1
            by_reason_label[why]["member" if y[i] else "non-member"] += 1
    n_drop = len(dropped)
    if reached:
        msg = (f"Blind AUC (worst of overall and buckets with >= {min_bucket_n} rows) {m_before:.3f} -> "
               f"{m_after:.3f} (target {target_auc:.2f}, fresh folds), "
               f"dropping {n_drop} of {n_in} rows ({n_drop / max(n_in, 1):.0%}).")
    else:
        msg = (f"TARGET NOT REACHED: blind AUC (worst of overall and buckets with >= {min_bucket_n} rows) "
               f"{m_before:.3f} -> {m_after:.3f} after dropping {n_drop} of {n_in} "
               f"rows ({n_drop / max(n_in, 1):.0%}); stopped: {stop_why}. The target {target_auc:.2f} cannot be "
               f"reached with the data at hand under these limits; the release stays blind-separable, so read "
               f"detector AUCs against the blind AUC (or raise max_drop_frac / add data).")
    say(msg)
    report.update({
        "after": after, "blind_auc_after": m_after, "reached": reached, "message": msg,
        "n_kept": len(kept), "n_dropped": n_drop, "dropped_by_reason": dict(by_reason),
        "dropped_by_reason_label": {k: dict(v) for k, v in by_reason_label.items()},
        "n_modified": len(modified), "modified_ids": modified,
        "before_compact": _compact(before), "after_compact": _compact(after),
    })
    return kept, dropped, report


# The build config's optional `debias:` section (jobs/commands/build_benchmark.py): `enabled` switches the mode on; every
# other key is a debias_rows keyword.
DEBIAS_DEFAULTS: dict[str, Any] = {
    "enabled": False, "target_auc": 0.60, "mask_dates": "auto", "date_mode": "remove", "match_length": "auto",
    "length_bins": 20, "match_topics": "auto", "topic_min_similarity": 0.0, "drop_confident": True,
    "step_frac": 0.05, "max_drop_frac": 0.5, "min_bucket_n": 50, "min_per_class": 10, "max_rounds": 40,
    "n_folds": 5, "n_bootstrap": 1000, "group_prefix_words": 32, "max_rows": 50_000,
}


def debias_release(rows: list[dict], cfg: dict[str, Any]) -> tuple[list[dict], list[dict], dict] | None:
    """build-benchmark's debiased mode over the release rows: None unless cfg["debias"]["enabled"]; else
    (kept, dropped, report) from `debias_rows` with the section's options, the cutoff year from
    cfg["cutoffs"]["nonmember_after"] and the seed from cfg["seed"]. The classifiers see at most
    `max_rows` rows: a larger release is first cut to the `max_rows` rows with the smallest seeded hash of their
    id (reason ``debias_over_cap``), so the fit costs the same on any corpus. The report is JSON-safe."""
    from curation.stages.sampling import sample_rank
    from curation.shift.release import cutoff_year_from_manifest
    from curation.shift.report import jsonable

    opts = {**DEBIAS_DEFAULTS, **(cfg.get("debias") or {})}
    unknown = set(opts) - set(DEBIAS_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown debias option(s) {sorted(unknown)}; known: {sorted(DEBIAS_DEFAULTS)}")
    if not opts.pop("enabled"):
        return None
    cap, seed = int(opts.pop("max_rows")), int(cfg.get("seed", 0) or 0)
    over: list[dict] = []
    if len(rows) > cap:
        ranked = sorted(rows, key=lambda r: sample_rank(seed, str(r["id"])))
        rows = ranked[:cap]
        over = [{**r, "reason": "debias_over_cap", "detail": f"{len(ranked)} rows > debias.max_rows={cap}"}
                for r in ranked[cap:]]
    kept, dropped, report = debias_rows(rows, seed=seed, cutoff_year=cutoff_year_from_manifest(cfg), **opts)
    report = jsonable(report)
    if over:
        report["capped"] = {"rows": len(rows), "of": len(rows) + len(over), "max_rows": cap,
                            "order": "sha256(seed, row id)"}
    return kept, dropped + over, report


__all__ = ["debias_rows", "debias_release", "REASONS", "DEBIAS_DEFAULTS", "FLAG_AUC"]
