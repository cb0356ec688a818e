"""What a text-only run will ask, before it asks: requests and tokens per prompt kind, summed over parts, so the
job can print its plan, check it against --max-requests / --max-tokens and admit only the parts that fit.

Counts are upper bounds where the server decides: generated tokens at `max_tokens` for every choice; DE-COP's
questions for every row whose paraphrases are asked (a row whose paraphrases do not parse is not asked them).
Prompt tokens are counted with --tokenizer where given, else estimated (UTF-8 bytes / 3, scoring/generation/
kinds.estimate_tokens), plus CHAT_OVERHEAD per chat message for the template's own tokens.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable, Sequence

from scoring.generation.kinds import Settings, first_phase, orderings, parse_kind, estimate_tokens
from scoring.generation.prompts import render

CHAT_OVERHEAD = 8
FIELDS = ("rows", "requests", "prompt_tokens", "completion_tokens")


def _prompt_tokens(req, s: Settings, count: Callable[[str], int]) -> int:
    if not s.chat:
        return count(req.prompt)
    return sum(count(m["content"]) + CHAT_OVERHEAD for m in req.messages())


def plan_rows(rows: Iterable[tuple[str, str]], kinds: Sequence[str], s: Settings,
              count_tokens: Callable[[str], int] | None = None, local_paraphrases: bool = False) -> dict:
    """{rows, requests, prompt_tokens, completion_tokens, by_kind: {kind: {requests, prompt_tokens,
    completion_tokens, rows_not_asked}}} for these (id, text) rows."""
    count = count_tokens or estimate_tokens
    total, by_kind = Counter(), {}

    def add(kind: str, requests: int, prompt: int, completion: int) -> None:
        k = by_kind.setdefault(kind, Counter())
        k.update(requests=requests, prompt_tokens=prompt, completion_tokens=completion)
        total.update(requests=requests, prompt_tokens=prompt, completion_tokens=completion)

    for rid, text in rows:
        total["rows"] += 1
        requests, skipped = first_phase(rid, text, kinds, s, count_tokens, local_paraphrases)
        for r in requests:
            add(r.kind, 1, _prompt_tokens(r, s, count), r.max_tokens * r.n)
        for row in skipped:
            by_kind.setdefault(row["kind"], Counter())["rows_not_asked"] += 1
        asks_decop = local_paraphrases or any(r.kind == "paraphrase" for r in requests)
        for kind in (k for k in kinds if parse_kind(k)[0] == "decop" and asks_decop):
            k = int(parse_kind(kind)[1].get("orderings", 24))
            options = "".join(f"X. {text}\n" for _ in range(4))  # paraphrases are about the passage's length
            prompt = render(s.template("decop"), options=options, source=s.prompts["decop"]["source"])
            size = count(prompt) + (CHAT_OVERHEAD if s.chat else 0)
            add(kind, len(orderings(k, s.seed, rid)), size * k, 4 * k)
    return {**{f: int(total[f]) for f in FIELDS},
            "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())}}


def combine(plans: Iterable[dict]) -> dict:
    total, by_kind = Counter(), {}
    for p in plans:
        total.update({f: p.get(f, 0) for f in FIELDS})
        for kind, v in p.get("by_kind", {}).items():
            by_kind.setdefault(kind, Counter()).update(v)
    return {**{f: int(total[f]) for f in FIELDS}, "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())}}


def tokens(plan: dict) -> int:
    return int(plan.get("prompt_tokens", 0)) + int(plan.get("completion_tokens", 0))


def describe(plan: dict) -> str:
    """The plan in one line: '600 rows: 1,320 requests, <= 98,400 tokens (prompt ~ 30,000, generated <= 68,400);
    continuation@prefix=0.5 600 requests, ...'."""
    kinds = "; ".join(f"{k} {v.get('requests', 0):,} requests" + (f" ({v['rows_not_asked']:,} rows not asked)"
                                                                  if v.get("rows_not_asked") else "")
                      for k, v in plan.get("by_kind", {}).items())
    return (f"{plan['rows']:,} rows: {plan['requests']:,} requests, <= {tokens(plan):,} tokens (prompt ~ "
            f"{plan['prompt_tokens']:,}, generated <= {plan['completion_tokens']:,})" + (f"; {kinds}" if kinds else ""))


def admit(plans: Sequence[tuple[int, dict]], max_requests: int | None, max_tokens: int | None
          ) -> tuple[list[int], dict, dict]:
    """(the part indices that fit the budget, in order, stopping at the first that does not; what they plan;
    what all of them plan)."""
    whole = combine(p for _, p in plans)
    admitted, used = [], Counter()
    for index, p in plans:
        if max_requests is not None and used["requests"] + p["requests"] > max_requests:
            break
        if max_tokens is not None and used["tokens"] + tokens(p) > max_tokens:
            break
        used.update(requests=p["requests"], tokens=tokens(p))
        admitted.append(index)
    return admitted, combine(p for i, p in plans if i in set(admitted)), whole
