"""`shift-audit`'s report.html content (scoring/reports/html.py renders it): whether the benchmark is biased, then
the evidence, from the audit's result dict (jobs/commands/shift_audit.py writes it beside shift_audit.json, .md and
.png, which curation/shift/report.py writes)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from scoring.reports.html import Code, Figure, Page, Row, Section, Table, num, num_ci, pct


def report_page(result: dict, out: Path, *, classifiers: Sequence[str], flag_auc: float) -> Page:
    """report.html's content (scoring/reports/html.py): whether the benchmark is biased, then the evidence.
    `classifiers` are the blind classifiers in their table order and `flag_auc` the flag used when the result names
    none (curation.shift.audit's CLASSIFIERS and FLAG_AUC)."""
    o, flag = result["overall"], result.get("flag_auc", flag_auc)
    auc = num_ci(o["auc"], o.get("auc_ci"), 2)
    if result.get("flagged"):
        head = (f"This benchmark is biased: a classifier that never sees the model tells members from non-members "
                f"with AUC {auc}.")
        summary = (f"Above {flag:.2f}, the text alone gives membership away (dates, topics, formatting). A "
                   "detector's AUC on this benchmark measures this distribution shift as much as membership: compare "
                   "it with the blind AUC, or debias the benchmark first (--debias).")
    else:
        head = (f"No strong distribution shift: a classifier that never sees the model reaches AUC {auc}, at or "
                f"under the {flag:.2f} flag.")
        summary = ("A detector's AUC on this benchmark reflects membership rather than differences between the "
                   "member and non-member texts themselves; the blind AUC is still the floor to compare it with.")
    names = [c for c in classifiers if c in o.get("classifiers", {})]

    def table(res: dict, caption: str) -> Table:
        def row(name, r):
            cells = [name, r["n"], r.get("n_member"), num_ci(r["auc"], r.get("auc_ci")), pct(r["tpr_at_1_fpr"]),
                     pct(r["tpr_at_5_fpr"]), r.get("classifier", ""),
                     *[num(r.get("classifiers", {}).get(c)) for c in names]]
            return Row(cells, "best" if name == "overall" else "")
        rows = [row(k, r) for k, r in res.get("buckets", {}).items()] + [row("overall", res["overall"])]
        return Table(["bucket", "items", "members", "blind AUC [95% CI]", "TPR at 1% FPR", "TPR at 5% FPR", "best",
                      *[f"{c} AUC" for c in names]], rows, caption)

    sections = [Section("Blind AUC per bucket", [
        table(result, "Out-of-fold AUC of text-only classifiers: bag of words (bow), date mentions (dates), length "
                      "and formatting (format); 'best' is the one reported."),
        Figure(out / "shift_audit.png", "Blind AUC per bucket with its 95% interval; dashed: the flag")])]
    if "documents" in result:
        sections.append(Section("Document level", [table(result["documents"], "Mean window score per document.")]))
    feats = result.get("top_features") or []
    if feats:
        sections.append(Section("What gives membership away", [Table(
            ["feature", "kind", "points to", "weight", "member documents", "non-member documents"],
            [[Code(f["feature"]), f["kind"], f["direction"], num(f["weight"], 2), f["member_docs"], f["nonmember_docs"]]
             for f in feats])]))
    cfg = result.get("config", {})
    over = [k for k, r in result.get("buckets", {}).items() if r["auc"] is not None and r["auc"] > flag]
    warnings = [f"Bucket(s) {', '.join(over)} are over the {flag:.2f} flag on their own: detector AUCs there "
                "measure distribution shift as much as membership."] if over and not result.get("flagged") else []
    facts = [("benchmark", Code(", ".join(result.get("inputs", [])))), ("items", o["n"]),
             ("members", o.get("n_member")), ("cross-validation", f"{cfg.get('n_folds', '?')} folds, grouped by "
                                                                  f"{cfg.get('grouping', '?')}"),
             ("cutoff year", str(cfg.get("cutoff_year") or "none"))]
    files = [("shift_audit.json", "every number here"), ("shift_audit.md", "the same as Markdown")]
    return Page(kind="shift audit (blind baseline)", headline=head, summary=summary, facts=facts, sections=sections,
                warnings=warnings, files=files)
