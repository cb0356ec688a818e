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
    run = _DebiasRun(rows, target_auc=target_auc, seed=seed, min_bucket_n=min_bucket_n, max_drop_frac=max_drop_frac,
                     n_bootstrap=n_bootstrap, group_prefix_words=group_prefix_words, progress=progress,
                     audit_kw=dict(cutoff_year=cutoff_year, n_folds=n_folds, group_prefix_words=None,
                                   progress=progress, classifiers=classifiers))
    if not run.m_before > target_auc:
        return run.unchanged()
    run.lever("mask_dates", mask_dates, "dates", lambda: run.mask_dates(date_mode))
    run.lever("match_length", match_length, "format", lambda: run.match_length(length_bins))
    run.lever("match_topics", match_topics, "bow", lambda: run.match_topics(topic_min_similarity))
    run.drop_confident(drop_confident, step_frac, min_per_class, max_rounds)
    return run.finish()


class _DebiasRun:
    """One debias run's state: the texts as edited so far, which rows are alive and why the others went, the
    latest blind audit (and its out-of-fold scores), and the report. One method per lever, applied in order."""

    def __init__(self, rows: list[dict], *, target_auc: float, seed: int, min_bucket_n: int, max_drop_frac: float,
                 n_bootstrap: int, group_prefix_words: int | None, progress: bool, audit_kw: dict):
        self.rows = [dict(r) for r in rows]
        self.n_in = len(self.rows)
        self.originals = [r["input"] for r in self.rows]
        self.texts = list(self.originals)
        self.y = np.array([int(r["label"]) for r in self.rows], dtype=np.int64)
        self.buckets = np.array([str(r.get("bucket", "all")) for r in self.rows], dtype=object)
        # Groups from the original texts, fixed for the whole run: edits must not let truncations of one text split.
        self.groups = prefix_groups(self.originals, group_prefix_words) if group_prefix_words else None
        self.alive = np.ones(self.n_in, dtype=bool)
        self.reason: dict[int, tuple[str, str]] = {}
        self.rng = np.random.default_rng(seed)
        self.target, self.seed, self.min_bucket_n, self.n_bootstrap = target_auc, seed, min_bucket_n, n_bootstrap
        self.max_drop_frac, self.audit_kw, self.progress = max_drop_frac, audit_kw, progress
        self.budget = int(math.floor(max_drop_frac * self.n_in))
        self.say = (lambda msg: print(f"[debias] {msg}", file=sys.stderr)) if progress else (lambda msg: None)
        _, self.before, before_oof = self.audit(self.alive, seed, n_bootstrap, features=True)
        self.m_before = _measure(self.before, min_bucket_n)
        self.say(f"blind AUC before: {self.m_before:.3f} (target {target_auc:.2f})")
        self.report: dict[str, Any] = {
            "target_auc": target_auc, "n_in": self.n_in, "measure": f"max(overall, buckets with n >= {min_bucket_n})",
            "before": self.before, "blind_auc_before": self.m_before, "levers": {}, "max_drop_frac": max_drop_frac,
        }
        self.latest, self.latest_idx, self.latest_oof = self.before, np.flatnonzero(self.alive), before_oof
        self.rounds: list[dict] = []

    def audit(self, sel: np.ndarray, round_seed: int, nb: int = 0, features: bool = False):
        idx = np.flatnonzero(sel)
        res, oof = run_audit([self.texts[i] for i in idx], self.y[idx], list(self.buckets[idx]),
                             None if self.groups is None else self.groups[idx], seed=round_seed, n_bootstrap=nb,
                             with_features=features, **self.audit_kw)
        return idx, res, oof

    def drop(self, indices: list[tuple[int, str]], why: str) -> int:
        n = 0
        for i, d in indices:
            if self.alive[i]:
                self.alive[i] = False
                self.reason[i] = (why, d)
                n += 1
        return n

    def unchanged(self) -> tuple[list[dict], list[dict], dict]:
        self.report.update({"after": self.before, "blind_auc_after": self.m_before, "reached": True,
                            "n_kept": self.n_in, "n_dropped": 0, "dropped_by_reason": {},
                            "dropped_by_reason_label": {}, "n_modified": 0, "modified_ids": [],
                            "before_compact": _compact(self.before), "after_compact": _compact(self.before),
                            "message": f"Blind AUC {self.m_before:.3f} is already at or under the target "
                                       f"{self.target:.2f}; nothing changed."})
        return self.rows, [], self.report

    def lever(self, name: str, setting, classifier: str, apply) -> None:
        """Apply a lever when its setting (True/False/"auto": its classifier above the target) asks for it."""
        if _wants(setting, self.latest, classifier, self.target):
            self.report["levers"][name] = apply()
        else:
            self.report["levers"][name] = {"applied": False}

    def mask_dates(self, date_mode: str) -> dict:
        changed: Counter = Counter()
        n_expr = 0
        for i in range(self.n_in):
            new, n = strip_dates(self.texts[i], date_mode)
            if n:
                self.texts[i] = new
                n_expr += n
                changed["member" if self.y[i] else "non-member"] += 1
        self.say(f"dates: {date_mode}d {n_expr} expressions in {sum(changed.values())} rows")
        if n_expr:
            self.latest_idx, self.latest, self.latest_oof = self.audit(self.alive, self.seed + 1)
        return {"applied": True, "mode": date_mode, "n_expressions": n_expr, "n_rows_changed": sum(changed.values()),
                "n_rows_changed_by_label": dict(changed)}

    def match_length(self, length_bins: int) -> dict:
        lengths = np.array([len(t) for t in self.texts], dtype=np.float64)
        todo = []
        for b in sorted(set(self.buckets[self.alive])):
            todo += length_match(np.flatnonzero(self.alive & (self.buckets == b)), self.y, lengths, self.rng,
                                 length_bins)
        n = self.drop(todo, "debias_length_match")
        self.say(f"length match: dropped {n}")
        return {"applied": True, "n_bins": length_bins, "n_dropped": n}

    def match_topics(self, topic_min_similarity: float) -> dict:
        todo, sims = [], []
        for b in sorted(set(self.buckets[self.alive])):
            idx = np.flatnonzero(self.alive & (self.buckets == b))
            mem, non = idx[self.y[idx] == 1], idx[self.y[idx] == 0]
            if not len(mem) or not len(non):
                continue
            small, large = (mem, non) if len(mem) <= len(non) else (non, mem)
            pairs = pair_by_topic(self.texts, small, large)
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
        n = self.drop(todo, "debias_unpaired")
        self.say(f"topic pairing: dropped {n}")
        return {"applied": True, "min_similarity": topic_min_similarity, "n_dropped": n,
                "pair_similarity_median": float(np.median(sims)) if sims else None}

    def confident(self, idx: np.ndarray, oof: dict, hot: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per alive row: the largest rank-confidence on its correct side over the hot classifiers (within its
        bucket), which classifier gave it, and that classifier's P(member)."""
        bkeys = self.buckets[idx]
        conf = np.zeros(idx.size)
        why_c = np.array([""] * idx.size, dtype=object)
        score_at = np.zeros(idx.size)
        for c in hot:
            for b in set(bkeys):
                sel = bkeys == b
                rk = _rank01(oof[c][sel])
                cc = np.where(self.y[idx][sel] == 1, rk, 1 - rk)
                better = cc > conf[sel]
                conf[sel] = np.where(better, cc, conf[sel])
                why_c[sel] = np.where(better, c, why_c[sel])
                score_at[sel] = np.where(better, oof[c][sel], score_at[sel])
        return conf, why_c, score_at

    def confident_round(self, r: int, idx: np.ndarray, oof: dict, hot: list[str], step_frac: float,
                        min_per_class: int, spent: int) -> list[tuple[int, str]]:
        """One filtering round's drops: per bucket above the target, a step of the most confidently placed rows,
        members and non-members in the bucket's ratio, keeping min_per_class of each, within the budget."""
        conf, why_c, score_at = self.confident(idx, oof, hot)
        bkeys = self.buckets[idx]
        hot_buckets = (set(bkeys) if self.latest["overall"]["auc"] > self.target else
                       {b for b, rec in self.latest["buckets"].items()
                        if rec["auc"] > self.target and rec["n"] >= self.min_bucket_n})
        todo = []
        for b in sorted(hot_buckets):
            sel = np.flatnonzero(bkeys == b)
            n_drop = max(2, int(math.ceil(step_frac * sel.size)))
            n_m = int(self.y[idx[sel]].sum())
            k_m = int(round(n_drop * n_m / max(sel.size, 1)))
            for lab, k in ((1, k_m), (0, n_drop - k_m)):
                cls = sel[self.y[idx[sel]] == lab]
                k = min(k, max(cls.size - min_per_class, 0))
                for j in cls[np.argsort(-conf[cls], kind="stable")[:k]]:
                    todo.append((int(idx[j]), f"round {r + 1}: {why_c[j]} P(member)={score_at[j]:.3f}, "
                                              f"label {lab}, rank-confidence {conf[j]:.3f}"))
        return todo[: max(self.budget - spent, 0)]

    def drop_confident(self, enabled: bool, step_frac: float, min_per_class: int, max_rounds: int) -> None:
        """Adversarial filtering, a step at a time with fresh folds each round, until the target or a limit."""
        from tqdm.auto import tqdm

        alive, target = self.alive, self.target
        if self.latest_oof is None or not alive[self.latest_idx].all() or int(alive.sum()) != self.latest_idx.size:
            self.latest_idx, self.latest, self.latest_oof = self.audit(alive, self.seed + 2)  # rows changed since
        idx, oof = self.latest_idx, self.latest_oof
        m_now = _measure(self.latest, self.min_bucket_n)
        stop_why = "target reached" if m_now <= target else ""
        bar = tqdm(total=max_rounds, desc="debias rounds", file=sys.stderr, disable=not self.progress, leave=False)
        r = 0
        while enabled and m_now > target and r < max_rounds:
            spent = self.n_in - int(alive.sum())
            if spent >= self.budget:
                stop_why = f"drop budget spent ({spent} of {self.n_in} rows, max_drop_frac={self.max_drop_frac})"
                break
            hot = [c for c in oof if (self.latest["overall"]["classifiers"][c] or 0) > target
                   or any((b["classifiers"][c] or 0) > target for b in self.latest["buckets"].values())]
            if not hot:
                stop_why = "no single classifier above the target"
                break
            n = self.drop(self.confident_round(r, idx, oof, hot, step_frac, min_per_class, spent), "debias_confident")
            self.rounds.append({"round": r + 1, "blind_auc": m_now, "classifiers": hot, "n_dropped": n,
                                "n_alive": int(alive.sum())})
            self.say(f"round {r + 1}: blind AUC {m_now:.3f}, dropped {n} ({int(alive.sum())} left)")
            bar.update(1)
            r += 1
            if n == 0:
                stop_why = f"nothing left to drop (min_per_class={min_per_class} per class and bucket)"
                break
            idx, self.latest, oof = self.audit(alive, self.seed + 2 + r)
            m_now = _measure(self.latest, self.min_bucket_n)
            if m_now <= target:
                stop_why = "target reached"
        bar.close()
        if not stop_why:
            stop_why = "drop_confident disabled" if not enabled else f"max_rounds={max_rounds} reached"
        self.idx, self.oof = idx, oof
        self.report["levers"]["drop_confident"] = {"applied": bool(enabled), "step_frac": step_frac,
                                                   "rounds": self.rounds, "stopped": stop_why}
        self.stop_why = stop_why

    def finish(self) -> tuple[list[dict], list[dict], dict]:
        """The final audit, the kept and dropped rows, and the report's outcome."""
        # With CIs and features. After filtering rounds it is a fresh-fold audit, not the one the stopping rule
        # looked at; without any, the latest audit already saw the final rows on folds no lever used.
        y, idx, min_bucket_n, target = self.y, self.idx, self.min_bucket_n, self.target
        if self.rounds:
            _, after, _ = self.audit(self.alive, self.seed + 1000, self.n_bootstrap, features=True)
        else:
            after = summarise_scores(y[idx], self.oof, list(self.buckets[idx]), n_bootstrap=self.n_bootstrap,
                                     seed=self.seed)
            after["top_features"] = top_features([self.texts[i] for i in idx], y[idx])
            after["config"] = self.latest["config"]
        m_after = _measure(after, min_bucket_n)
        reached = bool(m_after <= target)
        kept, dropped = [], []
        by_reason: Counter = Counter()
        by_reason_label: dict[str, Counter] = defaultdict(Counter)
        modified = []
        for i, row in enumerate(self.rows):
            if self.alive[i]:
                if self.texts[i] != self.originals[i]:
                    row["input"] = self.texts[i]
                    modified.append(row.get("id", i))
                kept.append(row)
            else:
                why, detail = self.reason[i]
                dropped.append({**row, "reason": why, "detail": detail or "", "stage": "debias"})
                by_reason[why] += 1
                by_reason_label[why]["member" if y[i] else "non-member"] += 1
        n_drop, n_in, m_before = len(dropped), self.n_in, self.m_before
        if reached:
            msg = (f"Blind AUC (worst of overall and buckets with >= {min_bucket_n} rows) {m_before:.3f} -> "
                   f"{m_after:.3f} (target {target:.2f}, fresh folds), "
                   f"dropping {n_drop} of {n_in} rows ({n_drop / max(n_in, 1):.0%}).")
        else:
            msg = (f"TARGET NOT REACHED: blind AUC (worst of overall and buckets with >= {min_bucket_n} rows) "
                   f"{m_before:.3f} -> {m_after:.3f} after dropping {n_drop} of {n_in} "
                   f"rows ({n_drop / max(n_in, 1):.0%}); stopped: {self.stop_why}. The target {target:.2f} cannot be "
                   f"reached with the data at hand under these limits; the release stays blind-separable, so read "
                   f"detector AUCs against the blind AUC (or raise max_drop_frac / add data).")
        self.say(msg)
        self.report.update({
            "after": after, "blind_auc_after": m_after, "reached": reached, "message": msg,
            "n_kept": len(kept), "n_dropped": n_drop, "dropped_by_reason": dict(by_reason),
            "dropped_by_reason_label": {k: dict(v) for k, v in by_reason_label.items()},
            "n_modified": len(modified), "modified_ids": modified,
            "before_compact": _compact(self.before), "after_compact": _compact(after),
        })
        return kept, dropped, self.report


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
