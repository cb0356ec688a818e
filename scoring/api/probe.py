"""Ask the server, once and before any scoring, what it can do, and fix the method every actor will use.

echo:       a short prompt of token ids with echo and max_tokens 0 (then 1, where 0 is refused). The echoed tokens
            must be the local tokenizer's (else the tokenizer does not match the served model: stop).
logit-bias: an unbiased call, then the largest bias on a token outside the top-n. Nothing changes → the server
            ignores logit_bias: stop. The values of the other listed tokens moved → they reflect the bias:
            `inversion`. Otherwise, u's own value shown (listed or as the chosen token) → `direct`; only the
            chosen token changed → the seed's binary `search`.
"""
from __future__ import annotations

from scoring.api.client import ApiConfig, ApiFatal, ApiRequestError, CompletionsClient
from scoring.api.echo import echo_request
from scoring.api.logit_bias import TokenKeys, generation

PROBE_TEXT = "The history of the city begins with a small settlement on the river, long before the railway came."


def probe(cfg: ApiConfig, tokenizer, api_key: str | None = None, client: CompletionsClient | None = None
          ) -> tuple[ApiConfig, dict]:
    """(the config with `method`/`max_tokens` set, a report for run.json). Raises ApiFatal with the reason."""
    client = client or CompletionsClient(cfg, api_key)
    keys = TokenKeys(tokenizer)
    ids = [int(i) for i in tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"]][:16]
    if cfg.mode == "echo":
        max_tokens, checked = _probe_echo(client, cfg, ids, keys)
        return cfg.with_(method="echo", max_tokens=max_tokens), {
            "method": "echo", "max_tokens": max_tokens, "tokens_checked": checked, "calls": client.stats["calls"],
            "retries": client.stats["retries"]}
    if cfg.top_logprobs < 2:
        raise ApiFatal("--api-logprobs logit-bias needs --api-top-logprobs of at least 2 (a reference token)")
    method, report = _probe_bias(client, cfg, ids, keys)
    return cfg.with_(method=method, max_tokens=1), {**report, "method": method, "calls": client.stats["calls"],
                                                    "retries": client.stats["retries"]}


def _probe_echo(client, cfg, ids, keys) -> tuple[int, int]:
    refused = None
    for max_tokens in (0, 1):
        try:
            resp = client.complete(echo_request(ids, cfg.top_logprobs, max_tokens))
        except ApiRequestError as exc:
            refused = exc
            continue
        logprobs = ((resp.get("choices") or [{}])[0] or {}).get("logprobs") or {}
        values, tokens = logprobs.get("token_logprobs") or [], logprobs.get("tokens") or []
        if len(values) < len(ids) or any(v is None for v in values[1:len(ids)]):
            raise ApiFatal(f"{client.url} does not return prompt log-probabilities with echo (got {len(values)} "
                           f"for a {len(ids)}-token prompt); use --api-logprobs logit-bias, or a server that echoes "
                           "them (vLLM: see README, 'Scoring a served model')")
        mine = [keys.key(i) for i in ids]
        for i, (theirs, ours) in enumerate(zip(tokens, mine)):
            if theirs not in (ours, f"token_id:{ids[i]}") and "\ufffd" not in ours:
                raise ApiFatal(f"--tokenizer does not match the served model: prompt token {i} (id {ids[i]}) is "
                               f"{ours!r} here and {theirs!r} on the server")
        return max_tokens, min(len(tokens), len(ids))
    raise ApiFatal(f"{client.url} refused echo requests with max_tokens 0 and 1 ({refused})")


def _probe_bias(client, cfg, ids, keys) -> tuple[str, dict]:
    prompt = ids[:8]
    body = {"prompt": prompt, "max_tokens": 1, "logprobs": cfg.top_logprobs, "temperature": 0}
    try:
        top, chosen, _ = generation(client.complete(body))
    except ApiRequestError as exc:
        raise ApiFatal(f"{client.url} refused a top-n request ({exc})") from None
    if len(top) < 2:
        raise ApiFatal(f"{client.url} listed {len(top)} top log-probabilities; logit-bias extraction needs >= 2")
    u = _outside(keys, top)
    try:
        biased, chosen_b, chosen_lp = generation(client.complete({**body, "logit_bias": {str(u): cfg.max_bias}}))
    except ApiRequestError as exc:
        raise ApiFatal(f"{client.url} refused logit_bias ({exc}); use --api-logprobs echo") from None
    shown = keys.lookup(biased, u)
    if shown is None and keys.is_token(chosen_b, u):
        shown = chosen_lp
    moved = keys.is_token(chosen_b, u) or keys.lookup(biased, u) is not None
    if not moved:
        raise ApiFatal(f"{client.url} ignores logit_bias: a bias of {cfg.max_bias:g} on token {u} "
                       f"({keys.key(u)!r}) changed neither the chosen token nor the top-{cfg.top_logprobs} list, so "
                       "log-probabilities outside the top-n cannot be extracted; use --api-logprobs echo or a "
                       "server that honours logit_bias")
    common = [k for k in top if k in biased and k != keys.key(u)]
    shift = max((abs(biased[k] - top[k]) for k in common), default=0.0)
    report = {"bias_token": u, "bias_reflected_in_logprobs": shift > 1e-3, "max_shift_of_other_tokens": shift,
              "biased_token_shown": shown is not None}
    if shift > 1e-3:
        if not common:
            raise ApiFatal("the biased response lists no unbiased reference token; raise --api-top-logprobs")
        return "inversion", report
    return ("direct" if shown is not None else "search"), report


def _outside(keys: TokenKeys, top: dict) -> int:
    """A token outside the top-n whose text is its own (so the server's answer names it unambiguously)."""
    n = len(keys.tokenizer)
    special = set(getattr(keys.tokenizer, "all_special_ids", []) or [])
    for i in list(range(n // 2, n)) + list(range(0, n // 2)):
        k = keys.key(i)
        if i in special or not k.strip() or "\ufffd" in k or k in top or keys.ambiguous(i):
            continue
        return i
    raise ApiFatal("no token with an unambiguous text was found to probe logit_bias with")
