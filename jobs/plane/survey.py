"""The survey: one cheap read pass over every part, on the workers, before anything is scored. It returns what the
driver needs to plan, and nothing more (ids, labels and line counts; about 40 bytes a row):

- line counts per part, which give each jsonl part its first line number (row ids of id-less rows);
- every good row's id, so duplicates are found across parts (the first occurrence wins, as in
  `jobs.plane.benchmark_reader`) and later ones are quarantined by the worker that reads them;
- the ReCaLL prefix, chosen as the non-members with the smallest seeded hash of their id (the same rows whatever
  the cluster or the part size), instead of drawing from non-members materialised in the driver;
- DC-PDD's token frequencies when no --ref-corpus is given: a distributed count of the original texts' token
  ids, summed on the driver (a vocabulary-sized vector, whatever the number of rows). Counted over every
  readable row, duplicates included.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np
import pyarrow as pa

from jobs.plane.benchmark_parts import PartSpec, read_part
from curation.io.ledger import first_occurrences
from scoring.lm.views import stable_seed

IDS_SCHEMA = pa.schema([("id", pa.string()), ("auto_id", pa.bool_()), ("line", pa.int32()), ("label", pa.int8())])


@functools.lru_cache(maxsize=2)
def _tokenizer(path: str):
    """One tokenizer per worker process: the survey's tasks reuse Ray's warm workers, and a tokenizer loads once."""
    from scoring.lm.model import load_tokenizer

    return load_tokenizer(path)


class SurveyParts:
    """One part's survey: `part` (PartSpec JSON) → index, n_lines, n_bad, digest, ids (IPC), token counts."""

    def __init__(self, count_tokens_of: str | None = None, planner=None):
        self.planner = planner  # a text-only job's request plan of a part's rows (jobs/parts/text_only/generation.py)
        self.tokenizer = _tokenizer(count_tokens_of) if count_tokens_of else None

    def survey(self, part_json: str) -> dict:
        from jobs.plane.scoring_pool import to_ipc

        part = PartSpec.from_json(part_json)
        got = read_part(part)
        ids = pa.Table.from_pylist([{"id": r["id"], "auto_id": r["auto_id"], "line": r["line"], "label": r["label"]}
                                    for r in got.rows], schema=IDS_SCHEMA)
        out = {"index": part.index, "n_lines": got.n_lines, "n_bad": len(got.quarantined), "digest": got.digest,
               "ids": to_ipc(ids), "vocab": 0, "tok": b"", "cnt": b"",
               "plan": json.dumps(self.planner(got.rows)) if self.planner is not None else ""}
        if self.tokenizer is not None:
            enc = self.tokenizer([r["input"] for r in got.rows], add_special_tokens=True)["input_ids"] if got.rows else []
            flat = np.concatenate([np.asarray(t, dtype=np.int64) for t in enc]) if enc else np.zeros(0, np.int64)
            tok, cnt = np.unique(flat, return_counts=True)
            out.update(vocab=len(self.tokenizer), tok=tok.astype(np.int64).tobytes(), cnt=cnt.astype(np.int64).tobytes())
        return out


def survey_part(shared: dict, part: str) -> dict:
    """The Ray task: one part's survey (SurveyParts.survey)."""
    return SurveyParts(shared["count_tokens_of"], shared["planner"]).survey(part)


@dataclass
class Survey:
    parts: list[PartSpec]  # with first_line filled in
    drops: dict[int, list[int]]  # part index → in-part lines that repeat an earlier id
    digests: dict[int, str]
    n_good: int = 0
    n_bad: int = 0
    n_duplicates: int = 0
    prefix: list[tuple[int, int, str]] = field(default_factory=list)  # (part, line, id) of the ReCaLL prefix rows
    # Con-ReCall's prefixes, per label ("member", "nonmember"): (part, line, id) in benchmark order
    labelled_prefixes: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)
    pool: list[tuple[int, int, str]] = field(default_factory=list)  # CoDeC's context pool, in benchmark order
    token_counts: np.ndarray | None = None
    plans: dict[int, dict] = field(default_factory=dict)  # part index → its request plan (text-only jobs)


def run_survey(parts: Sequence[PartSpec], *, count_tokens_of: str | None, prefix_shots: int, seed: int,
               runner, progress: bool = True, planner=None, labelled_shots: int = 0, pool_size: int = 0) -> Survey:
    """Run the survey pass on `runner` (jobs/plane/runners.py: Ray, or this process) and plan from it (see the module
    docstring). On Ray, each part is a plain task, not a Ray Data actor pool: tasks run in Ray's warm worker
    processes, where a pool first spawned its actors (about two seconds of every job's start-up on 2 cores, for a
    pass that reads a few rows)."""
    from jobs.plane.scoring_pool import from_ipc

    results = {}
    counts = None
    shared = {"count_tokens_of": count_tokens_of, "planner": planner}
    for r in runner.map(survey_part, [{"part": p.to_json()} for p in parts], shared, desc="survey",
                        progress=progress, num_cpus=0.5):
        results[r["index"]] = r
        if r["vocab"]:
            if counts is None:
                counts = np.zeros(r["vocab"], dtype=np.int64)
            np.add.at(counts, np.frombuffer(r["tok"], dtype=np.int64), np.frombuffer(r["cnt"], dtype=np.int64))
        r["tok"] = r["cnt"] = b""
    survey = plan_from_survey(parts, results, prefix_shots=prefix_shots, seed=seed, token_counts=counts,
                              unipc=from_ipc, labelled_shots=labelled_shots, pool_size=pool_size)
    survey.plans = {i: json.loads(r["plan"]) for i, r in results.items() if r.get("plan")}
    return survey


def plan_from_survey(parts: Sequence[PartSpec], results: dict, *, prefix_shots: int, seed: int,
                     token_counts=None, unipc=None, labelled_shots: int = 0, pool_size: int = 0) -> Survey:
    """Number the lines, resolve ids, find duplicates and pick the prefix. Pure: tested without Ray. The ids stay
    in Arrow (first occurrences by index_in over the unique ids): a Python set of every id cost ~0.2 KB a row."""
    import heapq

    import pyarrow.compute as pc

    planned, next_line = [], {}
    for p in parts:
        first = next_line.get(p.path, 1)
        planned.append(replace(p, first_line=first) if p.fmt == "jsonl" else p)
        next_line[p.path] = first + results[p.index]["n_lines"]
    survey = Survey(planned, {}, {p.index: results[p.index]["digest"] for p in parts}, token_counts=token_counts)
    tables = []
    for p in planned:  # benchmark order, so the first occurrence of an id is the one kept
        r = results[p.index]
        survey.n_bad += r["n_bad"]
        t = unipc(r["ids"])
        ids = t["id"]
        if p.fmt == "jsonl" and t.num_rows:  # id-less jsonl rows are named by their line in the file
            auto = pc.binary_join_element_wise(
                pa.scalar(f"{p.stem}:"), pc.cast(pc.add(pc.cast(t["line"], pa.int64()), p.first_line), pa.string()),
                pa.scalar(""))
            ids = pc.if_else(t["auto_id"], auto, ids)
        tables.append(pa.table({"id": ids, "part": pa.array(np.full(t.num_rows, p.index, dtype=np.int64)),
                                "line": t["line"], "label": t["label"]}))
    rows = pa.concat_tables(tables) if tables else pa.table(
        {"id": pa.array([], pa.string()), "part": pa.array([], pa.int64()), "line": pa.array([], pa.int32()),
         "label": pa.array([], pa.int8())})
    survey.n_good = rows.num_rows
    dup = ~first_occurrences(rows["id"])
    survey.n_duplicates = int(dup.sum())
    for part, line in zip(rows["part"].filter(pa.array(dup)).to_pylist(), rows["line"].filter(pa.array(dup)).to_pylist()):
        survey.drops.setdefault(part, []).append(line)
    labels = np.asarray(rows["label"].to_numpy(zero_copy_only=False))

    def smallest(label: int | None, n: int, who: str, key: str = "recall-prefix") -> list[tuple[int, int, str]]:
        """The n rows of a label (None: any) with the smallest seeded hash of their id, in benchmark order."""
        cand = rows.filter(pa.array((~dup) & ((labels == label) if label is not None else True)))
        if cand.num_rows < n and label is not None:
            raise ValueError(f"{who} needs {n} {'non-member' if label == 0 else 'member'} rows for its prefix; the "
                             f"benchmark has {cand.num_rows}")
        chosen = heapq.nsmallest(n, ((stable_seed(key, seed, rid), part, line, rid)
                                     for b in cand.to_batches(65_536)
                                     for rid, part, line in zip(*(b.column(c).to_pylist()
                                                                  for c in ("id", "part", "line")))))
        return sorted((part, line, rid) for _, part, line, rid in chosen)

    if prefix_shots:
        survey.prefix = smallest(0, prefix_shots, "recall")
    if labelled_shots:  # the same rule per label: ReCaLL's prefix is among Con-ReCall's non-members
        survey.labelled_prefixes = {"nonmember": smallest(0, labelled_shots, "con_recall"),
                                    "member": smallest(1, labelled_shots, "con_recall")}
    if pool_size:  # CoDeC's context pool: the same rule over every row, its own hash
        survey.pool = smallest(None, pool_size, "codec", key="codec-pool")
    return survey


def _texts(survey: Survey, chosen: Sequence[tuple[int, int, str]]) -> list[str]:
    """The chosen rows' texts, read from their parts (a few rows)."""
    by_part = {p.index: p for p in survey.parts}
    return [next(r for r in read_part(by_part[part]).rows if r["line"] == line)["input"] for part, line, _ in chosen]


def prefix_text(survey: Survey) -> tuple[str | None, list[str]]:
    """The ReCaLL prefix: the chosen rows' texts in benchmark order, joined by blank lines."""
    if not survey.prefix:
        return None, []
    return "\n\n".join(_texts(survey, survey.prefix)) + "\n\n", [rid for _, _, rid in survey.prefix]


POOL_CHARS = 2048  # CoDeC's demo cuts every sample to 2,048 characters (at a word boundary): contexts stay short


def context_pool(survey: Survey) -> tuple[tuple[str, str], ...]:
    """CoDeC's pool as (id, text) pairs, each text cut to POOL_CHARS at a word boundary."""
    out = []
    for (_, _, rid), text in zip(survey.pool, _texts(survey, survey.pool)):
        if len(text) > POOL_CHARS:
            text = text[:POOL_CHARS].rsplit(" ", 1)[0]
        out.append((rid, text))
    return tuple(out)


def labelled_prefix_texts(survey: Survey) -> dict[str, tuple[str, list[str]]]:
    """Con-ReCall's prefixes, {label: (text, ids)}: the shots joined with nothing between them, as its official
    code and Fast-MIA join them."""
    return {label: ("".join(_texts(survey, chosen)), [rid for _, _, rid in chosen])
            for label, chosen in survey.labelled_prefixes.items()}


def survey_json(survey: Survey) -> dict:
    return {"parts": len(survey.parts), "rows_readable": survey.n_good, "rows_unreadable": survey.n_bad,
            "duplicates": survey.n_duplicates}
