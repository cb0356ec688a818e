"""`overlap --index` through the batched numpy search against the same command of an older tree (infini-gram's
engine, one query per call): wall time and equal answers.

    python -m bench.overlap_index_bench --old-tree T [--mb 50] [--work DIR]

A SOTU jsonl corpus of `--mb` MB (bench/overlap_scale.write_corpus: its documents repeat, so common n-grams have
thousands of occurrences) is indexed once (`tidemark index-corpus`, this tree); then each tree's CLI, as a fresh
process (cwd and PYTHONPATH at the tree, this .venv), answers `overlap --index` for the 1,000 benchmark passages of
bench/overlap_scale.write_bench, twice (the second run: the index's pages in the OS cache), and `--query` for a few
spans. rows.parquet and the queries' counts and documents must be equal; bench/results/overlap_index.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def log(msg: str) -> None:
    print(f"[overlap-index-bench] {msg}", file=sys.stderr, flush=True)


def cli(tree: Path, args: list[str]) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "jobs.cli", *args], cwd=tree, env=env, capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"{tree}: {' '.join(args[:2])} failed: {res.stderr[-2000:]}")
    return round(time.perf_counter() - t0, 2), res.stdout


def main(argv=None) -> int:
    import pyarrow.parquet as pq

    from bench.common import environment, write_json
    from bench.overlap_scale import write_bench, write_corpus

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-tree", type=Path, required=True, help="a checkout whose overlap --index asks the engine")
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--work", type=Path, default=Path("/tmp/tidemark-overlap-index-bench"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args(argv)
    work, trees = args.work, {"old": args.old_tree.resolve(), "new": ROOT}
    corpus, bench, idx = work / "corpus", work / "bench.jsonl", work / "idx"
    if not (idx / "_SUCCESS").exists():
        write_corpus(corpus, args.mb)
        write_bench(bench)
        built, _ = cli(ROOT, ["index-corpus", "--corpus", str(corpus), "--out", str(idx), "--quiet"])
        log(f"index of {args.mb} MB built in {built} s")
    texts = [json.loads(x)["input"] for x in bench.read_text().splitlines()[:5]]
    queries = [" ".join(t.split()[5:13]) for t in texts] + ["of the united states", "no such words zzqx"]
    res: dict = {"what": __doc__.split("\n\n")[0], "corpus_mb": args.mb, "benchmark_rows": 1000, "runs": {}}
    for name, tree in trees.items():
        walls = []
        for k in range(2):
            out = work / f"out-{name}-{k}"
            wall, _ = cli(tree, ["overlap", "--benchmark", str(bench), "--index", str(idx), "--out", str(out),
                                 "--quiet", "--no-resume"])
            walls.append(wall)
        asked = []
        for q in queries:
            wall, text = cli(tree, ["overlap", "--index", str(idx), "--query", q])
            asked.append({"query": q, "wall_s": wall, "answer": text.strip().splitlines()})
        res["runs"][name] = {"tree": str(tree), "overlap_index_wall_s": walls, "queries": asked,
                             "report": json.loads((work / f"out-{name}-1" / "report.json").read_text())["seconds"]
                             if (work / f"out-{name}-1" / "report.json").exists() else None}
        log(f"{name}: overlap --index {walls} s")
    old, new = (pq.read_table(work / f"out-{n}-1" / "rows.parquet") for n in ("old", "new"))
    res["rows_equal"] = old.equals(new)
    res["query_counts_equal"] = all(a["answer"][0] == b["answer"][0] for a, b in
                                    zip(res["runs"]["old"]["queries"], res["runs"]["new"]["queries"]))
    res["query_documents_equal"] = all(
        [x.split("(")[0].strip() for x in a["answer"][1:]] == [x.split("(")[0].strip() for x in b["answer"][1:]]
        for a, b in zip(res["runs"]["old"]["queries"], res["runs"]["new"]["queries"]))
    res["environment"] = environment()
    write_json(args.out, "overlap_index", res)
    log(f"rows equal: {res['rows_equal']}; query counts equal: {res['query_counts_equal']}; documents equal: "
        f"{res['query_documents_equal']}")
    return 0 if res["rows_equal"] and res["query_counts_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
