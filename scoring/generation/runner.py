"""Send a batch of generation requests through the served-model client (scoring/api/client.py: retries with
backoff, the rate limit, the adaptive concurrency) on a thread pool, reusing every answer already paid for.

- `cached` maps a request key to the server's answer (its JSON) to that request, from the journal of a part cut
  off mid-way or of an earlier run: those requests are not sent again. Identical requests in one batch (two rows
  with the same text, asked greedily) are sent once; the answer's usage is counted on its first use only, so the
  table's token sums stay what was billed (reused answers keep theirs; `stats` counts this call's spending).
- `on_answer(key, answer)` is called as each new answer arrives (the journal writes it down at once), so a crash
  loses at most the requests in flight.
- `max_new` caps the requests this call may send (the part's share of the run's budget): reaching it raises
  BudgetExceeded before the request that would pass it is sent.
- A request the server refuses (a 4xx, a malformed answer) becomes a failed row for its (row, kind), its reason
  in `error`; a server that cannot be used (ApiFatal) stops the batch, unsent requests cancelled.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Callable, Mapping, Sequence

from scoring.api.client import ApiRequestError, CompletionsClient
from scoring.generation.requests import GenRequest, answer_rows, failed_row


class BudgetExceeded(RuntimeError):
    """A job would send more requests or tokens than its budget allows (--max-requests / --max-tokens)."""


class RequestRunner:
    def __init__(self, client: CompletionsClient, *, chat: bool, model: str, concurrency: int):
        self.client, self.chat, self.model = client, chat, model
        self.pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="tidemark-gen")
        self._lock = threading.Lock()
        self.stats = {"requests_sent": 0, "requests_reused": 0, "requests_failed": 0, "samples": 0,
                      "prompt_tokens": 0, "completion_tokens": 0, "requests_s": 0.0}

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _one(self, req: GenRequest, key: str, on_answer) -> dict:
        resp = self.client.complete(req.body(self.chat))
        answer_rows(req, resp, chat=self.chat, key=key)  # a malformed answer fails here, before it is journalled
        if on_answer is not None:
            on_answer(key, resp)
        return resp

    def run(self, requests: Sequence[GenRequest], cached: Mapping[str, dict] | None = None,
            on_answer: Callable[[str, dict], None] | None = None, max_new: int | None = None) -> list[dict]:
        """Every request's rows (in request order); see the module docstring."""
        cached = cached or {}
        keyed = [(r, r.key(self.chat, self.model)) for r in requests]
        new = list({k: r for r, k in keyed if k not in cached}.items())
        if max_new is not None and len(new) > max_new:
            raise BudgetExceeded(f"{len(new)} requests left to send where the budget allows {max_new}")
        t0 = time.perf_counter()
        futures = {self.pool.submit(self._one, r, k, on_answer): (r, k) for k, r in new}
        answers: dict[str, dict] = dict(cached)
        failed: dict[str, str] = {}
        try:
            for f in as_completed(futures):
                req, key = futures[f]
                exc = f.exception()
                if exc is None:
                    answers[key] = f.result()
                elif isinstance(exc, (ApiRequestError, ValueError, KeyError, TypeError)):
                    failed[key] = f"api_error: {exc}"[:500]
                else:
                    raise exc
        except BaseException:
            for pending in futures:
                pending.cancel()
            raise
        out, billed = [], set()
        for req, key in keyed:
            if key in failed:
                out.append(failed_row(req.id, req.kind, failed[key], target=req.target, info=req.info, request=key))
                continue
            rows = answer_rows(req, answers[key], chat=self.chat, key=key)
            if key in billed:
                for r in rows:
                    r["prompt_tokens"] = r["completion_tokens"] = 0
            billed.add(key)
            out.extend(rows)
        s = self.stats
        s["requests_sent"] += len(new)
        s["requests_reused"] += len(keyed) - len(new)
        s["requests_failed"] += len(failed)
        s["samples"] += sum(1 for r in out if r["sample"] >= 0)
        for k, _ in new:  # what this call paid for
            usage = (answers.get(k) or {}).get("usage") or {}
            s["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
            s["completion_tokens"] += int(usage.get("completion_tokens") or 0)
        s["requests_s"] = round(s["requests_s"] + time.perf_counter() - t0, 3)
        return out
