"""`doc-mia`'s report content: report.md and report.html's `Page`, from metrics.json's summary (`meta`, with the
run's settings under `config`) and the grid's records (jobs/commands/doc_mia.py writes them)."""
from __future__ import annotations

from typing import Mapping, Sequence

from scoring.reports.html import Code, Page, Row, Section, Table, left_out, num, pct


def report_table(records: Sequence[Mapping]) -> str:
    """Markdown: rows normalisation × features, one column per C with AUC mean ± std (TPR@1% / @10% FPR)."""
    contexts = sorted({r["context"] for r in records})
    rows = list(dict.fromkeys((r["normalization"], r["features"]) for r in records))
    by = {(r["normalization"], r["features"], r["context"]): r for r in records}
    lines = ["| normalisation | features | " + " | ".join(f"C={c}: AUC (TPR@1% / @10% FPR)" for c in contexts) + " |",
             "|---|---|" + "---|" * len(contexts)]
    for norm, feat in rows:
        cells = []
        for c in contexts:
            r = by.get((norm, feat, c))
            cells.append("" if r is None else
                         f"{r['auc_mean']:.3f} ± {r['auc_std']:.3f} ({r['tpr_at_1_fpr_mean']:.2f} / {r['tpr_at_10_fpr_mean']:.2f})")
        lines.append(f"| {norm} | {feat} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_markdown(meta: Mapping, records: Sequence[Mapping]) -> str:
    """report.md."""
    cfg, counts, best, tokens = meta["config"], meta["counts"], meta["best"], meta["tokens_per_document"]
    n_used, n_quarantined = counts["documents_used"], counts["documents_quarantined"]
    md = [f"# Tidemark document-level membership: `{meta['model']}`", "",
          f"- members `{meta['members']}`, non-members `{meta['nonmembers']}`",
          f"- documents in {counts['documents_in']} = used {n_used} ({counts['members_used']} members, "
          f"{counts['nonmembers_used']} non-members) + quarantined {n_quarantined} (`quarantine.parquet`); tokens "
          f"per document: median {tokens['median']:.0f} (min "
          f"{tokens['min']}, max {tokens['max']})",
          f"- {cfg['folds']}-fold stratified CV (seed {cfg['seed']}); random forest {cfg['n_trees']} trees, max depth 5, "
          f"min 3 samples per leaf; reference dictionaries and {cfg['hist_bins']} HistFE bins fitted on training folds only",
          "- cells: AUC mean ± std over folds (TPR at 1% / 10% FPR, fold means). With few documents per fold, "
          "TPR@1% FPR is the TPR at zero false positives.", "",
          report_table(records), "",
          f"Best: {best['normalization']} + {best['features']} at C={best['context']}: AUC {best['auc_mean']:.3f} ± "
          f"{best['auc_std']:.3f}", ""]
    if n_used < 100:
        md.append(f"Note: {n_used} documents in all; the paper used 1000 + 1000. Fold-level numbers are coarse.")
    return "\n".join(md) + "\n"


def report_page(meta: Mapping, records: Sequence[Mapping]) -> Page:
    """report.html's content (scoring/reports/html.py): how well whole documents' membership can be told, first."""
    cfg, best, counts, tokens = meta["config"], meta["best"], meta["counts"], meta["tokens_per_document"]
    head = (f"Member documents can be told from non-members with AUC {num(best['auc_mean'], 2)} ± "
            f"{num(best['auc_std'], 2)} (mean ± standard deviation over {cfg['folds']} folds), by the best setting: "
            f"{best['normalization']} + {best['features']} at C = {best['context']}.")
    baseline = max((r["auc_mean"] for r in records if r["normalization"] == "-"), default=float("nan"))
    summary = (f"{counts['documents_used']:,} documents ({counts['members_used']:,} members, "
               f"{counts['nonmembers_used']:,} non-members) under {meta['model']}; 0.5 is guessing, 1.0 is perfect. "
               f"Without a classifier (the documents' mean log-likelihood alone) the best AUC is {num(baseline, 2)}. "
               f"The best of {sum(r['normalization'] != '-' for r in records)} settings is picked on the same folds "
               "it is scored on, so its AUC is somewhat optimistic.")

    def row(r):
        same = (r["normalization"], r["features"], r["context"]) == (best["normalization"], best["features"],
                                                                      best["context"])
        return Row([r["normalization"], r["features"], r["context"], f"{num(r['auc_mean'])} ± {num(r['auc_std'])}",
                    pct(r["tpr_at_1_fpr_mean"]), pct(r["tpr_at_10_fpr_mean"])],
                   "best" if same else "muted" if r["normalization"] == "-" else "")

    grid = Table(["normalisation", "features", "C", "AUC (mean ± std)", "TPR at 1% FPR", "TPR at 10% FPR"],
                 [row(r) for r in records], "Every setting of the grid; TPR values are fold means.")
    method = (f"{cfg['folds']}-fold stratified cross-validation (seed {cfg['seed']}); a random forest of "
              f"{cfg['n_trees']} trees per fold; reference dictionaries and {cfg['hist_bins']} histogram bins fitted "
              "on training folds only. With few documents per fold, TPR at 1% FPR is the TPR at zero false positives.")
    warnings = [f"Only {counts['documents_used']} documents in all (the method's paper used 1000 + 1000): "
                "fold-level numbers are coarse."] if counts["documents_used"] < 100 else []
    if counts["documents_quarantined"]:
        warnings.append(left_out(counts["documents_quarantined"], counts["documents_in"], "documents"))
    facts = [("members", Code(meta["members"])), ("non-members", Code(meta["nonmembers"])),
             ("model", Code(meta["model"])),
             ("documents", f"{counts['documents_in']:,} in, {counts['documents_used']:,} used, "
                           f"{counts['documents_quarantined']:,} quarantined"),
             ("tokens per document", f"median {tokens['median']:,.0f} (min {tokens['min']:,}, max {tokens['max']:,})")]
    files = [("report.md", "this report's numbers as Markdown"),
             ("metrics.json", "every setting's per-fold AUC and TPRs"),
             ("scores.parquet", "every document's out-of-fold score under every setting"),
             ("quarantine.parquet", "documents that could not be used, each with its reason")]
    return Page(kind="document-level membership inference", headline=head, summary=summary, facts=facts,
                sections=[Section("Results", [method, grid])], warnings=warnings, files=files)
