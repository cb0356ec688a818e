"""`tidemark evaluate`: read a benchmark → tokenise views (CPU actors) → score (model actor pool, GPU when asked)
→ detectors → metrics, plots and report. The pipeline is Ray Data; everything it runs is Ray-free code in
scoring/.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Optional

import numpy as np
import typer

from jobs.report_cli import run_and_print_report


@dataclass
class EvaluateConfig:
    benchmark: str
    model: str
    out: str
    ref_model: Optional[str] = None
    methods: str = "all"
    actors: int = 1
    gpus_per_actor: float = 0.0
    batch_size: Optional[int] = None  # sequences per forward pass; None = device default (1 on CPU, 64 on GPU)
    context: Optional[int] = None
    stride: Optional[int] = None
    recall_shots: int = 3
    ref_corpus: Optional[str] = None
    calibrate: str = "accuracy"
    seed: int = 0
    n_bootstrap: int = 1000
    progress: bool = True
    shard_size: int = 1000  # rows per resumable shard (jobs/shards.py)
    resume: bool = True  # reuse finished shards; a finished job with the same fingerprint is a no-op
    requester_pays: bool = False  # reading an s3:// benchmark from a requester-pays bucket
    extra: dict = field(default_factory=dict)


def resolve_methods(cfg: EvaluateConfig):
    from scoring.detectors import parse_methods

    methods = parse_methods(cfg.methods)
    if not cfg.ref_model:
        if any(m.name == "ref" for m in methods) and cfg.methods not in ("all", None):
            raise typer.BadParameter("detector 'ref' needs --ref-model")
        methods = [m for m in methods if m.name != "ref"]
    return methods


def choose_recall_prefix(rows: list[dict], shots: int, seed: int) -> tuple[str, set[str]]:
    """ReCaLL's prefix: `shots` known non-members, drawn with a seed. They leave the evaluation set."""
    rng = np.random.default_rng(seed)
    non = [r for r in rows if r["label"] == 0]
    if len(non) < shots:
        raise ValueError(f"recall needs {shots} non-member rows for its prefix; the benchmark has {len(non)}")
    picked = [non[i] for i in sorted(rng.choice(len(non), size=shots, replace=False))]
    return "\n\n".join(r["input"] for r in picked) + "\n\n", {r["id"] for r in picked}


def _ensure_ray():
    import ray

    if not ray.is_initialized():
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, logging_level="WARNING")
    return ray


def score_on_ray(rows: list[dict], cfg: EvaluateConfig, views: tuple[str, ...], prefix_text: str | None):
    """The Ray Data pipeline. Returns the scored token-stats rows of the target (and reference) model."""
    import pyarrow as pa

    ray = _ensure_ray()
    return pa.concat_tables(ray.get(scoring_dataset(rows, cfg, views, prefix_text).to_arrow_refs()))


def scoring_specs(cfg: EvaluateConfig, views: tuple[str, ...], prefix_text: str | None) -> dict:
    """How to score: per branch (the target model, and the reference model if any) the TokenizeTask and ScoreTask
    constructor arguments, and what one scorer actor asks of the cluster. The Ray Data pipeline below and the
    row-isolating fallback in jobs/shards.py both build their actors from this, so they score identically."""
    from scoring.tasks import default_threads, hooks_from_env

    ray = _ensure_ray()
    cpus = ray.cluster_resources().get("CPU", 1)
    on_gpu = cfg.gpus_per_actor > 0
    # Fractional CPUs: an actor pool of N with 1 CPU each can starve the tokeniser on a small machine.
    actor_cpus = 1.0 if on_gpu else max(0.25, min(1.0, (cpus - 0.25) / max(1, cfg.actors)))
    threads = 2 if on_gpu else default_threads(cfg.actors)
    scorer_kwargs = {k: v for k, v in {"context": cfg.context, "stride": cfg.stride,
                                       "max_batch_size": cfg.batch_size}.items() if v}
    hooks = hooks_from_env()  # audit log / fault injection (scoring/tasks.py), read here in the driver

    def branch(model: str, branch_views, rename=None) -> dict:
        return {"tokenize": {"model": model, "views": tuple(branch_views), "prefix_text": prefix_text,
                             "rename_original": rename},
                "score": {"model": model, "scorer_kwargs": scorer_kwargs, "threads": threads,
                          "device": "cuda" if on_gpu else "cpu", "hooks": hooks}}

    branches = [branch(cfg.model, views)]
    if cfg.ref_model:
        branches.append(branch(cfg.ref_model, ("original",), rename="ref"))
    return {"branches": branches, "num_cpus": actor_cpus, "num_gpus": cfg.gpus_per_actor or None}


def scoring_dataset(rows: list[dict], cfg: EvaluateConfig, views: tuple[str, ...], prefix_text: str | None):
    """The Ray Data pipeline, not yet executed: text rows → tokenised views → scored token-stats rows."""
    import pyarrow as pa

    from scoring.tasks import ScoreTask, TokenizeTask

    ray = _ensure_ray()
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = cfg.progress
    specs = scoring_specs(cfg, views, prefix_text)
    texts = pa.Table.from_pylist([{"id": r["id"], "input": r["input"]} for r in rows])
    # Several blocks so every actor gets work. Slicing beats .repartition(): a repartition is a 1-CPU task that
    # can starve forever behind the actor pools on a 2-core machine.
    n_blocks = max(cfg.actors * 4, math.ceil(len(rows) / 64))
    step = max(1, math.ceil(len(rows) / n_blocks))
    ds = ray.data.from_arrow([texts.slice(i, step) for i in range(0, len(rows), step)])

    def branch(spec: dict):
        tok = ds.map_batches(TokenizeTask, fn_constructor_kwargs=spec["tokenize"], batch_format="pyarrow",
                             batch_size=64, compute=ray.data.ActorPoolStrategy(size=1), num_cpus=0.25)
        return tok.map_batches(ScoreTask, fn_constructor_kwargs=spec["score"], batch_format="pyarrow",
                               batch_size=32, compute=ray.data.ActorPoolStrategy(size=cfg.actors),
                               num_cpus=specs["num_cpus"], num_gpus=specs["num_gpus"], max_restarts=2,
                               max_task_retries=2)

    out = branch(specs["branches"][0])
    for spec in specs["branches"][1:]:
        out = out.union(branch(spec))
    return out


def token_freq_resource(token_stats, cfg: EvaluateConfig, tok=None) -> np.ndarray:
    """DC-PDD's reference frequencies: from --ref-corpus when given, else from the benchmark's own token ids
    (label-free, so it leaks no membership; a large general corpus is better and is what the paper used)."""
    from scoring.detectors.dc_pdd import count_tokens
    from scoring.model import load_tokenizer

    tok = tok if tok is not None else load_tokenizer(cfg.model)
    vocab = len(tok)
    if cfg.ref_corpus:
        from jobs.corpus_io import iter_texts

        return count_tokens((tok(t)["input_ids"] for t in iter_texts(cfg.ref_corpus)), vocab)
    orig = token_stats.filter(np.asarray([v == "original" for v in token_stats.column("view").to_pylist()]))
    return count_tokens(orig.column("token_ids").to_pylist(), vocab)


def run_evaluate(cfg: EvaluateConfig) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jobs import shards as sharding
    from jobs.blind_baseline import BlindBaselineJob
    from jobs.redact import redact
    from scoring.evaluation import compute_metrics, compute_scores, save_token_freq, write_outputs
    from scoring.model import load_tokenizer
    from scoring.tokenstats import TOKEN_STATS_SCHEMA
    from scoring.views import ORIGINAL, PREFIXED, strip_prefixes

    t0 = time.perf_counter()
    dest = sharding.output_location(cfg)  # a local directory or an s3:// prefix
    out = sharding.local_output_dir(dest)  # where the files are made: OUT itself, or a staging dir for S3
    phases = PhaseClock()  # wall time per stage, in run.json: where a slow job spends its time
    methods = resolve_methods(cfg)
    needs = sorted({v for m in methods for v in m.needs})
    # DC-PDD needs the vocabulary size after scoring; importing transformers for it costs seconds, so it loads
    # now, in a thread, while Ray starts and leaves the CPU half idle.
    tokenizer = _background(load_tokenizer, cfg.model) if "token_freq" in needs else None
    rows, quarantined = sharding.read_benchmark_any(cfg)
    phases.lap("read")
    n_in = len(rows) + len(quarantined)
    views = (ORIGINAL, *[v for v in needs if v not in ("ref", "token_freq")])
    prefix_text, prefix_ids = (None, set())
    if PREFIXED in views:
        prefix_text, prefix_ids = choose_recall_prefix(rows, cfg.recall_shots, cfg.seed)

    scoring_fp = sharding.scoring_fingerprint(cfg, views, prefix_text)
    job_fp = sharding.job_fingerprint(cfg, scoring_fp, rows, quarantined)
    done = sharding.completed_result(dest, job_fp, out) if cfg.resume else None
    if done is not None:  # the same job already finished here: nothing to do
        sharding.echo(f"{dest.uri} already holds this job's complete output (_SUCCESS); nothing to do")
        return done
    dest.clear_complete()  # from here on, this location is not complete until the new marker is written
    sharder = sharding.ShardedScorer(rows, cfg, views, prefix_text, dest, dataset_fn=scoring_dataset,
                                     specs_fn=scoring_specs, fingerprint=scoring_fp, resume=cfg.resume)
    # The blind baseline needs no model: it runs in a low-priority process while the model scores.
    blind_job = BlindBaselineJob(rows, prefix_ids, cfg.seed, cfg.benchmark)
    try:
        if rows:
            _ensure_ray()
            phases.lap("Ray start-up (or connect)")
        scored = sharder.run() if rows else TOKEN_STATS_SCHEMA.empty_table()
    except BaseException:
        blind_job.close()  # stop the helper now rather than wait for it at exit
        raise
    phases.lap("score (actor start-up included)")
    token_stats = strip_prefixes(scored, TOKEN_STATS_SCHEMA)

    # A row leaves as scored only if its original view was scored; otherwise it is quarantined with the error.
    errs = token_stats.select(["id", "view", "error"]).to_pydict()
    failed = {i: e for i, v, e in zip(errs["id"], errs["view"], errs["error"]) if v == ORIGINAL and e}
    quarantined += [{"id": i, "stage": "score", "reason": e.split(":")[0], "detail": e} for i, e in failed.items()]
    good = [dict(r, in_eval=r["id"] not in prefix_ids) for r in rows if r["id"] not in failed]
    counts = {"in": n_in, "scored": len(good), "quarantined": len(quarantined),
              "recall_prefix": len(prefix_ids & {r["id"] for r in good})}
    if counts["in"] != counts["scored"] + counts["quarantined"]:
        raise RuntimeError(f"row accounting does not reconcile: {counts}")

    resources = {}
    if "token_freq" in needs:
        resources["token_freq"] = token_freq_resource(token_stats, cfg, tokenizer.result())
        save_token_freq(resources["token_freq"], out / "token_freq.parquet")
    pq.write_table(token_stats, out / "token_stats.parquet")
    pq.write_table(pa.Table.from_pylist(quarantined, schema=pa.schema(
        [("id", pa.string()), ("stage", pa.string()), ("reason", pa.string()), ("detail", pa.string())])),
        out / "quarantine.parquet")
    if not good:
        raise RuntimeError(f"no row could be scored; see {out / 'quarantine.parquet'}")
    phases.lap("token stats written")
    scores = compute_scores(token_stats, good, methods, resources)
    phases.lap("detectors")
    metrics = compute_metrics(scores, methods, seed=cfg.seed, n_bootstrap=cfg.n_bootstrap, calibrate=cfg.calibrate,
                              counts=counts)
    phases.lap("metrics")
    blind = blind_job.result(good)
    phases.lap("blind baseline (waiting for it)")
    if blind:
        (out / "blind_baseline.json").write_text(json.dumps(blind["result"], indent=2, default=float))
    run_info = redact({"benchmark": str(cfg.benchmark), "model": cfg.model, "ref_model": cfg.ref_model,
                       "config": asdict(cfg), "counts": counts, "views": list(views),
                       "recall_prefix_ids": sorted(prefix_ids), "seconds": round(time.perf_counter() - t0, 2),
                       "shards": sharder.stats if rows else {}, "fingerprint": job_fp,
                       "blind_baseline": blind["source"] if blind else None, "phases_s": phases.laps})
    report = write_outputs(out, scores, metrics, methods, run_info, blind["auc"] if blind else None)
    phases.lap("report and plots")
    sharding.publish(dest, out, {"job": "evaluate", "fingerprint": job_fp, "counts": counts,
                                 "run_id": sharder.run_id if rows else None})
    return {"report": str(report), "metrics": metrics, "counts": counts, "seconds": run_info["seconds"],
            "blind": blind["auc"] if blind else None, "phases_s": phases.laps}


def _background(fn, *args):
    """Run `fn(*args)` in a daemon thread; `.result()` waits for it and re-raises its exception."""
    import concurrent.futures as cf

    pool = cf.ThreadPoolExecutor(1, thread_name_prefix="tidemark-prefetch")
    future = pool.submit(fn, *args)
    pool.shutdown(wait=False)
    return future


class PhaseClock:
    """Seconds spent between successive `lap(name)` calls."""

    def __init__(self):
        self.laps: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self._t, 3)
        self._t = now


def register(app: typer.Typer) -> None:
    @app.command("evaluate")
    def evaluate(
        benchmark: str = typer.Option(..., help="jsonl or Parquet with `input`, `label` (1 = member), optional `bucket`/`id`; or a release dir"),
        model: str = typer.Option(..., help="HF causal LM: local dir, hub id, FILE.gguf, DIR::FILE.gguf, or `smollm2`"),
        out: str = typer.Option(..., help="output directory or s3:// prefix (complete when _SUCCESS is there)"),
        ref_model: Optional[str] = typer.Option(None, help="reference model for the `ref` detector"),
        methods: str = typer.Option("all", help="comma-separated detectors, params with @: `loss,min_k@k=0.1,pac@n=3`"),
        actors: int = typer.Option(1, help="scorer actors (model replicas)"),
        gpus_per_actor: float = typer.Option(0.0, help="GPUs per scorer actor (0 = CPU)"),
        batch_size: Optional[int] = typer.Option(None, help="sequences per forward pass (default: 1 on CPU, 64 on GPU)"),
        context: Optional[int] = typer.Option(None, help="window length in tokens (default: model max, ≤2048)"),
        stride: Optional[int] = typer.Option(None, help="window stride for long texts (default: context/2)"),
        recall_shots: int = typer.Option(3, help="non-member texts in the ReCaLL prefix (excluded from evaluation)"),
        ref_corpus: Optional[str] = typer.Option(None, help="text/jsonl file or dir: DC-PDD token frequencies"),
        calibrate: str = typer.Option("accuracy", help="threshold objective on a 30% calibration split: accuracy|f1"),
        seed: int = typer.Option(0, help="seed for bootstrap, PAC copies, ReCaLL prefix and calibration split"),
        quiet: bool = typer.Option(False, help="no progress bars"),
        shard_size: int = typer.Option(1000, min=1, help="rows per shard: each finished shard is saved under "
                                       "OUT/shards/ with a completion marker, so a restarted job resumes"),
        resume: bool = typer.Option(True, help="reuse finished shards (and skip a finished job); --no-resume "
                                    "rescores everything"),
        requester_pays: bool = typer.Option(False, help="read an s3:// --benchmark from a requester-pays bucket"),
    ):
        """Score a membership benchmark with every detector from one forward pass per view, on a Ray actor pool."""
        cfg = EvaluateConfig(benchmark=benchmark, model=model, out=out, ref_model=ref_model, methods=methods,
                             actors=actors, gpus_per_actor=gpus_per_actor, batch_size=batch_size, context=context,
                             stride=stride, recall_shots=recall_shots, ref_corpus=ref_corpus, calibrate=calibrate,
                             seed=seed, progress=not quiet, shard_size=shard_size, resume=resume,
                             requester_pays=requester_pays)
        run_and_print_report(run_evaluate, cfg)
