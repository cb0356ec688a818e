"""`tidemark demo`: the main job end to end on an embedded default, offline: a known-membership split of the
State of the Union corpus, a tiny GPT-2 trained on its members for a few seconds, then `evaluate` on local Ray."""
from __future__ import annotations

import json
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        out: str = typer.Option("runs/demo", help="output directory"),
        n_per_label: int = typer.Option(100, help="member and non-member passages each"),
        repeats: int = typer.Option(3, help="times each member passage is seen in training"),
        train_seconds: float = typer.Option(10.0, help="training wall time for the tiny GPT-2"),
        methods: str = typer.Option("all", help="detectors to run"),
        seed: int = typer.Option(0, help="seed for the split, training and detectors"),
        study: bool = typer.Option(True, help="also run the quick controlled contamination study (~1 min): "
                                              "Min-K% AUC vs how often a contaminant was seen"),
    ):
        """Train a tiny GPT-2 on known members (SOTU passages) and evaluate every detector on it with Ray; then a
        quick controlled contamination study (`tidemark contamination-study --quick`)."""
        from jobs.commands.evaluate import EvaluateConfig, run_evaluate
        from jobs.kit.studies import build_known_membership

        out_dir = Path(out)
        steps = 3 if study else 2
        typer.echo(f"[1/{steps}] building a known-membership split and training a tiny GPT-2 ({train_seconds:g} s) ...")
        known = build_known_membership(out_dir / "study", n_per_label=n_per_label, repeats=repeats,
                                       train_seconds=train_seconds, seed=seed, progress=True)
        typer.echo(f"      model: {known['model']}  ({known['train']['params']:,} params, "
                   f"{known['train']['steps']} steps, loss {known['train']['final_loss']:.2f})")
        typer.echo(f"[2/{steps}] tidemark evaluate on local Ray ...")
        res = run_evaluate(EvaluateConfig(benchmark=known["benchmark"], model=known["model"],
                                          out=str(out_dir / "evaluate"), methods=methods, seed=seed,
                                          runner="ray"))  # the demo shows the Ray job, small as its input is
        (out_dir / "study.json").write_text(json.dumps(known, indent=2, default=str))
        typer.echo(Path(res["report"]).read_text())
        typer.echo(f"report: {res['report']}")
        if study:
            from jobs.commands.contamination_study import pool_scorer
            from scoring.studies.contamination import QUICK, StudyConfig
            from jobs.kit.studies import run_study

            typer.echo(f"[3/{steps}] controlled contamination study (quick): contaminants inserted 1× and 4× "
                       "into a background corpus, continued training, AUC per detector ...")
            study_dir = out_dir / "contamination_study"
            run_study(StudyConfig(out=str(study_dir), seed=seed, **QUICK), pool_scorer(study_dir, seed),
                      log=typer.echo)
            typer.echo((study_dir / "report.md").read_text())
            typer.echo(f"study report: {study_dir / 'report.md'}  plot: {study_dir / 'auc_vs_repeats.png'}")
