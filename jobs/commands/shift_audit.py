"""`tidemark shift-audit`: how much of a detector's AUC a classifier that never sees the model already gets.

Thin wrapper over curation.shift.audit (and curation.shift.debias for --debias); no Ray: a few sklearn fits on CPU.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer


def shift_audit(
    benchmark: List[Path] = typer.Option(
        ..., "--benchmark", "-b",
        help="jsonl/Parquet file(s) with `input` and `label` (optional `bucket`), a release directory "
             "(DIR/data/*.parquet + manifest.json) or a directory of such files. Repeatable. Without a `bucket` "
             "column, several files get their bucket from the file name (`…length64…` -> 64)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output directory: shift_audit.json, .md, .png and report.html."),
    cutoff_year: Optional[int] = typer.Option(
        None, help="Member/non-member cutoff year for the date classifier (default: from manifest.json, if any)."),
    folds: int = typer.Option(5, help="Cross-validation folds (stratified, grouped)."),
    seed: int = typer.Option(0, help="Seed for folds, bootstrap and window sampling."),
    bootstrap: int = typer.Option(1000, help="Bootstrap resamples for the AUC CI (0: no CI)."),
    group_prefix_words: int = typer.Option(
        32, help="Items sharing their first N words share a fold group (WikiMIA truncations of one text). "
                 "0 disables. Ignored in document mode, which groups by document."),
    documents: bool = typer.Option(
        False, "--documents/--no-documents",
        help="Document mode for long texts (books, papers): audit random fixed-length windows, grouped by "
             "document, and report a document-level AUC too."),
    window_words: int = typer.Option(512, help="Document mode: words per window."),
    windows_per_doc: int = typer.Option(20, help="Document mode: windows drawn per document."),
    debias: bool = typer.Option(
        False, "--debias/--no-debias",
        help="Also run the debiased-release selection and write DIR/debias/{kept,dropped}.jsonl + report."),
    target_auc: float = typer.Option(0.60, help="--debias: stop once the blind AUC is at or under this."),
    max_drop_frac: float = typer.Option(0.5, help="--debias: most rows that may be dropped, as a fraction."),
    step_frac: float = typer.Option(0.05, help="--debias: fraction of a bucket dropped per filtering round."),
    fail_above: Optional[float] = typer.Option(
        None, help="Exit with status 2 when the overall blind AUC exceeds this (for CI gates)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    """Blind-baseline shift audit: how well text-only classifiers separate members from non-members.

    Bag-of-words (TF-IDF word + char n-grams), date mentions and length/format features, each a logistic or
    boosted model scored by grouped, stratified k-fold CV (fitted on training folds only). Reports the blind AUC
    per bucket and overall with a bootstrap CI, TPR@1%/5% FPR and the most separating n-grams and years."""
    from curation.shift.audit import CLASSIFIERS, FLAG_AUC, audit_documents, audit_rows
    from curation.shift.release import cutoff_year_from_manifest
    from curation.shift.report import jsonable, write_report
    from scoring.reports.shift_audit_report import markdown_table
    from jobs.kit.report_out import write_html
    from scoring.reports.shift_audit_page import report_page

    t0 = time.time()
    rows, manifest = _load(benchmark)
    if cutoff_year is None:
        cutoff_year = cutoff_year_from_manifest(manifest)
    texts = [str(r["input"]) for r in rows]
    labels = [int(r["label"]) for r in rows]
    buckets = [r.get("bucket") for r in rows] if any(r.get("bucket") is not None for r in rows) else None
    typer.echo(f"shift-audit: {len(rows)} rows ({sum(labels)} members) from {len(benchmark)} path(s); "
               f"cutoff year {cutoff_year}", err=True)
    if documents:
        result = audit_documents(texts, labels, buckets, window_words=window_words, windows_per_doc=windows_per_doc,
                                 cutoff_year=cutoff_year, n_folds=folds, seed=seed, n_bootstrap=bootstrap,
                                 progress=not quiet)
    else:
        result = audit_rows(texts, labels, buckets, cutoff_year=cutoff_year, n_folds=folds, seed=seed,
                            n_bootstrap=bootstrap, group_prefix_words=group_prefix_words or None,
                            progress=not quiet)
    result["inputs"] = [str(p) for p in benchmark]
    result["wall_s"] = round(time.time() - t0, 1)
    write_report(result, out)
    write_html(out, report_page(result, out, classifiers=CLASSIFIERS, flag_auc=FLAG_AUC))
    typer.echo(markdown_table(result, CLASSIFIERS))
    typer.echo(f"wrote {out / 'shift_audit.json'}, {out / 'shift_audit.md'} ({result['wall_s']} s)", err=True)

    if debias:
        from curation.shift.debias import debias_rows

        for i, r in enumerate(rows):
            r.setdefault("id", f"{r.get('_file', 'row')}:{i}")
        kept, dropped, report = debias_rows(
            [{k: v for k, v in r.items() if k != "_file"} for r in rows], target_auc=target_auc, seed=seed,
            cutoff_year=cutoff_year, n_folds=folds, n_bootstrap=bootstrap, max_drop_frac=max_drop_frac,
            step_frac=step_frac, group_prefix_words=group_prefix_words or None, progress=not quiet)
        d = out / "debias"
        d.mkdir(parents=True, exist_ok=True)
        for name, part in (("kept", kept), ("dropped", dropped)):
            with (d / f"{name}.jsonl").open("w", encoding="utf-8") as f:
                for r in part:
                    f.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")
        (d / "debias_report.json").write_text(json.dumps(jsonable(report), indent=2, ensure_ascii=False) + "\n")
        typer.echo(report["message"])
    if fail_above is not None and result["overall"]["auc"] > fail_above:
        typer.echo(f"blind AUC {result['overall']['auc']:.3f} > --fail-above {fail_above}", err=True)
        raise typer.Exit(2)


def _load(paths: List[Path]):
    from curation.shift.release import load_benchmark

    try:
        return load_benchmark(paths)
    except (FileNotFoundError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("shift-audit")(shift_audit)


if __name__ == "__main__":  # pragma: no cover
    _app = typer.Typer(add_completion=False)
    register(_app)
    _app(sys.argv[1:])
