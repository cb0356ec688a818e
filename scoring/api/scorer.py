"""ApiScorer: the local Scorer's interface over a served model. Same windows (`plan_windows`: context, stride,
every position after the first predicted once), same stats columns, same per-row errors, so the token-stats table,
`rescore`, metrics and reports do not know the difference, except for `lp_source`, which says where the numbers
came from. Requests run `concurrency` at a time on a thread pool; ApiFatal stops the whole call."""
from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Sequence

import numpy as np

from scoring.api.client import ApiConfig, ApiRequestError, CompletionsClient
from scoring.api.echo import echo_logprobs, echo_request, parse_echo
from scoring.api.logit_bias import BiasExtractor, TokenKeys
from scoring.api.prompts import check_echoed_tokens, prompt_of
from scoring.lm.scorer import Window, assemble, plan_windows, stats_columns
from scoring.lm.tokenstats import STAT_FIELDS


# ApiScorer.stats() fields that are levels, not counts: a part reports them as they are, a run combines them so.
GAUGES = {"max_bound": max, "concurrency_ceiling": max, "concurrency_final": min, "concurrency_lowest": min}


class ApiScorer:
    def __init__(self, cfg: ApiConfig, tokenizer, *, context: int, stride: int | None = None,
                 api_key: str | None = None, client: CompletionsClient | None = None):
        if cfg.method is None:
            raise ValueError("ApiScorer needs a probed config (scoring/api/probe.py sets `method`)")
        self.cfg = cfg
        self.model_name = cfg.model
        self.context = int(context)
        self.stride = int(stride or max(1, self.context // 2))
        self.client = client or CompletionsClient(cfg, api_key)
        self.keys = TokenKeys(tokenizer)
        self.bias = BiasExtractor(self.client, cfg, self.keys) if cfg.method != "echo" else None
        self.pool = ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="tidemark-api")
        self._lock = threading.Lock()
        self.extraction = {"positions": 0, "listed": 0, "beyond_bias": 0, "ambiguous": 0, "max_bound": 0.0,
                           "requests_s": 0.0}

    @property
    def calls(self) -> int:
        return self.client.stats["calls"]

    def stats(self) -> dict:
        """Counters for run.json: HTTP calls, retries, tokens sent, and how the log-probabilities were extracted."""
        return {**self.client.stats, **self.extraction, **self.client.concurrency_report()}

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    # ---- per window -------------------------------------------------------------------------------------------
    def _echo_window(self, seq: np.ndarray, w: Window) -> dict:
        ids = seq[w.begin:w.end]
        prompt = prompt_of(self.cfg, self.keys.tokenizer, ids)
        resp = self.client.complete(echo_request(prompt, self.cfg.top_logprobs, self.cfg.max_tokens),
                                    n_tokens=len(ids))
        if self.cfg.prompt_format == "text":  # the server tokenized the text itself: it must be our tokens
            check_echoed_tokens(echo_logprobs(resp).get("tokens"), ids, self.keys, self.cfg.prefix_tokens,
                                f"the window at token {w.begin}")
        out = parse_echo(resp, w.length, w.pred_from - w.begin, self.cfg.top_logprobs, self.cfg.prefix_tokens)
        with self._lock:
            self.extraction["positions"] += w.end - w.pred_from
        return out

    def _bias_window(self, seq: np.ndarray, w: Window) -> dict:
        n = w.end - w.pred_from
        out = {k: np.empty(n, np.float32) for k in STAT_FIELDS}
        for j, t in enumerate(range(w.pred_from, w.end)):
            pos = self.bias.position(seq[w.begin:t], int(seq[t]))
            out["lp"][j], out["lp_max"][j], out["mu"][j], out["sigma"][j] = pos.lp, pos.lp_max, pos.mu, pos.sigma
            out["entropy"][j] = -pos.mu
            self._note(pos)
        return out

    def _note(self, pos) -> None:
        with self._lock:  # several request threads report here
            ex = self.extraction
            ex["positions"] += 1
            ex["listed"] += int(pos.listed)
            ex["ambiguous"] += int(pos.ambiguous)
            if math.isinf(pos.bound):
                ex["beyond_bias"] += 1
            else:
                ex["max_bound"] = max(ex["max_bound"], pos.bound)

    # ---- the Scorer interface ---------------------------------------------------------------------------------
    def score(self, token_ids: Sequence[Sequence[int]], first_predicted: Sequence[int] | None = None) -> list[dict]:
        seqs = [np.asarray(t, dtype=np.int64) for t in token_ids]
        firsts = list(first_predicted) if first_predicted is not None else [1] * len(seqs)
        plans = [plan_windows(len(s), f, self.context, self.stride, i) for i, (s, f) in enumerate(zip(seqs, firsts))]
        one = self._echo_window if self.bias is None else self._bias_window
        t0 = time.perf_counter()
        futures = {self.pool.submit(one, seqs[w.seq], w): w for plan in plans for w in plan}
        results: dict[Window, dict] = {}
        failed: dict[Window, str] = {}
        for f in as_completed(futures):
            w, exc = futures[f], f.exception()
            if exc is None:
                results[w] = f.result()
            elif isinstance(exc, (ApiRequestError, ValueError, KeyError, TypeError)):
                failed[w] = f"api_error: {exc}"[:500]
            else:  # ApiFatal (the server is gone) or a bug: stop now, without sending what is still queued
                for pending in futures:
                    pending.cancel()
                raise exc
        self.extraction["requests_s"] = round(self.extraction["requests_s"] + time.perf_counter() - t0, 3)
        errors: dict[int, str] = {}
        for w in (w for plan in plans for w in plan if w in failed):  # a row's first failed window names it
            errors.setdefault(w.seq, failed[w])
        return assemble(plans, results, errors)

    def __call__(self, batch: dict) -> dict:
        return stats_columns(self, batch, self.cfg.source)
