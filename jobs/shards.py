"""Sharded, resumable, fault-tolerant scoring for `tidemark evaluate`, and where its outputs go.

The benchmark rows are cut, in order, into shards of `shard_size` rows. Every shard's token stats are written, as
soon as the shard is complete, to `OUT/shards/token_stats-NNNNN.parquet` followed by a marker
`OUT/shards/token_stats-NNNNN.done.json` that records

- the scoring fingerprint (model identity, views, ReCaLL prefix, context, stride, batch size, device, tool
  version): anything that changes the numbers;
- the sha256 of the shard's (id, input) rows, so an edited or re-ordered benchmark never reuses a stale shard;
- the sha256 of the Parquet bytes (checked when the shard is read back), the row counts, and the run that scored it.

A restarted job reads the shards whose marker matches and scores only the rest; when every shard is done, nothing
is scored at all. The final `token_stats.parquet` is the shards concatenated in order (rows inside a shard are
sorted by benchmark position, then view), so an interrupted-then-resumed run writes the same table as an
uninterrupted one.

All pending shards go through one Ray Data pipeline (so the model is loaded once per actor, not once per shard)
and are written by the driver as their rows stream out. Failures, from the inside out:
1. the scorer retries a failing micro-batch window by window and marks a window that still fails on its row
   (scoring/scorer.py); such a row is quarantined with its error;
2. a scorer actor that dies is restarted (`max_restarts`) and its task retried (`max_task_retries`);
3. if the pipeline still fails (a row that crashes its worker every time exhausts the restarts), the shards
   already written stay written, and the remaining rows go to scorer actors built from the same task arguments,
   in batches; a batch that fails is retried row by row, and a row that fails ROW_ATTEMPTS times on its own is
   quarantined (stage `score`, reason `worker_failed`) with the error. Every other row is scored. If rows keep
   failing one after another with nothing scored between (the model does not load, the cluster is gone), the
   job fails instead of quarantining everything.
Never `max_errored_blocks`: it drops blocks silently. Every shard must account for each of its rows (scored,
or quarantined with a reason) before it is written, or the job fails.

Outputs: OUT may be a local directory or an s3:// prefix (jobs/storage_io.py). Shards are written straight to OUT
(a restarted pod on another node finds them); the other outputs are made in a local directory (OUT itself, or a
staging directory for S3), uploaded, and `_SUCCESS` is written last with the job fingerprint. A re-run of a
finished job with the same fingerprint returns the recorded result without starting Ray.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pyarrow as pa

from jobs.storage_io import Location, is_s3, local_copy, new_run_id, sha256_bytes

SHARD_DIR = "shards"
DEFAULT_SHARD_SIZE = 1000
ABORT_ENV = "TIDEMARK_FAULT_ABORT_AFTER_SHARDS"  # fault injection: stop the job after writing N shards
WORKER_FAILED = "worker_failed"
MAX_SINGLE_FAILURES_IN_A_ROW = 3  # rows failing alone in a row, nothing scored between: a systemic failure
ROW_ATTEMPTS = 2  # tries for one row on its own before it is quarantined
ISOLATION_BATCH = 16  # rows per call in the isolation fallback


class AccountingError(RuntimeError):
    """Rows in != rows written + rows quarantined: never papered over, the job fails."""


class InjectedAbort(RuntimeError):
    """Raised by the TIDEMARK_FAULT_ABORT_AFTER_SHARDS hook: a job cut off between two shards."""


def echo(message: str) -> None:
    print(f"[evaluate] {message}", file=sys.stderr, flush=True)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


# ---------------------------------------------------------------- identity of what is being scored

_CHUNK = 1 << 20


def file_digest(path: Path) -> str:
    """sha256 of a small file; of a large one, its size and three 1 MiB samples (start, middle, end). Retrained
    weights differ everywhere, so this tells two checkpoints apart without reading gigabytes, and it is the same on
    every machine (unlike a modification time)."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as fh:
        if size <= 3 * _CHUNK:
            digest.update(fh.read())
        else:
            for offset in (0, size // 2, size - _CHUNK):
                fh.seek(offset)
                digest.update(fh.read(_CHUNK))
    return digest.hexdigest()


def model_identity(model: str | None) -> Any:
    """What identifies a model's weights cheaply: for a local directory or file, each file's name and digest
    (`file_digest`); otherwise the name as given (a hub id, `smollm2`)."""
    if not model:
        return None
    path = Path(model.split("::")[0])
    if path.is_dir():
        return {"model": model, "files": [{"name": p.relative_to(path).as_posix(), "digest": file_digest(p)}
                                          for p in sorted(path.rglob("*")) if p.is_file()]}
    if path.is_file():
        return {"model": model, "digest": file_digest(path)}
    return {"model": model}


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tidemark")
    except PackageNotFoundError:
        return "0+unknown"


def scoring_fingerprint(cfg, views: Sequence[str], prefix_text: str | None) -> str:
    """Everything that changes the token stats of a row (not which rows: each shard records its own)."""
    return _digest({
        "model": model_identity(cfg.model), "ref_model": model_identity(cfg.ref_model), "views": list(views),
        "prefix_text": prefix_text, "context": cfg.context, "stride": cfg.stride, "batch_size": cfg.batch_size,
        "device": "cuda" if cfg.gpus_per_actor > 0 else "cpu", "tool": tool_version(),
    })


JOB_FIELDS_IGNORED = ("out", "actors", "progress", "resume", "shard_size", "extra", "requester_pays")


def job_fingerprint(cfg, scoring_fp: str, rows: Sequence[dict], quarantined: Sequence[dict]) -> str:
    """Everything that changes any output of the job: the scoring fingerprint, the benchmark's rows and the
    settings of detectors, metrics and calibration."""
    settings = {k: v for k, v in asdict(cfg).items() if k not in JOB_FIELDS_IGNORED}
    settings["ref_corpus"] = model_identity(cfg.ref_corpus) if cfg.ref_corpus else None
    return _digest({"scoring": scoring_fp, "settings": settings, "rows": _digest(list(rows)),
                    "quarantined": _digest(list(quarantined))})


# ---------------------------------------------------------------- shards

@dataclass
class Shard:
    index: int
    rows: list[dict]

    @property
    def name(self) -> str:
        return f"token_stats-{self.index:05d}"

    @property
    def ids_sha256(self) -> str:
        return _digest([[r["id"], r["input"]] for r in self.rows])


def plan_shards(rows: Sequence[dict], shard_size: int) -> list[Shard]:
    if shard_size < 1:
        raise ValueError(f"shard size must be at least 1, got {shard_size}")
    return [Shard(i // shard_size, list(rows[i:i + shard_size])) for i in range(0, len(rows), shard_size)]


class ShardStore:
    """Shard files and their completion markers under LOCATION/shards/."""

    def __init__(self, dest: Location, fingerprint: str, run_id: str):
        self.dest, self.fingerprint, self.run_id = dest, fingerprint, run_id

    def data_name(self, shard: Shard) -> str:
        return f"{SHARD_DIR}/{shard.name}.parquet"

    def marker_name(self, shard: Shard) -> str:
        return f"{SHARD_DIR}/{shard.name}.done.json"

    def marker(self, shard: Shard) -> dict | None:
        """The shard's marker if it is done for this fingerprint and these rows, else None."""
        if not self.dest.exists(self.marker_name(shard)):
            return None
        try:
            info = self.dest.read_json(self.marker_name(shard))
        except (json.JSONDecodeError, OSError):
            return None
        if info.get("fingerprint") != self.fingerprint or info.get("ids_sha256") != shard.ids_sha256:
            return None
        return info

    def load(self, shard: Shard, info: dict) -> pa.Table:
        import io

        import pyarrow.parquet as pq

        data = self.dest.read_bytes(self.data_name(shard))
        if sha256_bytes(data) != info["sha256"]:
            raise RuntimeError(f"{self.dest.child(self.data_name(shard))} does not match its completion marker "
                               "(sha256 differs): remove the shard's .done.json to rescore it")
        return pq.read_table(io.BytesIO(data))

    def write(self, shard: Shard, table: pa.Table, extra: dict) -> dict:
        self.dest.delete(self.marker_name(shard))  # an older marker must not vouch for the new file
        written = self.dest.write_parquet(self.data_name(shard), table, compression="zstd")
        info = {"shard": shard.index, "rows": len(shard.rows), "token_rows": table.num_rows,
                "fingerprint": self.fingerprint, "ids_sha256": shard.ids_sha256, "sha256": written["sha256"],
                "run_id": self.run_id, "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **extra}
        self.dest.write_json(self.marker_name(shard), info)
        return info


# ---------------------------------------------------------------- scoring

def _crash_rows(ids: Iterable[str], model: str, error: str) -> pa.Table:
    """Token-stats rows that mark ids whose scoring kept killing the worker: the job quarantines them."""
    from scoring.tasks import SCORED_SCHEMA
    from scoring.tokenstats import empty_record
    from scoring.views import ORIGINAL

    recs = [dict(empty_record(i, ORIGINAL, model, f"{WORKER_FAILED}: {error}"[:500]), prefix_len=None) for i in ids]
    return pa.Table.from_pylist(recs, schema=SCORED_SCHEMA)


class ShardedScorer:
    """Scores the pending shards of one job (see the module docstring)."""

    def __init__(self, rows: Sequence[dict], cfg, views: Sequence[str], prefix_text: str | None, dest: Location,
                 *, dataset_fn: Callable, specs_fn: Callable, fingerprint: str | None = None, resume: bool = True):
        self.cfg, self.views, self.prefix_text, self.dest = cfg, tuple(views), prefix_text, dest
        self.dataset_fn = dataset_fn  # (rows, cfg, views, prefix_text) -> ray.data.Dataset of scored rows
        self.specs_fn = specs_fn  # (cfg, views, prefix_text) -> task constructor kwargs + actor resources
        self.shards = plan_shards(rows, cfg.shard_size)
        self.view_order = {v: i for i, v in enumerate((*self.views, "ref"))}
        self.expected_views = sorted([*self.views, *(["ref"] if cfg.ref_model else [])])
        self.per_row = len(self.expected_views)
        self.run_id = new_run_id()
        self.store = ShardStore(dest, fingerprint or scoring_fingerprint(cfg, views, prefix_text), self.run_id)
        self.resume = resume
        self.abort_after = int(os.environ.get(ABORT_ENV) or 0)
        self.written_now = 0
        self.single_failures_in_a_row = 0
        self.stats = {"shards": len(self.shards), "reused": 0, "scored": 0, "rows_scored_now": 0,
                      "rows_worker_failed": 0, "pipeline_failures": 0, "isolated_batch_failures": 0}

    # ---- bookkeeping
    def _order(self, shard: Shard, table: pa.Table) -> pa.Table:
        pos = {r["id"]: i for i, r in enumerate(shard.rows)}
        keys = [(pos[i], self.view_order.get(v, len(self.view_order)), v)
                for i, v in zip(table.column("id").to_pylist(), table.column("view").to_pylist())]
        return table.take(sorted(range(len(keys)), key=keys.__getitem__))

    def _check(self, shard: Shard, table: pa.Table) -> None:
        """Every row of the shard is in the table with every view, or is marked failed on its original view."""
        from scoring.views import ORIGINAL

        by_id: dict[str, list[str]] = defaultdict(list)
        errors = {}
        for i, v, e in zip(table.column("id").to_pylist(), table.column("view").to_pylist(),
                           table.column("error").to_pylist()):
            by_id[i].append(v)
            if v == ORIGINAL and e:
                errors[i] = e
        ids = [r["id"] for r in shard.rows]
        extra = set(by_id) - set(ids)
        bad = [i for i in ids if sorted(by_id.get(i, ())) != self.expected_views
               and not (i in errors and errors[i].startswith(WORKER_FAILED))]
        if extra or bad:
            raise AccountingError(f"shard {shard.index}: row accounting does not reconcile: {len(ids)} rows in, "
                                  f"{len(bad)} without exactly the views {self.expected_views} (e.g. {bad[:3]}), "
                                  f"{len(extra)} unexpected ids")

    def _finish(self, shard: Shard, table: pa.Table, how: str) -> None:
        table = self._order(shard, table)
        self._check(shard, table)
        failed = sum(1 for e in table.column("error").to_pylist() if e and e.startswith(WORKER_FAILED))
        self.store.write(shard, table, {"how": how, "worker_failed": failed})
        self.done[shard.index] = table
        self.stats["scored"] += 1
        self.stats["rows_scored_now"] += len(shard.rows)
        self.stats["rows_worker_failed"] += failed
        self.written_now += 1
        if self.abort_after and self.written_now >= self.abort_after:
            raise InjectedAbort(f"{ABORT_ENV}={self.abort_after}: stopping after {self.written_now} shard(s)")

    # ---- the run
    def run(self) -> pa.Table:
        from scoring.tasks import SCORED_SCHEMA

        self.done: dict[int, pa.Table] = {}
        pending = []
        for shard in self.shards:
            info = self.store.marker(shard) if self.resume else None
            if info is not None:
                self.done[shard.index] = self.store.load(shard, info)
                self.stats["reused"] += 1
            else:
                pending.append(shard)
        if self.stats["reused"]:
            echo(f"resuming: {self.stats['reused']} of {len(self.shards)} shard(s) already scored, "
                 f"{len(pending)} to go")
        if pending:
            try:
                self._stream(pending)
            except (InjectedAbort, AccountingError):
                raise
            except Exception as exc:  # noqa: BLE001 - isolate what failed; written shards are kept
                self.stats["pipeline_failures"] += 1
                left = [s for s in pending if s.index not in self.done]
                echo(f"the scoring pipeline failed ({type(exc).__name__}: {str(exc)[:300]}); "
                     f"{len(pending) - len(left)} shard(s) were saved, isolating the {len(left)} left")
                self._isolate(left)
        tables = [self.done[s.index].select(SCORED_SCHEMA.names).cast(SCORED_SCHEMA) for s in self.shards]
        return pa.concat_tables(tables) if tables else SCORED_SCHEMA.empty_table()

    def _stream(self, pending: list[Shard]) -> None:
        """One pipeline over every pending row; each shard is written the moment its last row arrives."""
        owner = {r["id"]: s.index for s in pending for r in s.rows}
        by_index = {s.index: s for s in pending}
        expected = {s.index: len(s.rows) * self.per_row for s in pending}
        parts: dict[int, list[pa.Table]] = defaultdict(list)
        got: dict[int, int] = defaultdict(int)
        ds = self.dataset_fn([r for s in pending for r in s.rows], self.cfg, self.views, self.prefix_text)
        for block in ds.iter_batches(batch_format="pyarrow", batch_size=None):
            if not block.num_rows:
                continue
            groups: dict[int, list[int]] = defaultdict(list)
            for k, rid in enumerate(block.column("id").to_pylist()):
                if rid not in owner:
                    raise AccountingError(f"the pipeline returned an unknown id {rid!r}")
                groups[owner[rid]].append(k)
            for idx, rows_at in groups.items():
                parts[idx].append(block.take(rows_at))
                got[idx] += len(rows_at)
                if got[idx] > expected[idx]:
                    raise AccountingError(f"shard {idx}: {got[idx]} token rows for {expected[idx]} expected")
                if got[idx] == expected[idx]:
                    self._finish(by_index[idx], pa.concat_tables(parts.pop(idx)), "streamed")
        missing = [i for i in expected if i not in self.done]
        if missing:
            raise AccountingError(f"row accounting does not reconcile: the pipeline ended with shards {missing[:5]} "
                               f"incomplete ({[got[i] for i in missing[:5]]} of {[expected[i] for i in missing[:5]]} "
                               "token rows)")

    def _isolate(self, shards: list[Shard]) -> None:
        """The fallback after a failed pipeline: scorer actors (same tasks and resources as the pipeline's) take
        the remaining rows in batches; a batch that fails is retried row by row; a row that fails ROW_ATTEMPTS
        times is marked `worker_failed` with its error. Actors restart after a crash (max_restarts=-1); a failing
        call is not retried by Ray (max_task_retries=0) so that the failure is seen and counted here."""
        import ray

        specs = self.specs_fn(self.cfg, self.views, self.prefix_text)
        actor_cls = ray.remote(RowScorer).options(num_cpus=specs["num_cpus"], num_gpus=specs["num_gpus"],
                                                  max_restarts=-1, max_task_retries=0)
        actors = [actor_cls.remote(specs["branches"]) for _ in range(max(1, self.cfg.actors))]
        try:
            for shard in shards:
                self._finish(shard, self._isolate_rows(actors, shard.rows), "isolated")
        finally:
            for actor in actors:
                ray.kill(actor)

    def _isolate_rows(self, actors: list, rows: list[dict]) -> pa.Table:
        import ray

        def call(actor, part):
            return actor.__call__.remote(pa.Table.from_pylist([{"id": r["id"], "input": r["input"]} for r in part]))

        batches = [rows[i:i + ISOLATION_BATCH] for i in range(0, len(rows), ISOLATION_BATCH)]
        refs = [(part, call(actors[k % len(actors)], part)) for k, part in enumerate(batches)]
        tables, retry = [], []
        for part, ref in refs:
            try:
                tables.append(ray.get(ref))
                self.single_failures_in_a_row = 0
            except Exception:  # noqa: BLE001 - a crash somewhere in the batch: find the row
                self.stats["isolated_batch_failures"] += 1
                retry.extend(part)
        for k, row in enumerate(retry):
            error = None
            for _attempt in range(ROW_ATTEMPTS):
                actor = actors[k % len(actors)]
                _wait_ready(actor)  # a failure after this is the row's, not a restart still under way
                try:
                    tables.append(ray.get(call(actor, [row])))
                    self.single_failures_in_a_row = 0
                    error = None
                    break
                except Exception as exc:  # noqa: BLE001
                    error = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
            if error is not None:
                self.single_failures_in_a_row += 1
                if self.single_failures_in_a_row > MAX_SINGLE_FAILURES_IN_A_ROW:
                    # One poison row fails alone; several different rows failing alone with nothing scored in
                    # between is the model or the cluster: fail the job rather than quarantine everything.
                    raise RuntimeError(f"{self.single_failures_in_a_row} different rows failed one by one with "
                                       f"nothing scored in between; last: {error}")
                echo(f"quarantining row {row['id']!r}: it failed {ROW_ATTEMPTS} times on its own ({error[:200]})")
                tables.append(_crash_rows([row["id"]], self.cfg.model, error))
        from scoring.tasks import SCORED_SCHEMA

        tables = [t.select(SCORED_SCHEMA.names).cast(SCORED_SCHEMA) for t in tables]
        return pa.concat_tables(tables) if tables else SCORED_SCHEMA.empty_table()


def _wait_ready(actor, timeout_s: float = 300.0) -> None:
    """Block until a (possibly restarting) actor answers; raise if it does not within `timeout_s`."""
    import ray
    from ray.exceptions import ActorUnavailableError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ray.get(actor.ping.remote(), timeout=max(1.0, deadline - time.monotonic()))
            return
        except ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class RowScorer:
    """Tokenise and score text rows (id, input) for every branch in one process: the isolation fallback's actor.
    Ray-free; built from the same constructor arguments as the pipeline's TokenizeTask and ScoreTask."""

    def ping(self) -> bool:
        return True

    def __init__(self, branches: list[dict]):
        from scoring.tasks import ScoreTask, TokenizeTask

        self.branches = [(TokenizeTask(**b["tokenize"]), ScoreTask(**b["score"])) for b in branches]

    def __call__(self, table: pa.Table) -> pa.Table:
        return pa.concat_tables([score(tokenize(table)) for tokenize, score in self.branches])


# ---------------------------------------------------------------- job outputs (local or s3://)

def output_location(cfg) -> Location:
    return Location(cfg.out)


def local_output_dir(dest: Location) -> Path:
    """Where the job writes its non-shard outputs: OUT itself, or (S3) a staging directory named after OUT that
    survives the run, so the CLI can print the report."""
    if not dest.s3:
        dest.ensure()
        return dest.root
    stage = Path(tempfile.gettempdir()) / "tidemark-staging" / hashlib.sha256(dest.uri.encode()).hexdigest()[:16]
    shutil.rmtree(stage, ignore_errors=True)  # nothing from an earlier run may be uploaded with this one
    stage.mkdir(parents=True, exist_ok=True)
    return stage


def read_benchmark_any(cfg):
    """jobs.benchmark_io.read_benchmark, for a local path or an s3:// file or release prefix (requester pays when
    asked). A release on S3 is read only if it is complete (`_SUCCESS` or manifest.json present)."""
    from jobs.benchmark_io import read_benchmark

    if not is_s3(cfg.benchmark):
        return read_benchmark(cfg.benchmark)
    src = Location(cfg.benchmark, requester_pays=cfg.requester_pays)
    names = src.list()
    if any(n.startswith("data/") for n in names) and not ({"_SUCCESS", "manifest.json"} & set(names)):
        raise FileNotFoundError(f"{cfg.benchmark} holds data/ but no _SUCCESS or manifest.json: an incomplete "
                                "release (a build that did not finish); refusing to read it")
    with local_copy(cfg.benchmark, requester_pays=cfg.requester_pays) as path:
        return read_benchmark(path)


def completed_result(dest: Location, fingerprint: str, out: Path) -> dict | None:
    """The recorded result of a finished job with this fingerprint, else None."""
    info = dest.completion()
    if not info or info.get("fingerprint") != fingerprint:
        return None
    try:
        metrics = dest.read_json("metrics.json")
        run = dest.read_json("run.json")
        if dest.s3:
            dest.download("report.md", out / "report.md")
    except Exception:  # noqa: BLE001 - a marker without its files is not a finished job
        return None
    blind = None
    if dest.exists("blind_baseline.json"):
        res = dest.read_json("blind_baseline.json")
        blind = {"all": res["overall"]["auc"], **{str(b): v["auc"] for b, v in res.get("buckets", {}).items()}}
    return {"report": str(out / "report.md"), "metrics": metrics, "counts": run.get("counts", {}),
            "seconds": 0.0, "blind": blind, "skipped": True}


def publish(dest: Location, out: Path, info: dict) -> None:
    """Upload the outputs made in `out` (S3) and write `_SUCCESS` last."""
    dest.upload_tree(out, skip=(SHARD_DIR + "/",))
    dest.mark_complete(info)


def open_output(uri: str) -> tuple[Location, Path]:
    """For the jobs that are not sharded (audit, doc-mia, unlearning-audit, contamination-study): remove a stale
    `_SUCCESS` first, then return the destination (a local directory or an s3:// prefix) and the local directory
    where the job makes its files. The job calls `publish` when it has finished; a job that raises before that
    leaves OUT without `_SUCCESS`, so a crash never looks complete."""
    dest = Location(uri)
    dest.clear_complete()
    return dest, local_output_dir(dest)
