"""Curation throughput benchmarks (wired into `make bench` by bench/run.py).

`bench_stackexchange_parse(path)`: Stack Exchange parsing on one core, in this process (no Ray): the full source,
both passes (answer join, then questions with HTML stripping), over a Posts.xml, a site directory or a .7z.
Throughput is reported per post in the file (questions, answers and the rest: what the parser reads) and per
question (what becomes a document).
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Iterator


def _count_posts(path: str) -> dict[str, int]:
    from curation.sources.stackexchange.dump import iter_post_rows, open_posts
    from curation.sources.stackexchange.source import site_files

    counts = {"posts": 0, "questions": 0, "answers": 0}
    for site in site_files(path):
        with open_posts(site) as stream:
            for row in iter_post_rows(stream):
                counts["posts"] += 1
                counts["questions"] += row.get("PostTypeId") == "1"
                counts["answers"] += row.get("PostTypeId") == "2"
    return counts


def bench_stackexchange_parse(path: str, repeats: int = 3) -> dict[str, Any]:
    """Posts/s and questions/s of the Stack Exchange source on one core; the best of `repeats` runs."""
    from curation.sources.stackexchange.source import iter_documents, site_files

    counts = _count_posts(path)  # not timed: an independent count of what the timed runs read
    runs = []
    with _one_core():
        for _ in range(max(1, repeats)):
            started = time.perf_counter()
            documents = sum(1 for _ in iter_documents({"kind": "stackexchange", "path": path}))
            runs.append(time.perf_counter() - started)
    if documents != counts["questions"]:
        raise RuntimeError(f"source yielded {documents} documents for {counts['questions']} questions")
    best = min(runs)
    size = sum(os.path.getsize(f) for f in site_files(path) if os.path.exists(f))
    return {
        "name": "stackexchange_parse",
        "path": str(path),
        "bytes": size,
        **counts,
        "documents": documents,
        "seconds": round(best, 4),
        "seconds_all_runs": [round(r, 4) for r in runs],
        "posts_per_s": round(counts["posts"] / best, 1),
        "questions_per_s": round(counts["questions"] / best, 1),
        "mb_per_s": round(size / best / 1e6, 2),
        "cores": 1,
    }


@contextlib.contextmanager
def _one_core() -> Iterator[None]:
    """Pin this process to one CPU while timing (where the OS allows; the 7z reader thread shares it), then
    restore the caller's affinity so later benchmarks in the same process are unaffected."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(before)})
    except OSError:
        pass
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


if __name__ == "__main__":  # pragma: no cover - manual run: python -m bench.curation_bench PATH
    import json
    import sys

    print(json.dumps(bench_stackexchange_parse(sys.argv[1]), indent=2))
