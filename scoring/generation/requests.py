"""One generation request (GenRequest), the body it becomes for a completions or a chat endpoint, its key, and the
generations table its answer becomes.

A request is identified by its key: the sha256 of what is sent (endpoint, prompt or messages, sampling fields,
seed) and of the served model's name. Two runs that would send the same request share its answer: the journal
(jobs/parts/text_only/generation.py) reuses it instead of paying again.

The generations table (`generations.parquet`, one row per generated sample) is to text-only detectors what
token_stats.parquet is to the others: every score is a function of it, and `tidemark rescore --generations`
recomputes them from it without the server. A row that was not asked (a passage without exactly one name) or
whose request failed has one row with `sample` -1, no text and the reason in `error`.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import pyarrow as pa

GENERATIONS_SCHEMA = pa.schema([
    ("id", pa.string()),  # the benchmark row
    ("kind", pa.string()),  # the prompt kind with its parameters, e.g. continuation@prefix=0.5
    ("sample", pa.int32()),  # the sample's index within (row, kind); -1: no generation (see `error`)
    ("endpoint", pa.string()),  # completions | chat | local:<rewriter> (paraphrases made without the server)
    ("prompt", pa.string()),  # the prompt text, or for chat the messages as JSON
    ("text", pa.string()),  # what the model generated
    ("finish_reason", pa.string()),  # stop | length | ... as the server said
    ("prompt_tokens", pa.int64()),  # the request's usage, on its first sample only (so sums give what was billed)
    ("completion_tokens", pa.int64()),
    ("seed", pa.int64()),  # the seed sent (null where none was)
    ("target", pa.string()),  # what the detector compares the text with: true continuation, letter, name
    ("info", pa.string()),  # JSON: what the prompt was built from (option order, prefix words, ...)
    ("top_logprobs", pa.string()),  # JSON: the first generated tokens' top log-probabilities, where given
    ("request", pa.string()),  # the request's key
    ("error", pa.string()),  # why there is no generation (sample -1)
])


@dataclass(frozen=True)
class GenRequest:
    id: str
    kind: str
    first_sample: int  # the index of its first choice within (row, kind)
    n: int  # choices asked for in this request
    prompt: str  # completions: the prompt; chat: the user message
    max_tokens: int
    temperature: float
    target: str = ""
    system: str | None = None  # chat: a system message first
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: int = 0  # top log-probabilities of the generated tokens to ask for (0: none)
    info: dict = field(default_factory=dict)

    def messages(self) -> list[dict]:
        msgs = [{"role": "system", "content": self.system}] if self.system else []
        return msgs + [{"role": "user", "content": self.prompt}]

    def body(self, chat: bool) -> dict:
        """The JSON body (without the model name) for the completions or the chat endpoint."""
        body: dict = {"messages": self.messages()} if chat else {"prompt": self.prompt}
        body.update(max_tokens=self.max_tokens, temperature=self.temperature)
        if self.n > 1:
            body["n"] = self.n
        if self.top_p is not None and self.temperature > 0:
            body["top_p"] = self.top_p
        if self.seed is not None:
            body["seed"] = self.seed
        if self.stop:
            body["stop"] = list(self.stop)
        if self.logprobs:
            body.update({"logprobs": True, "top_logprobs": self.logprobs} if chat else {"logprobs": self.logprobs})
        return body

    def prompt_record(self, chat: bool) -> str:
        return json.dumps(self.messages(), ensure_ascii=False) if chat else self.prompt

    def key(self, chat: bool, model: str) -> str:
        canon = json.dumps({"endpoint": "chat" if chat else "completions", "model": model, **self.body(chat)},
                           sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:32]


def answer_rows(req: GenRequest, resp: dict, *, chat: bool, key: str) -> list[dict]:
    """The generations rows of one answer. A server that returns fewer choices than asked is an error for the
    caller (ValueError); more are cut to what was asked."""
    choices = resp.get("choices") or []
    if len(choices) < req.n:
        raise ValueError(f"asked for {req.n} choices, the server returned {len(choices)}")
    usage = resp.get("usage") or {}
    rows = []
    for j, c in enumerate(choices[:req.n]):
        text = (c.get("message") or {}).get("content") if chat else c.get("text")
        rows.append({"id": req.id, "kind": req.kind, "sample": req.first_sample + j,
                     "endpoint": "chat" if chat else "completions", "prompt": req.prompt_record(chat),
                     "text": text or "", "finish_reason": c.get("finish_reason"),
                     "prompt_tokens": _int(usage.get("prompt_tokens")) if j == 0 else 0,
                     "completion_tokens": _int(usage.get("completion_tokens")) if j == 0 else 0,
                     "seed": req.seed, "target": req.target, "info": json.dumps(req.info, sort_keys=True),
                     "top_logprobs": _first_tops(c.get("logprobs"), chat) if req.logprobs else None,
                     "request": key, "error": None})
    return rows


def failed_row(rid: str, kind: str, error: str, *, target: str = "", info: dict | None = None,
               request: str | None = None) -> dict:
    """The one row of a (row, kind) without a generation: skipped before asking, or its request failed."""
    return {"id": rid, "kind": kind, "sample": -1, "endpoint": None, "prompt": None, "text": None,
            "finish_reason": None, "prompt_tokens": 0, "completion_tokens": 0, "seed": None, "target": target,
            "info": json.dumps(info or {}, sort_keys=True), "top_logprobs": None, "request": request,
            "error": error}


def _int(x) -> int | None:
    return None if x is None else int(x)


FIRST_TOKENS = 4  # top log-probabilities kept for the first generated tokens (an answer letter is among them)


def _first_tops(logprobs, chat: bool) -> str | None:
    """The first generated tokens' top log-probabilities as JSON [{token: lp}, ...], from either answer shape."""
    if not logprobs:
        return None
    if chat:
        tops = [{t["token"]: t["logprob"] for t in (c.get("top_logprobs") or [])}
                for c in (logprobs.get("content") or [])[:FIRST_TOKENS]]
    else:
        tops = [dict(t or {}) for t in (logprobs.get("top_logprobs") or [])[:FIRST_TOKENS]]
    return json.dumps(tops, ensure_ascii=False)


def generations_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=GENERATIONS_SCHEMA)
