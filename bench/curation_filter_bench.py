"""Curation throughput, parse and filter: Stack Exchange posts/s through the source (both passes, HTML stripped)
and the build's row-level stages (time cutoff, word range, code/formula, language ID, dedup keys) on one core, in
this process, with the StackMIA config (jobs/configs/stackmia.yaml) moved onto the dump's dates.
`bench/curation_bench.py` times the parse alone; this adds the filters. When the real dump is absent a Posts.xml
is synthesised (recorded as such in the result) so the code path is still measured.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.curation_bench import _count_posts, _one_core

REPO = Path(__file__).resolve().parents[1]
REAL_DUMP = REPO.parent / "shared" / "data" / "stackexchange" / "coffee.stackexchange.com" / "Posts.xml"

_WORDS = ("coffee grind espresso roast bean water temperature brew pour filter milk crema acidity aroma kettle "
          "burr grinder ratio extraction bitter sweet cup morning machine pressure steam").split()


def synthesize_posts(path: Path, n_questions: int = 1500, answers_per_question: int = 2, seed: int = 0) -> Path:
    """A Posts.xml in the dump's format: questions with HTML bodies across Jan–Mar 2015, and answers."""
    import random
    from xml.sax.saxutils import quoteattr

    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ['\ufeff<?xml version="1.0" encoding="utf-8"?>', "<posts>"]
    pid = 0
    for q in range(n_questions):
        pid += 1
        qid = pid
        month, day = 1 + q * 3 // n_questions, 1 + rng.randrange(28)
        body = "".join(f"<p>{' '.join(rng.choice(_WORDS) for _ in range(rng.randint(15, 60))).capitalize()}.</p>\n"
                       for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.1:
            body += "<pre><code>grind_size = 18</code></pre>\n"
        lines.append(f'  <row Id="{qid}" PostTypeId="1" CreationDate="2015-{month:02d}-{day:02d}T10:00:00.000" '
                     f'Score="{rng.randint(0, 20)}" Body={quoteattr(body)} OwnerUserId="{rng.randint(1, 500)}" '
                     f'Title={quoteattr(" ".join(rng.choice(_WORDS) for _ in range(6)) + "?")} '
                     f'Tags="&lt;{rng.choice(_WORDS)}&gt;" AnswerCount="{answers_per_question}" CommentCount="0" />')
        for _ in range(answers_per_question):
            pid += 1
            lines.append(f'  <row Id="{pid}" PostTypeId="2" ParentId="{qid}" '
                         f'CreationDate="2015-{month:02d}-{min(28, day + 1):02d}T12:00:00.000" Score="1" '
                         f'Body={quoteattr("<p>" + " ".join(rng.choice(_WORDS) for _ in range(30)) + "</p>")} />')
    lines.append("</posts>")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def posts_path(work: Path) -> tuple[Path, bool, str]:
    """(path, synthetic?, note): the real coffee dump when present, else a synthesised one."""
    if REAL_DUMP.is_file():
        return REAL_DUMP, False, f"real dump {REAL_DUMP}"
    path = synthesize_posts(work / "synthetic-stackexchange" / "Posts.xml")
    return path, True, f"real dump not found at {REAL_DUMP}: measured on a synthesised Posts.xml ({path})"


def bench_parse_and_filter(path: str, repeats: int = 3) -> dict[str, Any]:
    """Posts/s of source + row-level stages on one core; the best of `repeats` runs (stages built beforehand)."""
    from curation.config import load_config
    from curation.stages.pipeline import _stages_for, annotate_records, to_record
    from curation.sources.stackexchange.source import iter_documents

    cfg = load_config(REPO / "jobs" / "configs" / "stackmia.yaml", [
        f"source.path={path}", "cutoffs.member_before=2015-02-01", "cutoffs.nonmember_after=2015-03-01"])
    counts = _count_posts(path)
    _stages_for(cfg)  # build once outside the clock (loads the language-ID model), as a long-lived worker does
    runs, kept = [], 0
    with _one_core():
        for _ in range(max(1, repeats)):
            started = time.perf_counter()
            batch, kept, docs = [], 0, 0
            for doc in iter_documents(cfg["source"]):
                batch.append(to_record(doc))
                docs += 1
                if len(batch) == 256:
                    kept += _kept(annotate_records(batch, cfg))
                    batch = []
            if batch:
                kept += _kept(annotate_records(batch, cfg))
            runs.append(time.perf_counter() - started)
    best = min(runs)
    return {"name": "stackexchange_parse_filter", "path": str(path), **counts, "documents": docs, "kept": kept,
            "seconds": round(best, 4), "seconds_all_runs": [round(r, 4) for r in runs],
            "posts_per_s": round(counts["posts"] / best, 1), "questions_per_s": round(counts["questions"] / best, 1),
            "stages": [type(s).__name__ for s in _stages_for(cfg)], "cores": 1}


def _kept(table) -> int:
    return sum(1 for s in table.column("stage").to_pylist() if not s)
