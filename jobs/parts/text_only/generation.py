"""Text-only scoring on the scoring pool: each benchmark part is read on the CPU stage (the same PrepareParts as
every benchmark job, without tokenising), then one API actor per `--actors` asks the part's requests
(scoring/generation), scores the part and writes

    OUT/generations.parquet/part-NNNNN.parquet   every generated sample (scoring/generation/requests.py)
    OUT/scores.parquet/part-NNNNN.parquet        one row per scored passage, one column per detector
    OUT/quarantine.parquet/part-NNNNN.parquet    rows read badly, and rows no detector could score
    OUT/_requests/part-NNNNN/*.jsonl             the journal: the server's answer to every request, by key

The journal is written as answers arrive (every JOURNAL_EVERY answers or JOURNAL_S seconds, one new file each
time, so it works on S3 too). A part that is retried, a job that crashed or ran out of budget mid-part, and a
rerun with other detectors that ask some of the same requests read it first and do not pay twice. It stays after
the job (the run's record of what the server said); deleting it costs only money.
"""
from __future__ import annotations

import functools
import json
import os
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa

from curation.io.ledger import quarantine_table
from curation.io.outputs import Location
from jobs.plane.part_store import part_name
from jobs.plane.scoring_pool import PoolStages, PrepareParts, from_ipc, scores_schema
from scoring.generation.kinds import Settings, first_phase, parse_kind, second_phase
from scoring.generation.requests import generations_table

GEN_PART_DIRS = ("generations.parquet", "scores.parquet", "quarantine.parquet")
JOURNAL = "_requests"
JOURNAL_EVERY, JOURNAL_S = 32, 5.0
# A local rewriter's share of content words replaced in each of the three paraphrases: three rates, so that the
# three differ even where few words have a substitute (at one rate, a passage with fewer substitutable words than
# the target gets every one of them replaced three times: three identical options)
LOCAL_PARAPHRASE_RATES = (0.2, 0.35, 0.5)


class Journal:
    """The server's answers to one part's requests, by request key (see the module docstring)."""

    def __init__(self, dest: Location, index: int):
        self.dest, self.under = dest, f"{JOURNAL}/{part_name(index)}"
        self.writer = f"{int(time.time())}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._pending: list[str] = []
        self._written, self._last = 0, time.monotonic()
        self._lock = threading.Lock()

    def load(self) -> dict[str, dict]:
        answers = {}
        for rel in self.dest.list(self.under):
            for line in self.dest.read_bytes(rel).decode("utf-8").splitlines():
                try:
                    item = json.loads(line)
                    answers[item["key"]] = item["answer"]
                except (ValueError, KeyError, TypeError):
                    continue  # a torn line of a crashed writer: that request is asked again
        return answers

    def add(self, key: str, answer: dict) -> None:
        with self._lock:
            self._pending.append(json.dumps({"key": key, "answer": answer}, ensure_ascii=False))
            due = len(self._pending) >= JOURNAL_EVERY or time.monotonic() - self._last >= JOURNAL_S
        if due:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            lines, self._pending = self._pending, []
            self._last = time.monotonic()
            if not lines:
                return
            self._written += 1
            name = f"{self.under}/{self.writer}-{self._written:05d}.jsonl"
        self.dest.write_bytes(name, ("\n".join(lines) + "\n").encode("utf-8"))


@functools.lru_cache(maxsize=2)
def token_counter(tokenizer: str | None):
    """A prompt-token counter from --tokenizer, or None (the plan then estimates); one per worker process."""
    if not tokenizer:
        return None
    from scoring.lm.model import load_tokenizer

    tok = load_tokenizer(tokenizer)
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])


@dataclass
class RequestPlanner:
    """The survey's per-part plan (jobs/plane/survey.py): the requests and tokens the part's rows will ask."""

    kinds: tuple
    settings: Settings
    tokenizer: str | None = None
    local_paraphrases: bool = False

    def __call__(self, rows: Sequence[dict]) -> dict:
        from scoring.generation.plan import plan_rows

        return plan_rows(((r["id"], r["input"]) for r in rows), self.kinds, self.settings,
                         token_counter(self.tokenizer), self.local_paraphrases)


def local_paraphrases(spec: str | None, seed: int):
    """DE-COP's three paraphrases made here by `tidemark paraphrase`'s rewriters (wordnet, mlm:PATH), or None for
    the served model's: rewrites of LOCAL_PARAPHRASE_RATES of the content words, each under its own seed."""
    if not spec or spec == "served":
        return None
    from curation.paraphrase.rewriters import make_rewriter

    rewriters = [make_rewriter(spec, seed + k, rate) for k, rate in enumerate(LOCAL_PARAPHRASE_RATES)]

    def make(rid: str, text: str) -> list[dict]:
        return [{"id": rid, "kind": "paraphrase", "sample": k, "endpoint": f"local:{spec}", "prompt": None,
                 "text": rw.rewrite(rid, text).text, "finish_reason": "local", "prompt_tokens": 0,
                 "completion_tokens": 0, "seed": seed + k, "target": "",
                 "info": json.dumps({"rate": LOCAL_PARAPHRASE_RATES[k]}),
                 "top_logprobs": None, "request": None, "error": None} for k, rw in enumerate(rewriters)]

    return make


class GenerateParts:
    """The API actor: one prepared part → its requests asked (journal first), its scores, its files; returns the
    part's summary (the pool's score stage for text-only jobs)."""

    def __init__(self, spec, branch: int, threads: int | None, finish: dict, generation: dict):
        from scoring.api.client import ApiConfig, CompletionsClient
        from scoring.generation.runner import RequestRunner

        api = dict(generation["api"])
        key = api.pop("key", None)
        cfg = ApiConfig.from_dict(api)
        self.chat = bool(generation["chat"])
        self.client = CompletionsClient(cfg, key.value if key is not None else None,
                                        endpoint="chat/completions" if self.chat else "completions")
        self.runner = RequestRunner(self.client, chat=self.chat, model=cfg.model, concurrency=cfg.concurrency)
        self.settings = Settings(**generation["settings"])
        self.kinds = tuple(generation["kinds"])
        self.count = token_counter(generation.get("tokenizer"))
        self.paraphrase = local_paraphrases(generation.get("paraphrases"), self.settings.seed)
        self.caps = {int(k): v for k, v in (generation.get("caps") or {}).items()}
        self.dest, self.methods = Location(finish["dest"]), list(finish["methods"])

    def generate(self, row: dict) -> dict:
        from scoring.generation.scores import compute_generation_scores

        t0 = time.perf_counter()
        index = int(row["index"])
        rows, read_q = from_ipc(row["rows"]), from_ipc(row["quarantine"])
        texts = dict(zip(rows.column("id").to_pylist(), rows.column("input").to_pylist()))
        journal = Journal(self.dest, index)
        cached = journal.load()
        before = dict(self.runner.stats)
        cap = self.caps.get(index)
        gens, asked = [], []
        for rid, text in texts.items():
            requests, skipped = first_phase(rid, text, self.kinds, self.settings, self.count,
                                            self.paraphrase is not None)
            asked.extend(requests)
            gens.extend(skipped)
            if self.paraphrase is not None and any(parse_kind(k)[0] == "decop" for k in self.kinds):
                gens.extend(self.paraphrase(rid, text))
        try:
            gens.extend(self.runner.run(asked, cached, journal.add, cap))
            by_row: dict[str, list] = {}
            for g in gens:
                if g["kind"] == "paraphrase":
                    by_row.setdefault(g["id"], []).append(g)
            second = []
            for rid, text in texts.items():
                requests, skipped = second_phase(rid, text, self.kinds, by_row.get(rid, []), self.settings)
                second.extend(requests)
                gens.extend(skipped)
            sent = self.runner.stats["requests_sent"] - before["requests_sent"]
            gens.extend(self.runner.run(second, cached, journal.add, None if cap is None else cap - sent))
        finally:
            journal.flush()
        order = {rid: i for i, rid in enumerate(texts)}
        gens.sort(key=lambda g: (order[g["id"]], g["kind"], g["sample"]))
        table = generations_table(gens)
        scores, q, not_scored = compute_generation_scores(table, rows.select(["id", "label", "bucket", "in_eval"]
                                                                              ).to_pylist(), self.methods)
        quarantine = quarantine_table([*read_q.to_pylist(), *q])
        name = f"{part_name(index)}.parquet"
        schema = scores_schema(self.methods)
        files = {"generations": self.dest.write_parquet(f"generations.parquet/{name}", table),
                 "scores": self.dest.write_parquet(f"scores.parquet/{name}", scores.select(schema.names).cast(schema)),
                 "quarantine": self.dest.write_parquet(f"quarantine.parquet/{name}", quarantine)}
        spent = {k: (round(v - before.get(k, 0), 3) if isinstance(v, float) else v - before.get(k, 0))
                 for k, v in self.runner.stats.items()}
        return {"index": index, "how": "streamed", "rows_in": rows.num_rows + read_q.num_rows,
                "scored": scores.num_rows, "quarantined": quarantine.num_rows,
                "reasons": dict(Counter(quarantine.column("reason").to_pylist())), "worker_failed": 0,
                "detect_write_s": round(time.perf_counter() - t0, 3), "files": files,
                "api": {**spent, **self.client.concurrency_report(), "retries": self.client.stats["retries"]},
                "not_scored": not_scored, "samples": table.num_rows, "answers": answer_counts(table)}

    def __call__(self, batch: pa.Table) -> pa.Table:
        return pa.Table.from_pylist([{"index": r["index"], "summary": json.dumps(self.generate(r))}
                                     for r in batch.to_pylist()])


def answer_counts(table: pa.Table) -> dict:
    """DE-COP's answers per part: asked and unparsable (run.json → generation.decop_answers)."""
    from scoring.detectors.decop import parse_letter

    asked = unparsable = 0
    for kind, sample, text in zip(*(table.column(c).to_pylist() for c in ("kind", "sample", "text"))):
        if parse_kind(kind)[0] == "decop" and sample >= 0:
            asked += 1
            unparsable += parse_letter(text) is None
    return {"decop_asked": asked, "decop_unparsable": unparsable}


def generation_stages(spec, finish: dict, generation: dict) -> PoolStages:
    """PrepareParts (read, no tokenising) on the CPU pool, GenerateParts on the API actors."""
    return PoolStages(PrepareParts, {"spec": spec, "exclude_ids": [], "tokenize": False}, GenerateParts, finish,
                      {"generation": generation})

