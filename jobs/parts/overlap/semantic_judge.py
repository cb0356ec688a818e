"""`overlap --semantic --judge-model M --judge-api-base URL`: the LLM judge of the pairs the verifier decided
(scoring/semantic/judge.py: which pairs, the prompts, the verdicts), run on the driver after the decisions.

The pairs are benchmark-sized (at most one per item and per null item), so the driver asks them itself, on
scoring/generation's RequestRunner (the served-model client's retries, rate limit and adaptive concurrency, on a
thread pool) over the chat endpoint, as a text-only evaluation does; no second HTTP client. Every answer is written
to text-only's Journal as it arrives, under OUT/semantic/judge/_requests/, keyed by the request (the messages, the
sampling, the served model's name; not the address or the key), so a rerun with the same OUT pays nothing for a pair
already asked, and a job stopped mid-way (a server gone, Ctrl-C) loses only the requests in flight. The pairs come
only after the corpus pass, so the command first sends the server one tiny request (probe_judge) and stops at once,
exit 2, when it cannot be used; unless OUT already holds journaled answers and the run resumes (check_judge): a
rerun whose every pair is cached needs no server, and one that still needs it stops when the first pair is asked.

--judge-budget N: at most N pairs are judged, the most likely rephrases first (decision score, then cosine, then
input order; benchmark and null items alike, so the null is judged under the same rule as the benchmark). The N are
chosen before the cache is read, so the same settings give the same verdicts whatever an earlier run paid for, and
no run asks more than N. A pair beyond the budget, or whose request failed (a 4xx), keeps the verifier's decision.
OUT/semantic/judge.jsonl holds one row per judged pair: the raw answer, its verdict, whether it was cached.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from scoring.semantic.judge import (KINDS, LOWER_BAR, MAX_TOKENS, TEMPERATURE, kind_of, messages, parse_verdict,
                                    prompt_digest, rephrased, to_judge)

JUDGE_DIR = "judge"  # under OUT/semantic/: the journal of the server's answers
ANSWERS = "judge.jsonl"  # under OUT/semantic/
KEY_ENV = "OPENAI_API_KEY"  # the text-only path's key variable, the default of --judge-api-key-env
PROBE_PROMPT = "Reply with the single word: ok"  # probe_judge's one request (max_tokens 1, temperature 0)
PROBE_RETRIES = 2  # the probe's retries: a refused connection fails in ~2 s, not the judge's ~30 s of backoff


@dataclass(frozen=True)
class JudgeRequest:
    """What the command resolved for the judge (no key: only the name of the variable that holds it)."""

    api_base: str
    model: str
    kind: str = "auto"  # auto | math | code | knowledge
    budget: int | None = None  # the most pairs judged; None: every pair the rule picks
    api_key_env: str = KEY_ENV
    concurrency: int = 8


def plan(decisions: Sequence, threshold: float, budget: int | None) -> tuple[list[int], list[int]]:
    """(the indices judged, those the rule picks that the budget leaves out), each in input order."""
    eligible = [q for q, d in enumerate(decisions) if to_judge(d, threshold)]
    order = sorted(eligible, key=lambda q: (-decisions[q].decision_score, -decisions[q].candidate.cosine, q))
    n = len(order) if budget is None else budget
    return sorted(order[:n]), sorted(order[n:])


def judge_request(rid: str, kind: str, item: str, passage: str):
    from scoring.generation.requests import GenRequest

    system, user = messages(kind, item, passage)
    return GenRequest(id=rid, kind=f"judge:{kind}", first_sample=0, n=1, prompt=user, max_tokens=MAX_TOKENS,
                      temperature=TEMPERATURE, system=system)


def judge_journal(where):
    """The journal of the judge's answers under OUT/semantic/ (`where`, a Location): what ask() reads and adds to,
    and what check_judge counts."""
    from curation.io.outputs import Location
    from jobs.parts.text_only.generation import Journal

    return Journal(Location(where.child(JUDGE_DIR)), 0)


def ask(jreq: JudgeRequest, requests: list, where) -> tuple[list[dict], set, dict]:
    """(one generations row per request, the keys answered before this run, the runner's stats)."""
    from scoring.api.client import ApiConfig, CompletionsClient
    from scoring.generation.runner import RequestRunner

    api = ApiConfig(base=jreq.api_base, model=jreq.model, mode="none", method="generate",
                    concurrency=jreq.concurrency)
    client = CompletionsClient(api, os.environ.get(jreq.api_key_env), endpoint="chat/completions")
    runner = RequestRunner(client, chat=True, model=api.model, concurrency=api.concurrency)
    journal = judge_journal(where)
    cached = journal.load()
    try:
        rows = runner.run(requests, cached, journal.add)
    finally:
        journal.flush()
        runner.close()
    return rows, set(cached), dict(runner.stats)


def probe_judge(jreq: JudgeRequest) -> None:
    """One tiny chat request before any corpus work, so a judge server that is not there, or that refuses the key
    or the model (401/403/404), stops the command in seconds rather than after a corpus pass of hours. It goes
    through the judge's client (same endpoint, key and per-request timeout) with fewer retries and a short backoff,
    and not through the journal: it is not a judged pair. Raises ApiFatal (a RuntimeError: exit 2) with the
    redacted URL, the model, the reason and the options to check."""
    from jobs.kit.redact import redact_text
    from scoring.api.client import ApiConfig, ApiError, ApiFatal, CompletionsClient

    api = ApiConfig(base=jreq.api_base, model=jreq.model, mode="none", method="generate", concurrency=1,
                    max_retries=PROBE_RETRIES, backoff_s=0.5, max_backoff_s=1.0)
    key = os.environ.get(jreq.api_key_env)
    client = CompletionsClient(api, key, endpoint="chat/completions")
    try:
        client.complete({"messages": [{"role": "user", "content": PROBE_PROMPT}], "max_tokens": 1, "temperature": 0})
    except ApiError as exc:  # ApiFatal, ApiRefused (5xx/429 on every try), ApiRequestError (another 4xx)
        reason = str(exc).replace(f"{client.url} ", "the server ", 1)  # the URL is named once, below
        # the URL may carry a user:password (and the client's messages quote it): redact the whole line
        raise ApiFatal(redact_text(
            f"the LLM judge cannot be used: a one-token test request to {client.url} (model {jreq.model!r}) failed: "
            f"{reason}. Check --judge-api-base, --judge-model and --judge-api-key-env ({jreq.api_key_env} is "
            f"{'set' if key else 'not set'})")) from None


def check_judge(jreq: JudgeRequest, where, resume: bool) -> None:
    """probe_judge before the corpus pass (`where`: OUT/semantic/, a Location). When it fails and the run resumes an
    OUT that holds journaled answers, the run goes on with a warning instead: those answers may be every pair it asks
    (a rerun to redraw a report, the server long gone), and if they are not, the first pair it must send stops it
    then, after a corpus pass that a resumed run mostly reuses."""
    from jobs.kit.log import log
    from scoring.api.client import ApiFatal

    try:
        probe_judge(jreq)
    except ApiFatal as exc:
        cached = len(judge_journal(where).load()) if resume else 0
        if not cached:
            raise
        log(f"warning: {exc}. OUT holds {cached:,} journaled answer(s) from an earlier run, so the run goes on: a "
            "pair not among them stops it when it is asked")


def side(qs: Sequence[int], decisions: Sequence, verdicts: Sequence, threshold: float, cut: set, failed: set) -> dict:
    """What the judge did to one side (the benchmark's items or the null's)."""
    from scoring.semantic.decide import flagged

    verifier = [flagged(decisions[q], threshold) for q in qs]
    final = [rephrased(v, verdicts[q]) for q, v in zip(qs, verifier)]
    return {"n": len(qs), "judged": sum(verdicts[q] is not None for q in qs),
            "unjudged_by_budget": sum(q in cut for q in qs), "failed": sum(q in failed for q in qs),
            "verdicts": dict(sorted(Counter(verdicts[q] for q in qs if verdicts[q] is not None).items())),
            "verifier_flagged": sum(verifier), "flagged": sum(final),
            "rescued": sum(f and not v for f, v in zip(final, verifier)),
            "vetoed": sum(v and not f for f, v in zip(final, verifier))}


def run_judge(jreq: JudgeRequest, ids: Sequence[str], texts: Sequence[str], decisions: Sequence, n_items: int,
              threshold: float, where) -> tuple[list, dict]:
    """Judge the pairs of the items (the first `n_items`) and of the null's: (each one's verdict or None, report.json's
    `semantic.judge` block). Writes OUT/semantic/judge.jsonl (through `where`, OUT/semantic/)."""
    from jobs.kit.redact import redact_text
    from scoring.semantic.calibrate import false_flag_bound

    t0 = time.perf_counter()
    judged, left = plan(decisions, threshold, jreq.budget)
    kinds = {q: kind_of(texts[q], jreq.kind) for q in judged}
    requests = [judge_request(ids[q], kinds[q], texts[q], decisions[q].candidate.text) for q in judged]
    rows, cached, stats = ask(jreq, requests, where) if requests else ([], set(), {})
    verdicts: list = [None] * len(decisions)
    records, failed = [], set()
    for q, row in zip(judged, rows):
        c = decisions[q].candidate
        if row["sample"] < 0:  # the request failed: no answer, the verifier's decision stands
            failed.add(q)
        else:
            verdicts[q] = parse_verdict(row["text"])
        records.append({"id": ids[q], "null": q >= n_items, "doc_id": c.doc_id, "start_word": c.start_word,
                        "n_words": c.n_words, "char_start": c.char_start, "char_end": c.char_end, "kind": kinds[q],
                        "prompt_digest": prompt_digest(kinds[q]), "request": row["request"], "answer": row["text"],
                        "verdict": verdicts[q], "cached": row["request"] in cached, "error": row["error"]})
    where.write_text(ANSWERS, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    cut = set(left)
    items, null = range(n_items), range(n_items, len(decisions))
    null_side = side(null, decisions, verdicts, threshold, cut, failed) if len(null) else None
    if null_side is not None:  # the judged decision's false flags on the null, with calibrate's one-sided bound
        k, n = null_side["flagged"], null_side["n"]
        null_side |= {"false_flag_rate": k / n, "false_flag_upper_bound": false_flag_bound(k, n)}
    return verdicts, {
        "model": jreq.model, "api_base": redact_text(jreq.api_base), "api_key_env": jreq.api_key_env,
        "endpoint": "chat/completions", "kind": jreq.kind, "prompts": {k: prompt_digest(k) for k in KINDS},
        "max_tokens": MAX_TOKENS, "temperature": TEMPERATURE,
        "rule": "judged: each item's decided pair when the verifier flags it, when its decision score is above 0 and "
                f"at least {LOWER_BAR:g} x the threshold, or when it abstains with a cosine at or above the cosine "
                "floor; flagged: the judge's verdict is yes where it gave one, else the verifier's decision",
        "lower_bar": threshold * LOWER_BAR, "budget": jreq.budget, "pairs": len(judged) + len(left),
        "judged": len(judged) - len(failed), "unjudged_by_budget": len(left), "failed": len(failed),
        "calls": stats.get("requests_sent", 0), "cached": sum(r["cached"] for r in records),
        "prompt_tokens": stats.get("prompt_tokens", 0), "completion_tokens": stats.get("completion_tokens", 0),
        "kinds": dict(sorted(Counter(kinds.values()).items())),
        "verdicts": dict(sorted(Counter(v for v in verdicts if v is not None).items())),
        "benchmark": side(items, decisions, verdicts, threshold, cut, failed), "null": null_side,
        "answers": f"semantic/{ANSWERS}", "seconds": round(time.perf_counter() - t0, 2)}
