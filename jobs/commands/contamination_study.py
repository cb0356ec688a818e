"""`tidemark contamination-study`: insert known contaminants into a corpus, continue training a tiny GPT-2, and
measure how each detector's AUC moves with the number of repeats and the learning rate. The study itself is
scoring/studies/contamination.py; this is the command line."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from jobs.plane.runners import RAY


def _floats(spec: str, name: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in spec.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"{name} must be comma-separated numbers, got {spec!r}") from None


def _ints(spec: str, name: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in spec.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"{name} must be comma-separated integers, got {spec!r}") from None


def _texts(spec: str, what: str, min_words: int = 1) -> list[str]:
    from jobs.parts.doc_inputs import read_documents

    docs, bad = read_documents(spec, min_words=min_words)
    if bad:
        typer.echo(f"{what}: {len(bad)} inputs quarantined (first: {bad[0]['id']}: {bad[0]['reason']})", err=True)
    if not docs:
        raise typer.BadParameter(f"{spec}: no usable {what} text")
    return [d["text"] for d in docs]


def pool_scorer(out: Path, seed: int, progress: bool = False, via_api: str | None = None):
    """The study's `score`: each cell's model scores the evaluation rows on the shared scoring pool
    (jobs/plane/part_loop.py), writing its parts under OUT/cells/<cell>/; only the score columns come back. A re-run
    reuses a cell whose model and rows are unchanged. `via_api` (echo | logit-bias): the cell's model is served
    on 127.0.0.1 by the loopback server for the cell's duration and scored through its OpenAI-compatible API."""
    def score(model_dir: Path, benchmark: Path, cell: str, methods) -> dict:
        from contextlib import ExitStack

        from jobs.kit.runtime import start_driver
        from jobs.plane.scoring_pool import ModelBranch, ScoringSpec
        from jobs.kit.identity import model_identity

        start_driver()
        with ExitStack() as stack:
            if via_api:
                from jobs.kit.served_model import served_model
                from scoring.api.loopback import LoopbackServer

                server = stack.enter_context(LoopbackServer(str(model_dir), name=cell))
                served = served_model(model=cell, api_base=server.url, tokenizer=str(model_dir), mode=via_api,
                                      top_logprobs=5, concurrency=8, rps=0.0, actors=1, context=None)
                spec, identity = ScoringSpec((served.branch(("original",)),)), served.identity()
            else:
                spec = ScoringSpec((ModelBranch(str(model_dir), ("original",)),))  # the device's batch policy
                identity = model_identity(str(model_dir))
            return _score_cell(out / "cells" / cell, spec, identity, benchmark, cell, methods, seed, progress)

    return score


def _score_cell(dest_dir: Path, spec, identity, benchmark: Path, cell: str, methods, seed: int, progress: bool):
    import pyarrow.compute as pc

    from jobs.plane.part_loop import score_benchmark
    from jobs.plane.part_store import read_parts
    from jobs.kit.identity import json_digest, tool_version
    from curation.io.outputs import Location

    dest = Location(dest_dir)
    fingerprint = json_digest({"model": identity, "methods": [m.column for m in methods], "tool": tool_version()})
    run = score_benchmark(benchmark=str(benchmark), requester_pays=False, rows_per_part=1000, dest=dest,
                          spec=spec, runner=RAY, methods=methods, seed=seed,
                          fingerprint_for=lambda *_: fingerprint, progress=progress)
    if run.ledger.quarantined:
        raise RuntimeError(f"{cell}: {run.ledger.quarantined} evaluation rows could not be scored "
                           f"({dict(run.ledger.reasons)}); see {dest.child('quarantine.parquet')}")
    table = read_parts(dest, "scores.parquet", ["id", *[m.column for m in methods]])
    table = table.take(pc.sort_indices(table, [("id", "ascending")]))  # ids e00000… are the row order
    return {m.column: table.column(m.column).to_numpy() for m in methods}


def register(app: typer.Typer) -> None:
    @app.command("contamination-study")
    def contamination_study(
        out: str = typer.Option("runs/contamination_study", help="output directory (results.json, report.md, "
                                                                  "auc_vs_repeats.png, models/)"),
        corpus: Optional[str] = typer.Option(None, help="background corpus: folder/glob of .txt or a jsonl file "
                                                         "(default: SOTU addresses outside the contaminant pool)"),
        contaminants: Optional[str] = typer.Option(None, help="contaminant pool: jsonl (question/answer, text or input) "
                                                               "or .txt files; split at random into inserted and held-out "
                                                               "(default: 64-word SOTU passages)"),
        repeats: Optional[str] = typer.Option(None, help="times each contaminant is inserted, comma-separated [1,2,4]"),
        lr: Optional[str] = typer.Option(None, help="continued-training learning rates, comma-separated [1e-4,1e-3]"),
        n_contaminants: Optional[int] = typer.Option(None, help="contaminants inserted (as many held out) [100]"),
        methods: str = typer.Option("loss,min_k,min_k_pp,zlib", help="detectors (original-text ones)"),
        base_seconds: Optional[float] = typer.Option(None, help="pretraining time of the base model [30]"),
        base_steps: Optional[int] = typer.Option(None, help="pretrain the base model for this many steps instead "
                                                            "(reproducible whatever the machine's speed)"),
        corpus_words: Optional[int] = typer.Option(None, help="background words per continued-training epoch [30000]"),
        seed: int = typer.Option(0, help="seed for the split, training and bootstrap"),
        quick: bool = typer.Option(False, "--quick", help="a reduced study for demos (~1–2 min on 2 CPU cores): "
                                                         "repeats 1,4, lr 1e-3, 60 contaminants, 10 s base, 15k words"),
        via_api: Optional[str] = typer.Option(None, "--via-api", help="echo | logit-bias: score each cell's model "
                                              "through its OpenAI-compatible API (a loopback server on 127.0.0.1), "
                                              "as a served model would be; min_k_pp becomes min_k_pp@topk=5"),
    ):
        """Controlled contamination: AUC per detector × repeats × learning rate, with a plot. Minutes on a CPU."""
        from jobs.kit.identity import open_output, publish
        from scoring.studies.contamination import QUICK, StudyConfig
        from jobs.kit.studies import run_study

        kw = dict(QUICK) if quick else {}
        given = {"repeats": _ints(repeats, "--repeats") if repeats else None,
                 "lrs": _floats(lr, "--lr") if lr else None, "n_contaminants": n_contaminants,
                 "base_seconds": base_seconds, "base_steps": base_steps, "corpus_words": corpus_words}
        kw.update({k: v for k, v in given.items() if v is not None})
        if via_api not in (None, "echo", "logit-bias"):
            raise typer.BadParameter("--via-api must be echo or logit-bias")
        if via_api:  # over an API only the top-n is known: the approximation, named in the column
            methods = ",".join("min_k_pp@topk=5" if m.strip() == "min_k_pp" else m for m in methods.split(","))
        dest, local = open_output(out)  # a local directory or an s3:// prefix; `_SUCCESS` is written last
        cfg = StudyConfig(out=str(local), corpus=_texts(corpus, "corpus") if corpus else None,
                          pool=_texts(contaminants, "contaminant") if contaminants else None,
                          methods=methods, seed=seed, scored_via=f"api:{via_api}" if via_api else "weights", **kw)
        try:
            summary = run_study(cfg, pool_scorer(Path(local), seed, via_api=via_api), log=typer.echo)
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        publish(dest, local, {"job": "contamination-study"})
        typer.echo(Path(local, "report.md").read_text())
        typer.echo(f"results: {Path(local, 'results.json')}  plot: {Path(local, 'auc_vs_repeats.png')}  "
                   f"({summary['seconds']} s)")
