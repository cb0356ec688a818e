"""`tidemark rescore`: recompute detectors from a saved token-stats table, without the model."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def run_rescore(token_stats: str, methods: str = "all", out: str | None = None, seed: int = 0,
                n_bootstrap: int = 1000) -> dict:
    import pyarrow.parquet as pq

    from jobs.kit.report_out import command_line
    from scoring.detectors import parse_methods
    from jobs.kit.evaluation_files import write_outputs
    from scoring.stats.evaluation import compute_metrics, compute_scores, load_token_freq, token_sources

    ts_path = Path(token_stats)
    run_dir = ts_path.parent
    # Labels, buckets and which rows are evaluated come from the run that wrote the token stats.
    rows = pq.read_table(run_dir / "scores.parquet", columns=["id", "label", "bucket", "in_eval"]).to_pylist()
    table = pq.read_table(ts_path)
    views = set(table.column("view").to_pylist())
    resources = load_token_freq(run_dir / "token_freq.parquet") if (run_dir / "token_freq.parquet").exists() else {}
    chosen = parse_methods(methods)
    if methods == "all":  # keep what this table can serve
        sources = token_sources(table)
        chosen = [m for m in chosen if all(v in views or v in resources for v in m.needs) and _fits(m, sources)]
    out_dir = Path(out) if out else run_dir / "rescore"
    scores = compute_scores(table, rows, chosen, resources)
    metrics = compute_metrics(scores, chosen, seed=seed, n_bootstrap=n_bootstrap)
    report = write_outputs(out_dir, scores, metrics, chosen, {"benchmark": str(run_dir), "model": "(rescored)",
                                                              "token_stats": str(ts_path), "command": command_line()})
    return {"report": str(report), "scores": str(out_dir / "scores.parquet")}


def run_rescore_generations(generations: str, methods: str = "all", out: str | None = None, seed: int = 0,
                            n_bootstrap: int = 1000) -> dict:
    """A text-only run's scores recomputed from its generations.parquet alone (no server): with `all`, every
    generation detector whose prompt kinds the table holds."""
    import pyarrow.parquet as pq

    from jobs.kit.evaluation_files import write_outputs
    from jobs.kit.report_out import command_line
    from scoring.detectors.base import parse_methods
    from scoring.generation.scores import compute_generation_scores
    from scoring.stats.evaluation import compute_metrics

    path = Path(generations)
    run_dir = path.parent
    table = pq.read_table(path)
    rows = pq.read_table(run_dir / "scores.parquet", columns=["id", "label", "bucket", "in_eval"]).to_pylist()
    chosen = parse_methods(methods, input="generations")
    if methods == "all":  # keep what this table can serve
        kinds = set(table.column("kind").to_pylist())
        chosen = [m for m in chosen if all(k in kinds for k in m.needs)]
    scores, quarantined, not_scored = compute_generation_scores(table, rows, chosen)
    metrics = compute_metrics(scores, chosen, seed=seed, n_bootstrap=n_bootstrap)
    out_dir = Path(out) if out else run_dir / "rescore"
    report = write_outputs(out_dir, scores, metrics, chosen, {
        "benchmark": str(run_dir), "model": "(rescored from generations)", "generations": str(path),
        "counts": {"in": len(rows), "scored": scores.num_rows, "quarantined": len(quarantined)},
        "not_scored": not_scored, "command": command_line()})
    return {"report": str(report), "scores": str(out_dir / "scores.parquet")}


def _fits(method, sources) -> bool:
    """False for a detector the table's lp_source cannot serve (Min-K%++ on a served model's top-n stats)."""
    from scoring.detectors.base import DistributionError, distribution_gate

    try:
        distribution_gate([method], sources)
        return True
    except DistributionError:
        return False


def register(app: typer.Typer) -> None:
    @app.command("rescore")
    def rescore(
        token_stats: Optional[str] = typer.Option(None, help="token_stats.parquet written by `tidemark evaluate`"),
        generations: Optional[str] = typer.Option(None, help="generations.parquet written by a text-only `tidemark "
                                                  "evaluate` (--api-logprobs none): its scores, without the server"),
        methods: str = typer.Option("all", help="detectors to compute (same syntax as evaluate)"),
        out: Optional[str] = typer.Option(None, help="output dir (default: <run>/rescore)"),
        seed: int = typer.Option(0, help="bootstrap seed"),
    ):
        """Recompute detectors, metrics and report from saved token statistics (or a text-only run's generations),
        without loading any model or asking any server."""
        from scoring.detectors.base import DistributionError, InputError

        if (token_stats is None) == (generations is None):
            raise typer.BadParameter("give one of --token-stats and --generations")
        try:
            res = (run_rescore(token_stats, methods, out, seed) if token_stats else
                   run_rescore_generations(generations, methods, out, seed))
        except (DistributionError, InputError) as exc:  # e.g. min_k_pp asked of a served model's stats
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(Path(res["report"]).read_text())
