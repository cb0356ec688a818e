"""`evaluate`'s report.html content (scoring/reports/html.py renders it): which detector finds the benchmark's
members, how well, per bucket, and how much a model-free classifier already gets. Built from what write_outputs
already has: the metric records, run.json's facts, the blind baseline's AUCs and the plot files."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

from scoring.reports.generation_sections import (generation_sections, set_test_section, set_test_sentence,
                                                 trace_sentence)
from scoring.reports.html import (Code, Figure, Page, Row, Section, Table, left_out, num, num_ci, output_files,
                                 pct)

BLIND_FLAG_AUC = 0.60  # curation.shift.audit.FLAG_AUC: above it a classifier that never sees the model finds a shift

FILES = (("report.md", "this report's numbers as Markdown"),
         ("metrics.json", "every detector × bucket: AUC with CI, TPR at 1%/5% FPR, calibrated threshold"),
         ("scores.parquet", "every evaluated row's score under every detector"),
         ("token_stats.parquet", "per-token log-probabilities: rescoring needs no model (`tidemark rescore`)"),
         ("quarantine.parquet", "rows that could not be scored, each with its reason"),
         ("blind_baseline.json", "the model-free (text-only) classifiers' AUCs"),
         ("neighbours.parquet", "the neighbourhood attack's neighbours with their losses"),
         ("generations.parquet", "text-only runs: every generated sample, its prompt and what it is compared with "
                                 "(`tidemark rescore --generations` recomputes the scores from it)"),
         ("_requests", "text-only runs: the server's answer to every request, by key (a rerun pays for none twice)"),
         ("run.json", "configuration, counts, versions of inputs and timings"))

AUC_MEANING = ("AUC is the chance that a randomly chosen member scores higher than a randomly chosen non-member: "
               "0.5 is guessing, 1.0 is perfect. TPR at 1% FPR is the share of members a detector finds when it "
               "may wrongly flag only 1% of non-members. Intervals are bootstrap 95% confidence intervals.")


def _finite(x) -> bool:
    return x is not None and math.isfinite(float(x))


def _best(records: Sequence[dict], bucket: str) -> dict | None:
    rs = [r for r in records if r["bucket"] == bucket and _finite(r["auc"])]
    return max(rs, key=lambda r: r["auc"]) if rs else None


def headline(records: Sequence[dict], blind: Mapping[str, float] | None) -> tuple[str, str]:
    """(the decision in one sentence, what qualifies it: size, per-bucket range, the blind baseline)."""
    best = _best(records, "all")
    if best is None:
        return ("No detector could be evaluated: every AUC is undefined (one class missing, or no finite scores).", "")
    text = (f"The best detector, {best['column']}, tells members from non-members with AUC "
            f"{num_ci(best['auc'], best['auc_ci'], 2)}; at a 1% false-positive rate it finds "
            f"{pct(best['tpr_at_1_fpr'], 0)} of members.")
    more = f"Measured on {best['n']:,} rows ({best['n_member']:,} members)."
    per_bucket = [(b, r) for b in dict.fromkeys(r["bucket"] for r in records) if b != "all"
                  for r in [_best(records, b)] if r is not None]
    if len(per_bucket) > 1:
        lo, hi = min(per_bucket, key=lambda t: t[1]["auc"]), max(per_bucket, key=lambda t: t[1]["auc"])
        more += (f" Per bucket, the best AUC ranges from {num(lo[1]['auc'], 2)} (bucket {lo[0]}) to "
                 f"{num(hi[1]['auc'], 2)} (bucket {hi[0]}).")
    if blind and _finite(blind.get("all")) and blind["all"] > BLIND_FLAG_AUC:
        more += (f" But a classifier that never sees the model already reaches AUC {num(blind['all'], 2)}: part of "
                 "this is the benchmark's bias, not membership.")
    return text, more


def _blind_warnings(blind: Mapping[str, float] | None) -> list[str]:
    flagged = {b: a for b, a in (blind or {}).items() if _finite(a) and a > BLIND_FLAG_AUC}
    if not flagged:
        return []
    where = ", ".join(f"{'all rows' if b == 'all' else 'bucket ' + b}: {a:.2f}" for b, a in flagged.items())
    return [f"The benchmark is biased: text-only classifiers that never see the model tell members from "
            f"non-members with AUC above {BLIND_FLAG_AUC:.2f} ({where}). A detector's AUC here measures this "
            "distribution shift as much as membership; compare every detector with the blind baseline row."]


def evaluation_page(out_dir: Path, records: Sequence[dict], run_info: Mapping, blind: Mapping[str, float] | None,
                    rocs: Sequence[Path], hist: Path | None) -> Page:
    counts = run_info.get("counts", {})
    buckets = list(dict.fromkeys(r["bucket"] for r in records))
    columns = list(dict.fromkeys(r["column"] for r in records))
    by = {(r["column"], r["bucket"]): r for r in records}
    best_all = _best(records, "all")
    warnings = _blind_warnings(blind)
    if counts.get("quarantined"):
        warnings.append(left_out(counts["quarantined"], counts.get("in", 0), "rows", "could not be scored",
                                 "are left out of every number"))
    nan = {r["column"]: r["n_nan"] for r in records if r["bucket"] == "all" and r.get("n_nan")}
    if nan:
        warnings.append("Some detectors gave no score for some rows, which are left out of their AUC: "
                        + ", ".join(f"{c} ({n:,})" for c, n in nan.items()) + ".")

    per_bucket = []
    for b in buckets:
        r = _best(records, b)
        if r is not None:
            cells = [b, r["n"], r["n_member"], Code(r["column"]), num_ci(r["auc"], r["auc_ci"]),
                     pct(r["tpr_at_1_fpr"]), pct(r["tpr_at_5_fpr"])]
            per_bucket.append(cells + ([num((blind or {}).get(b))] if blind else []))
    every = [Row([Code(c)] + [num_ci(by[(c, b)]["auc"], by[(c, b)]["auc_ci"]) if (c, b) in by else "" for b in buckets],
                 "best" if best_all and c == best_all["column"] else "") for c in columns]
    if blind:
        every.append(Row(["blind baseline (no model)"] + [num(blind.get(b)) for b in buckets], "muted"))
    at_threshold = []
    for c in columns:
        r, cal = by.get((c, "all")), (by.get((c, "all")) or {}).get("calibrated") or {}
        if r:
            at_threshold.append([Code(c), pct(r["tpr_at_1_fpr"]), pct(r["tpr_at_5_fpr"]), num(cal.get("threshold"), 4),
                                 pct(cal.get("accuracy")), pct(cal.get("tpr")), pct(cal.get("fpr"))])

    sections = [
        Section("Best detector per bucket", [AUC_MEANING, Table(
            ["bucket", "rows", "members", "best detector", "AUC [95% CI]", "TPR at 1% FPR", "TPR at 5% FPR"]
            + (["blind AUC (no model)"] if blind else []), per_bucket)]),
        Section("Every detector", [Table(["detector"] + [f"AUC {b}" for b in buckets], every,
                                         "AUC [95% CI] per bucket; the highlighted row is the best on all rows.")]),
        Section("Every detector at a decision threshold (all rows)", [
            "A threshold was chosen on a stratified 30% calibration part of the rows (objective: "
            f"{(run_info.get('config') or {}).get('calibrate', 'accuracy')}); accuracy, TPR and FPR are measured "
            "on the other 70%.",
            Table(["detector", "TPR at 1% FPR", "TPR at 5% FPR", "threshold", "held-out accuracy", "held-out TPR",
                   "held-out FPR"],
                  at_threshold)]),
        Section("ROC curves", [Figure(p, f"ROC curve per detector, bucket {p.stem.removeprefix('roc_')}")
                               for p in rocs]),
    ]
    if hist is not None:
        sections.append(Section("Score distributions", [Figure(hist, "Members' and non-members' scores per detector")]))
    compare = run_info.get("compare_to")
    if compare:
        rows = [[Code(r["column"]), num(r["auc"]), num(r.get("original_auc")),
                 "" if r.get("auc_change") is None else f"{r['auc_change']:+.3f}"]
                for r in records if r["bucket"] == "all"]
        sections.append(Section(f"Against the original ({compare['original']})", [
            "Each detector's AUC here beside its AUC on the original benchmark (same model and settings).",
            Table(["detector", "AUC", "AUC on the original", "change"], rows),
            *([Figure(Path(out_dir) / "compare_auc.png", "AUC on the original vs this benchmark")]
              if compare.get("plot") else [])]))
    test = run_info.get("set_test")
    if test:
        sections.insert(0, set_test_section(test, blind))
    sections += generation_sections(run_info.get("generation"), run_info.get("examples"))
    if run_info.get("trace"):
        sections.append(Section("Traced to the corpus", [trace_sentence(run_info["trace"])]))
    head, summary = headline(records, blind)
    if test:  # the decision asked for is the set test; the AUC becomes its context
        head, summary = set_test_sentence(test), f"{head} {summary}".strip()
    return Page(kind="evaluation", headline=head, summary=summary, facts=_facts(run_info, len(columns)),
                sections=sections, warnings=warnings, files=output_files(out_dir, FILES),
                command=str(run_info.get("command") or ""))


def _facts(run_info: Mapping, n_detectors: int) -> list:
    counts = run_info.get("counts", {})
    facts = [("benchmark", Code(str(run_info.get("benchmark", "")))), ("model", Code(str(run_info.get("model", ""))))]
    if run_info.get("ref_model"):
        facts.append(("reference model", Code(run_info["ref_model"])))
    if (run_info.get("neighbours") or {}).get("mlm"):
        facts.append(("neighbour masked LM", Code(run_info["neighbours"]["mlm"])))
    rows = (f"{counts.get('in', 0):,} in, {counts.get('scored', 0):,} scored, "
            f"{counts.get('quarantined', 0):,} quarantined")
    if counts.get("recall_prefix"):
        rows += f"; {counts['recall_prefix']:,} used as a prefix (ReCaLL, Con-ReCall) and not evaluated"
    facts += [("rows", rows), ("detectors", n_detectors)]
    labelled = run_info.get("con_recall_prefix_ids")
    if labelled:
        facts.append(("labels consumed", f"con_recall uses {len(labelled.get('member', []))} labelled members and "
                                         f"{len(labelled.get('nonmember', []))} labelled non-members as its "
                                         "prefixes (left out of every metric; run.json lists them)"))
    if run_info.get("blind_baseline"):
        facts.append(("blind baseline", f"text-only classifiers, {run_info['blind_baseline']}"))
    if run_info.get("seconds") is not None:
        facts.append(("wall time", f"{run_info['seconds']} s"))
    return facts
