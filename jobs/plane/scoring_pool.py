"""The scoring pool: one Ray Data pipeline that scores benchmark *parts* end to end on the workers.

    part spec ──▶ PrepareParts (CPU actor pool, autoscaling to the cluster's CPUs; without GPUs, inside the first
                  model's scorer actors instead): read the part, quarantine bad rows, tokenise every view of every model
              ──▶ ScoreParts (one actor pool per model: target, then reference): forward passes packed by a token
                  budget over the part's sequences sorted by length (scoring/lm/scorer.py)
              ──▶ the last model's actors also run every detector on the part's token stats and write
                  token_stats / scores / quarantine part files straight to the output (local or s3://)
              ──▶ the driver receives one small summary per part (counts, file digests) and commits its marker.

Other part kinds plug into the same pool through `PoolStages`: doc-mia's document parts (jobs/parts/doc_mia/documents.py) are read
and tokenised on the CPU stage and scored, whole document at a time, on the model's actor pool.

A part travels as ONE row whose columns hold Arrow IPC bytes, so Ray Data never splits a part across blocks and
every stage sees a whole part: batch composition depends only on the part, so a resumed run scores exactly as an
uninterrupted one. The stage classes import no Ray; a GPU machine without Ray (or a unit test) calls them directly.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import pyarrow as pa

from jobs.plane.benchmark_parts import PartSpec, read_part
from curation.io.ledger import quarantine_record, quarantine_table
from jobs.plane.pool_sizing import cluster_cpus, cluster_memory, pool_actors, scorer_resources
from jobs.plane.retry_policy import SCORER_MAX_RESTARTS, SCORER_MAX_TASK_RETRIES, STALL_TIMEOUT_S
from scoring.lm.views import is_late_view

ROWS_SCHEMA = pa.schema([("id", pa.string()), ("label", pa.int8()), ("bucket", pa.string()),
                         ("in_eval", pa.bool_()), ("input", pa.string())])
WORKER_FAILED = "worker_failed"


@dataclass(frozen=True)
class ModelBranch:
    """One model and the views it scores; the reference model scores the original text, named `ref`."""

    model: str
    views: tuple[str, ...]
    rename_original: str | None = None
    tokenizer: str | None = None  # a served model's local tokenizer (default: the model's own)
    api: dict | None = None  # a served model: the probed ApiConfig fields + context (jobs/kit/served_model.py)


@dataclass(frozen=True)
class ScoringSpec:
    """What a job asks of the pool. Jobs declare this; nothing builds another job's config."""

    branches: tuple[ModelBranch, ...]
    prefix_text: str | None = None
    context: int | None = None
    stride: int | None = None
    max_batch_size: int | None = None  # sequences per forward pass (device default when None)
    max_batch_tokens: int | None = None  # padded tokens per forward pass
    actors: int = 0  # scorer actors per model; 0: as many as suit the cluster (pool_actors)
    gpus_per_actor: float = 0.0
    hooks: dict = field(default_factory=dict)  # audit log / fault injection (jobs/plane/tasks.py)
    neighbour_model: str | None = None  # the masked LM that makes the `nbr:` views (neighbourhood attack)
    prefixes: tuple[tuple[str, str], ...] = ()  # Con-ReCall's (view, prefix text) pairs (scoring/lm/views.py)
    context_pool: tuple[tuple[str, str], ...] = ()  # CoDeC's (id, text) pool (jobs/plane/survey.context_pool)
    stall_timeout_s: float = STALL_TIMEOUT_S  # no part finished in this long: the job stops (jobs/plane/retry_policy.py)

    @property
    def device(self) -> str:
        return "cuda" if self.gpus_per_actor > 0 else "cpu"

    def expected_views(self) -> list[str]:
        return sorted(v if (v != "original" or not b.rename_original) else b.rename_original
                      for b in self.branches for v in b.views)

    def score_kwargs(self, branch: ModelBranch, threads: int | None) -> dict:
        scorer = {k: v for k, v in {"context": self.context, "stride": self.stride,
                                    "max_batch_size": self.max_batch_size,
                                    "max_batch_tokens": self.max_batch_tokens}.items() if v}
        late = [v for v in branch.views if is_late_view(v)]
        if late and not self.neighbour_model:
            raise ValueError(f"views {late[:2]}... need a neighbour model (--neighbour-model)")
        return {"model": branch.model, "scorer_kwargs": scorer, "threads": threads, "device": self.device,
                "hooks": dict(self.hooks), "api": branch.api, "tokenizer": branch.tokenizer,
                "neighbours": {"model": self.neighbour_model, "views": late} if late else None}

    def tokenize_kwargs(self, branch: ModelBranch) -> dict:
        views = tuple(v for v in branch.views if not is_late_view(v))  # the scorer actor makes the others
        return {"model": branch.model, "views": views, "prefix_text": self.prefix_text,
                "rename_original": branch.rename_original, "tokenizer": branch.tokenizer, "prefixes": self.prefixes,
                "context_pool": self.context_pool}


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


# ---------------------------------------------------------------- stage 1: read + tokenise (CPU)

class PrepareParts:
    """Part spec rows (`part`: PartSpec JSON, `drop`: JSON list of in-part line numbers that are later duplicates)
    → one row per part with its rows, read-quarantine and tokenised views (one column per model) as IPC bytes."""

    def __init__(self, spec: ScoringSpec, exclude_ids: Sequence[str] = (), tokenize: bool = True):
        from jobs.plane.tasks import TokenizeTask

        # a text-only job (jobs/parts/text_only/generation.py) reads and quarantines here, and tokenises nothing
        self.tokenizers = [TokenizeTask(**spec.tokenize_kwargs(b)) for b in spec.branches] if tokenize else []
        self.exclude = frozenset(exclude_ids)  # scored, but not evaluated (the ReCaLL prefix rows)

    def prepare(self, part_json: str, drop_json: str) -> dict:
        part = PartSpec.from_json(part_json)
        got = read_part(part)
        drop = set(json.loads(drop_json or "[]"))
        quarantined = list(got.quarantined)
        rows = []
        for r in got.rows:
            if r["line"] in drop:
                quarantined.append(quarantine_record(r["id"], "read", "duplicate_id", "an earlier row has the same id"))
            else:
                rows.append(r)
        seen, unique = set(), []
        for r in rows:  # duplicates inside the part (the driver's drop list covers those across parts)
            if r["id"] in seen:
                quarantined.append(quarantine_record(r["id"], "read", "duplicate_id", "an earlier row has the same id"))
            else:
                seen.add(r["id"])
                unique.append(r)
        table = pa.Table.from_pylist([{"id": r["id"], "label": r["label"], "bucket": r["bucket"],
                                       "in_eval": r["id"] not in self.exclude, "input": r["input"]} for r in unique],
                                     schema=ROWS_SCHEMA)
        out = {"index": part.index, "n_lines": got.n_lines, "rows": to_ipc(table),
               "quarantine": to_ipc(quarantine_table(quarantined))}
        texts = table.select(["id", "input"])
        for k, tok in enumerate(self.tokenizers):
            out[f"tokens_{k}"] = to_ipc(tok(texts) if texts.num_rows else _empty_tokens())
        return out

    def __call__(self, batch: pa.Table) -> pa.Table:
        cols = batch.to_pydict()
        return pa.Table.from_pylist([self.prepare(p, d) for p, d in zip(cols["part"], cols["drop"])])


def _empty_tokens() -> pa.Table:
    from jobs.plane.tasks import TOKENIZED_SCHEMA

    return TOKENIZED_SCHEMA.empty_table()


# ---------------------------------------------------------------- stage 2: score (+ detect and write, last model)

class PartFinisher:
    """Detect and write one part: token stats in benchmark order, a score row per scored text, the quarantine.
    Runs where the token stats are (the last scorer actor, or the driver's isolation fallback)."""

    def __init__(self, spec: ScoringSpec, dest: str, methods: Sequence, resources: dict | None = None):
        from curation.io.outputs import Location

        self.spec, self.dest = spec, Location(dest)
        self.methods, self.resources = list(methods), dict(resources or {})
        self.view_order = {v: i for i, v in enumerate((*spec.branches[0].views, "ref"))}

    def finish(self, index: int, rows: pa.Table, quarantined: pa.Table, scored: pa.Table, how: str) -> dict:
        from scoring.stats.evaluation import compute_scores
        from scoring.lm.tokenstats import TOKEN_STATS_SCHEMA
        from scoring.lm.views import ORIGINAL, strip_prefixes

        t0 = time.perf_counter()
        ts = strip_prefixes(scored, TOKEN_STATS_SCHEMA)
        pos = {rid: i for i, rid in enumerate(rows.column("id").to_pylist())}
        ids, views, errors = (ts.column(c).to_pylist() for c in ("id", "view", "error"))
        self._check(index, pos, ids, views, errors)
        order = sorted(range(len(ids)), key=lambda i: (pos[ids[i]], self.view_order.get(views[i], 99), views[i]))
        ts = ts.take(pa.array(order, type=pa.int64()))  # typed: an empty part's [] would be a null array
        failed = {i: e for i, v, e in zip(ids, views, errors) if v == ORIGINAL and e}
        good = [r for r in rows.select(["id", "label", "bucket", "in_eval"]).to_pylist() if r["id"] not in failed]
        q = quarantine_table([*quarantined.to_pylist(),
                              *[quarantine_record(i, "score", e.split(":")[0], e) for i, e in failed.items()]])
        schema = scores_schema(self.methods)
        scores = (compute_scores(ts, good, self.methods, self.resources).select(schema.names).cast(schema) if good
                  else schema.empty_table())
        name = f"part-{index:05d}.parquet"
        files = {"token_stats": self.dest.write_parquet(f"token_stats.parquet/{name}", ts),
                 "scores": self.dest.write_parquet(f"scores.parquet/{name}", scores),
                 "quarantine": self.dest.write_parquet(f"quarantine.parquet/{name}", q)}
        if any(is_late_view(v) for v in self.spec.branches[0].views):
            files["neighbours"] = self.dest.write_parquet(f"neighbours.parquet/{name}", neighbour_table(ts, rows))
        reasons = dict(Counter(q.column("reason").to_pylist()))
        return {"index": index, "how": how, "rows_in": rows.num_rows + quarantined.num_rows, "scored": len(good),
                "quarantined": q.num_rows, "reasons": reasons, "token_rows": ts.num_rows,
                "worker_failed": sum(1 for e in failed.values() if e.startswith(WORKER_FAILED)),
                "detect_write_s": round(time.perf_counter() - t0, 3), "files": files}

    def _check(self, index, pos, ids, views, errors) -> None:
        """Every row has exactly the expected views, or failed as a whole on its worker."""
        from curation.io.ledger import ReconcileError

        want = self.spec.expected_views()
        got: dict[str, list[str]] = {}
        worker_failed = set()
        for i, v, e in zip(ids, views, errors):
            got.setdefault(i, []).append(v)
            if e and e.startswith(WORKER_FAILED):
                worker_failed.add(i)
        extra = set(got) - set(pos)
        bad = [i for i in pos if sorted(got.get(i, ())) != want and i not in worker_failed]
        if extra or bad:
            raise ReconcileError(f"part {index}: row accounting does not reconcile: {len(pos)} rows in, {len(bad)} "
                                  f"without exactly the views {want} (e.g. {bad[:3]}), {len(extra)} unexpected ids")


NEIGHBOURS_SCHEMA = pa.schema([("id", pa.string()), ("neighbour", pa.int32()), ("text", pa.string()),
                               ("offset", pa.int32()), ("original", pa.string()), ("replacement", pa.string()),
                               ("loss", pa.float64()), ("passage_loss", pa.float64())])


def neighbour_table(ts: pa.Table, rows: pa.Table) -> pa.Table:
    """neighbours.parquet's part: each neighbour's text, the word it swapped and its loss beside the passage's,
    so that anyone can recompute (and check) the neighbour score from this file alone."""
    from scoring.detectors.neighbour import passage_loss
    from scoring.lm.neighbours import swap_of
    from scoring.lm.views import ORIGINAL, parse_neighbour_view

    texts = dict(zip(rows.column("id").to_pylist(), rows.column("input").to_pylist()))
    pick = ts.select(["id", "view", "text", "lp", "error"]).to_pylist()
    own = {r["id"]: passage_loss(r["lp"]) for r in pick if r["view"] == ORIGINAL}
    out = []
    for r in pick:
        if not is_late_view(r["view"]) or r["text"] is None or r["error"]:
            continue
        offset, original, replacement = swap_of(texts[r["id"]], r["text"])
        out.append({"id": r["id"], "neighbour": parse_neighbour_view(r["view"])[2], "text": r["text"],
                    "offset": offset, "original": original, "replacement": replacement,
                    "loss": passage_loss(r["lp"]), "passage_loss": own.get(r["id"])})
    return pa.Table.from_pylist(out, schema=NEIGHBOURS_SCHEMA)


def scores_schema(methods) -> pa.Schema:
    """One schema for every scores part (a part whose buckets are all null must not become a null column)."""
    return pa.schema([("id", pa.string()), ("label", pa.int64()), ("bucket", pa.string()), ("in_eval", pa.bool_()),
                      *[(m.column, pa.float64()) for m in methods]])


class ScoreParts:
    """Score one model's views of each part. The last model's stage also detects and writes (PartFinisher) and
    returns the part's summary instead of the token stats."""

    def __init__(self, spec: ScoringSpec, branch: int, threads: int | None, finish: dict | None = None):
        from jobs.plane.tasks import ScoreTask

        self.branch = branch
        self.task = ScoreTask(**spec.score_kwargs(spec.branches[branch], threads))
        self.finisher = PartFinisher(spec, **finish) if finish else None

    def score(self, row: dict) -> dict:
        tokens = from_ipc(row.pop(f"tokens_{self.branch}"))
        before = self.task.api_stats()
        row[f"scored_{self.branch}"] = to_ipc(self.task(tokens) if tokens.num_rows else _empty_scored())
        if before is not None:  # a served model: what this part cost in requests
            row[f"api_{self.branch}"] = json.dumps(_delta(self.task.api_stats(), before))
        if self.finisher is None:
            return row
        scored = pa.concat_tables([from_ipc(row[k]) for k in sorted(row) if k.startswith("scored_")])
        summary = self.finisher.finish(row["index"], from_ipc(row["rows"]), from_ipc(row["quarantine"]), scored,
                                       "streamed")
        api = [json.loads(row[k]) for k in sorted(row) if k.startswith("api_")]
        if api:
            summary["api"] = api[0]  # one served model per job (the target)
        return {"index": row["index"], "summary": json.dumps(summary)}

    def __call__(self, batch: pa.Table) -> pa.Table:
        return pa.Table.from_pylist([self.score(r) for r in batch.to_pylist()])


def _delta(after: dict, before: dict) -> dict:
    """Counters spent between two snapshots; gauges (the bound, the adaptive concurrency) as they are now."""
    from scoring.api.scorer import GAUGES

    return {k: (v if k in GAUGES else round(v - before.get(k, 0), 6)) for k, v in after.items()}


def _empty_scored() -> pa.Table:
    from jobs.plane.tasks import SCORED_SCHEMA

    return SCORED_SCHEMA.empty_table()


# ---------------------------------------------------------------- the Ray Data pipeline

@dataclass(frozen=True)
class PoolStages:
    """The two stage classes a job plugs into the pool. `prepare(**prepare_kwargs)` turns one work item (a row of
    strings) into one prepared part on the CPU pool; `score(spec=, branch=, threads=, finish=, **score_kwargs)` runs
    on each model's actor pool, and the last model's instance (given `finish`) returns the part's summary as a
    `summary` JSON column. Benchmark parts use PrepareParts/ScoreParts; doc-mia its document stages."""

    prepare: type
    prepare_kwargs: dict
    score: type
    finish: dict
    score_kwargs: dict = field(default_factory=dict)


class PrepareThenScore:
    """Both stages in one actor (CPU-only pools, run_pipeline): each part is read and tokenised, then scored, by
    the same process, with the same stage classes, so the part's outputs are those of the two-pool pipeline."""

    def __init__(self, stages: "PoolStages", score_kwargs: dict):
        self.prepare = stages.prepare(**stages.prepare_kwargs)
        self.score = stages.score(**score_kwargs)

    def __call__(self, batch: pa.Table) -> pa.Table:
        return self.score(self.prepare(batch))


def benchmark_stages(spec: ScoringSpec, finish: dict, exclude_ids: Sequence[str]) -> PoolStages:
    return PoolStages(PrepareParts, {"spec": spec, "exclude_ids": list(exclude_ids)}, ScoreParts, finish)


def part_items(parts: Sequence[tuple[PartSpec, list[int]]]) -> list[dict]:
    """Work items for benchmark parts: (spec, in-part lines to drop as duplicates) each."""
    return [{"part": p.to_json(), "drop": json.dumps(sorted(d))} for p, d in parts]


def ray_pipeline(spec: ScoringSpec, items: Sequence[dict], stages: PoolStages, progress: bool = True
                 ) -> Iterator[dict]:
    """Run `items` (one per part) through the pool on Ray and yield each part's summary as its files land (the
    local runner's twin: jobs/plane/local_plane.run_local_pipeline). Needs a running Ray. The pools are elastic,
    sized to what is alive: the CPU stage between 1 and the cluster's CPUs, each model's scorers between 1 and `spec.actors`, so a pool that loses a node's actors goes on with the rest
    instead of waiting for resources that left. No part finishing for `spec.stall_timeout_s` raises StalledPool."""
    import ray

    from jobs.plane.watch import capacity_line, watch

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = progress
    cpus = cluster_cpus()
    spec = pool_actors(spec, cpus, cluster_memory())
    n_models = len(spec.branches)
    scorer_cpus, threads = scorer_resources(spec, cpus)
    ds = ray.data.from_items(list(items), override_num_blocks=max(1, len(items)))
    # With GPUs, a CPU pool tokenises ahead so that the GPU never waits for it. Without, tokenising is a sliver of
    # a part's CPU time and a separate pool only adds a process start (imports: ~3 s of CPU on a 2-core machine)
    # and a hop between stages, so the first model's actors read and tokenise their own parts.
    fused = spec.gpus_per_actor <= 0
    if not fused:
        ds = ds.map_batches(stages.prepare, fn_constructor_kwargs=stages.prepare_kwargs,
                            batch_size=1, batch_format="pyarrow", num_cpus=0.25,
                            compute=ray.data.ActorPoolStrategy(min_size=1, max_size=max(1, int(cpus))))
    for k in range(n_models):
        score_kwargs = {"spec": spec, "branch": k, "threads": threads,
                        "finish": stages.finish if k == n_models - 1 else None, **stages.score_kwargs}
        stage, kwargs = stages.score, score_kwargs
        if fused and k == 0:
            stage, kwargs = PrepareThenScore, {"stages": stages, "score_kwargs": score_kwargs}
        ds = ds.map_batches(stage, fn_constructor_kwargs=kwargs,
            batch_size=1, batch_format="pyarrow", num_cpus=scorer_cpus, num_gpus=spec.gpus_per_actor or None,
            compute=ray.data.ActorPoolStrategy(min_size=1, max_size=max(1, spec.actors)),
            max_restarts=SCORER_MAX_RESTARTS, max_task_retries=SCORER_MAX_TASK_RETRIES)
    needs = {"CPU": scorer_cpus, "GPU": spec.gpus_per_actor}
    batches = ds.iter_batches(batch_format="pyarrow", batch_size=None)
    for batch in watch(batches, spec.stall_timeout_s, lambda: capacity_line(needs)):
        for s in batch.column("summary").to_pylist():
            yield json.loads(s)
