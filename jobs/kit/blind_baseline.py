"""The blind baseline that `evaluate` reports as the last row of its table: the AUC of text-only classifiers that
never see the model (curation/shift/audit.py), so users see how much of a detector's AUC distribution shift
alone explains.

It needs only texts and labels, so `BlindBaselineJob` starts it in a separate low-priority process before the
model scores, and the driver collects it afterwards. The helper is a plain `python -m jobs.kit.blind_baseline IN OUT`
subprocess, not a multiprocessing pool: a spawned pool re-imports the caller's main module, which re-runs any
unguarded script that calls `run_evaluate`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

INPUT_FIELDS = ("input", "label", "bucket", "in_eval")
NICE = 10  # the scorer's processes run at 0: the helper takes the CPU they leave idle, and little else


def blind_baseline(rows: list[dict], seed: int, benchmark: str | None = None, progress: bool = True
                   ) -> dict | None:
    """The audit stored in a release's manifest when there is one (build-benchmark ran it on the same rows, with
    the release's cutoff year), else computed now on the rows with `in_eval` (ReCaLL prefix rows excluded).
    None when there are too few members or non-members to cross-validate."""
    try:
        from curation.shift.audit import audit_rows
        from curation.shift.release import blind_aucs, stored_audit
    except ImportError:  # scikit-learn missing: the report simply has no blind row
        return None
    stored = stored_audit(benchmark) if has_stored_audit(benchmark) else None
    if stored is not None:
        return {"result": stored, "auc": blind_aucs(stored), "source": "manifest.json"}
    ev = [r for r in rows if r.get("in_eval", True)]
    labels = [r["label"] for r in ev]
    if len(set(labels)) < 2 or min(labels.count(0), labels.count(1)) < 5:
        return None
    buckets = [r.get("bucket") for r in ev]
    res = audit_rows([r["input"] for r in ev], labels, buckets if any(b is not None for b in buckets) else None,
                     seed=seed, n_bootstrap=200, progress=progress)
    return {"result": res, "auc": blind_aucs(res), "source": "computed on the evaluated rows"}


def has_stored_audit(benchmark: str | None) -> bool:
    """Whether `benchmark` is a local release directory with a manifest (which may hold a shift audit)."""
    return bool(benchmark) and not str(benchmark).startswith("s3://") and (Path(benchmark) / "manifest.json").is_file()


BLIND_SAMPLE_CAP = 20_000  # rows; above this the baseline is fitted on a seeded sample, recorded in the report


def sample_rows(source: dict, seed: int) -> tuple[list[dict], dict]:
    """Read a benchmark part by part (one part in memory at a time) and keep at most `source["cap"]` rows: those
    with the smallest seeded hash of their id, returned in benchmark order. Duplicate ids keep the first, as the
    scorer does; `source["prefix_ids"]` are kept with in_eval false. Returns (rows, a note for the report)."""
    import heapq

    from jobs.plane.benchmark_parts import plan_parts, read_part
    from scoring.lm.views import stable_seed

    cap, prefix = int(source.get("cap") or BLIND_SAMPLE_CAP), set(source.get("prefix_ids", ()))
    seen: set[str] = set()
    heap: list[tuple[int, int, dict]] = []  # (-hash, position, row): the cap smallest hashes
    position, next_line = 0, {}
    for part in plan_parts(source["benchmark"], int(source.get("rows_per_part") or 1000),
                           bool(source.get("requester_pays"))):
        if part.fmt == "jsonl":
            from dataclasses import replace

            part = replace(part, first_line=next_line.get(part.path, 1))
        got = read_part(part)
        next_line[part.path] = (part.first_line or 1) + got.n_lines
        for r in got.rows:
            if r["id"] in seen:
                continue
            seen.add(r["id"])
            row = {"id": r["id"], "input": r["input"], "label": r["label"], "bucket": r["bucket"],
                   "in_eval": r["id"] not in prefix}
            item = (-stable_seed("blind-sample", seed, r["id"]), position, row)
            position += 1
            if len(heap) < cap:
                heapq.heappush(heap, item)
            elif item[0] > heap[0][0]:
                heapq.heapreplace(heap, item)
    rows = [row for _, _, row in sorted(heap, key=lambda t: t[1])]
    note = {"rows": len(rows), "of": position, "sampled": position > cap, "cap": cap, "seed": seed}
    return rows, note


class BlindBaselineJob:
    """`blind_baseline` computed in a background process while the model scores.

    Rows that the scorer later quarantines were part of the helper's input; in that (rare) case the baseline is
    recomputed on the scored rows, so it always describes exactly the rows evaluated. Any failure of the helper
    falls back to computing inline: it can cost time, never the result. TIDEMARK_BLIND_INLINE=1 turns the
    helper off."""

    def __init__(self, rows: list[dict], prefix_ids: set, seed: int, benchmark: str | None):
        self.seed, self.benchmark = seed, benchmark
        self.source: dict | None = None
        self.out = Path(os.devnull)
        self.ids = frozenset(r["id"] for r in rows)
        self.proc: subprocess.Popen | None = None
        self.tmp: tempfile.TemporaryDirectory | None = None
        if not rows or os.environ.get("TIDEMARK_BLIND_INLINE") or has_stored_audit(benchmark):
            return  # nothing to overlap: no rows, asked not to, or the manifest already holds it
        try:
            self.tmp = tempfile.TemporaryDirectory(prefix="tidemark-blind-")
            src, self.out = Path(self.tmp.name) / "rows.json", Path(self.tmp.name) / "result.json"
            src.write_text(json.dumps({"seed": seed, "rows": [
                {**{k: r.get(k) for k in INPUT_FIELDS}, "in_eval": r["id"] not in prefix_ids} for r in rows]}))
            self.proc = _spawn(src, self.out)
        except Exception as exc:  # noqa: BLE001 - e.g. no subprocess allowed: compute it inline later
            print(f"blind baseline: no background process ({exc}); computing it after scoring", file=sys.stderr)
            self.close()

    @classmethod
    def from_source(cls, source: dict, seed: int, benchmark: str | None) -> "BlindBaselineJob":
        """The helper reads the benchmark itself (a capped, seeded sample: `sample_rows`), so the driver never holds
        the texts. `result_excluding(failed_ids)` collects it."""
        job = cls([], set(), seed, benchmark)
        job.source = dict(source)
        if os.environ.get("TIDEMARK_BLIND_INLINE") or has_stored_audit(benchmark):
            return job
        try:
            job.tmp = tempfile.TemporaryDirectory(prefix="tidemark-blind-")
            src, job.out = Path(job.tmp.name) / "job.json", Path(job.tmp.name) / "result.json"
            src.write_text(json.dumps({"seed": seed, "source": job.source}))
            job.proc = _spawn(src, job.out)
        except Exception as exc:  # noqa: BLE001
            print(f"blind baseline: no background process ({exc}); computing it after scoring", file=sys.stderr)
            job.close()
        return job

    def result_excluding(self, failed_ids: set) -> dict | None:
        """The baseline over the sampled rows that were scored (rows the scorer quarantined are left out)."""
        try:
            if self.proc is not None:
                _, err = self.proc.communicate()
                if self.proc.returncode == 0 and self.out.is_file():
                    res = json.loads(self.out.read_text())
                    if res is None or not failed_ids & set(res.pop("sample_ids", [])):
                        return res
                else:
                    print(f"blind baseline: background process failed (exit {self.proc.returncode}): "
                          f"{(err or '').strip()[-500:]}; recomputing", file=sys.stderr)
            if has_stored_audit(self.benchmark):  # the release's manifest holds it: no rows needed
                return blind_baseline([], self.seed, self.benchmark)
            rows, note = sample_rows(self.source, self.seed)
            res = blind_baseline([r for r in rows if r["id"] not in failed_ids], self.seed, self.benchmark)
            return dict(res, sample=note) if res else None
        finally:
            self.close()

    def result(self, good: list[dict]) -> dict | None:
        try:
            if self.proc is not None and {r["id"] for r in good} == self.ids:
                _, err = self.proc.communicate()
                if self.proc.returncode == 0 and self.out.is_file():
                    return json.loads(self.out.read_text())
                print(f"blind baseline: background process failed (exit {self.proc.returncode}): "
                      f"{(err or '').strip()[-500:]}; recomputing", file=sys.stderr)
            return blind_baseline(good, self.seed, self.benchmark)
        finally:
            self.close()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # its result is no longer wanted
            self.proc.wait()
        self.proc = None
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None


def _spawn(src: Path, out: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")) if p))
    return subprocess.Popen([sys.executable, "-m", "jobs.kit.blind_baseline", str(src), str(out)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def main(argv: list[str]) -> int:
    src, dst = argv
    try:
        os.nice(NICE)
    except OSError:
        pass
    job = json.loads(Path(src).read_text())
    if "source" in job:
        rows, note = sample_rows(job["source"], job["seed"])
        res = blind_baseline(rows, job["seed"], None, progress=False)
        res = dict(res, sample=note, sample_ids=[r["id"] for r in rows]) if res else None
    else:
        res = blind_baseline(job["rows"], job["seed"], None, progress=False)
    tmp = Path(dst + ".tmp")
    tmp.write_text(json.dumps(res, default=_jsonable))
    tmp.replace(dst)  # the parent reads the result only once it is whole
    return 0


def _jsonable(x):
    import numpy as np

    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
