"""Ask the server, once and before any scoring, what it can do, fix the method every actor will use, and check
that the method's numbers are right.

prompt      token ids where the server takes them; else text (scoring/api/prompts.py), with the tokens the server
            puts before a text (its BOS) counted from `usage.prompt_tokens`.
echo        a short prompt with echo and max_tokens 0, trusted only when the answer shows no generated token
            (some servers take 0 as "no limit"); else 1. The echoed tokens must be the local tokenizer's.
logit-bias  an unbiased call, then the largest bias on a token outside the top-n. Nothing changes → the server
            ignores logit_bias: stop. The values of the other listed tokens moved → they reflect the bias:
            `inversion`. Otherwise, u's own value shown (listed or as the chosen token) → `direct`; only the
            chosen token changed → the seed's binary `search`.
self-check  scoring/api/selfcheck.py: the mode's values against an independent read. A mode that fails is refused,
            and the message names the other mode if it passes the same check.
"""
from __future__ import annotations

from scoring.api.client import ApiConfig, ApiFatal, ApiRefused, ApiRequestError, CompletionsClient
from scoring.api.echo import PROBE_STOP, echo_logprobs, echo_request
from scoring.api.logit_bias import TokenKeys, generation
from scoring.api.prompts import check_echoed_tokens, decode_exact, prompt_of
from scoring.api.selfcheck import SelfCheckFailed, self_check

PROBE_TEXT = "The history of the city begins with a small settlement on the river, long before the railway came."
PROBE_TOKENS = 16
PROBE_RETRIES = 2  # a server that refuses a probe request refuses it every time: do not wait a minute to learn it


def probe(cfg: ApiConfig, tokenizer, api_key: str | None = None, client: CompletionsClient | None = None
          ) -> tuple[ApiConfig, dict]:
    """(the config with `method`, `max_tokens`, `prompt_format`, `prefix_tokens` set; a report for run.json).
    Raises ApiFatal with the reason."""
    client = client or CompletionsClient(cfg.with_(max_retries=min(cfg.max_retries, PROBE_RETRIES)), api_key)
    keys = TokenKeys(tokenizer)
    ids = [int(i) for i in tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"]][:PROBE_TOKENS]
    fmt, prefix, prompt_report = _probe_prompt(client, cfg, ids, keys)
    cfg = cfg.with_(prompt_format=fmt, prefix_tokens=prefix)
    try:
        probed, report = _probe_mode(client, cfg, ids, keys)
        report["self_check"] = self_check(client, probed, ids, keys)
    except SelfCheckFailed as exc:
        raise SelfCheckFailed(f"{exc}; {_other_mode(client, cfg, ids, keys)}") from None
    return probed, {**report, "prompt": prompt_report, "calls": client.stats["calls"],
                    "retries": client.stats["retries"]}


def _probe_mode(client, cfg: ApiConfig, ids, keys) -> tuple[ApiConfig, dict]:
    if cfg.mode == "echo":
        max_tokens, checked, generated = _probe_echo(client, cfg, ids, keys)
        return cfg.with_(method="echo", max_tokens=max_tokens), {
            "method": "echo", "max_tokens": max_tokens, "max_tokens_0_generated": generated,
            "tokens_checked": checked}
    if cfg.top_logprobs < 2:
        raise ApiFatal("--api-logprobs logit-bias needs --api-top-logprobs of at least 2 (a reference token)")
    method, report = _probe_bias(client, cfg, ids, keys)
    return cfg.with_(method=method, max_tokens=1), {**report, "method": method}


def _other_mode(client, cfg: ApiConfig, ids, keys) -> str:
    """The pointer in a refused mode's message: whether the other mode passes the same check."""
    other = "logit-bias" if cfg.mode == "echo" else "echo"
    flag = f"--api-logprobs {other}"
    try:
        probed, _ = _probe_mode(client, cfg.with_(mode=other), ids, keys)
        self_check(client, probed, ids, keys)
    except (ApiFatal, ApiRequestError) as exc:
        return f"{flag} does not work on this server either ({str(exc).split(': ', 1)[-1][:200]})"
    return f"{flag} passed the same check on this server: use it"


def _probe_prompt(client, cfg: ApiConfig, ids, keys) -> tuple[str, int, dict]:
    """("ids" or "text", tokens the server puts before a text prompt, a report)."""
    body = {"max_tokens": 1, "logprobs": cfg.top_logprobs, "temperature": 0}
    try:
        client.complete({**body, "prompt": ids})
        return "ids", 0, {"format": "ids"}
    except (ApiRequestError, ApiRefused) as exc:
        refused = str(exc)
    text = decode_exact(keys.tokenizer, ids)
    try:
        resp = client.complete({**body, "prompt": text}, n_tokens=len(ids))
    except (ApiRequestError, ApiRefused) as exc:
        raise ApiFatal(f"{client.url} takes neither token ids ({refused}) nor text as a prompt ({exc})") from None
    counted = (resp.get("usage") or {}).get("prompt_tokens")
    prefix = int(counted) - len(ids) if counted is not None else 0
    if prefix < 0 or prefix > 4:
        raise ApiFatal(f"--tokenizer does not match the served model: the server counts {counted} tokens in the probe "
                       f"text where --tokenizer has {len(ids)}")
    return "text", prefix, {"format": "text", "token_ids_refused": refused[:300], "server_prefix_tokens": prefix,
                            "prompt_tokens_reported": counted is not None}


def _probe_echo(client, cfg: ApiConfig, ids, keys) -> tuple[int, int, int | None]:
    """(max_tokens to send, prompt tokens checked, tokens the server generated for max_tokens 0 or None)."""
    refused, generated = None, None
    prompt = prompt_of(cfg, keys.tokenizer, ids)
    for max_tokens in (0, 1):
        body = echo_request(prompt, cfg.top_logprobs, max_tokens)
        if max_tokens == 0:
            body["stop"] = PROBE_STOP
        try:
            resp = client.complete(body, n_tokens=len(ids))
        except (ApiRequestError, ApiRefused) as exc:
            refused = exc
            continue
        logprobs = echo_logprobs(resp)
        values, tokens = logprobs.get("token_logprobs") or [], logprobs.get("tokens") or []
        k = cfg.prefix_tokens
        if len(values) < k + len(ids) or any(v is None for v in values[k + 1:k + len(ids)]):
            raise ApiFatal(f"{client.url} does not return prompt log-probabilities with echo (got {len(values)} "
                           f"for a {len(ids)}-token prompt); use --api-logprobs logit-bias, or a server that echoes "
                           "them (vLLM: see docs/served-models.md)")
        try:
            check_echoed_tokens(tokens, ids, keys, k, "the probe prompt")
        except ApiRequestError as exc:
            raise ApiFatal(f"--tokenizer does not match the served model: {str(exc).split(': ', 1)[1]}") from None
        if max_tokens == 0:
            generated = _generated(resp, len(tokens) - k - len(ids))
            if generated:
                continue  # "0" meant "no limit" here: ask for 1 and drop it
        return max_tokens, len(ids), generated
    raise ApiFatal(f"{client.url} refused echo requests with max_tokens 0 and 1 ({refused})")


def _generated(resp: dict, extra_tokens: int) -> int:
    """Tokens an answer generated: usage.completion_tokens where given, else the echoed tokens past the prompt."""
    counted = (resp.get("usage") or {}).get("completion_tokens")
    return max(int(counted or 0), extra_tokens)


def _probe_bias(client, cfg, ids, keys) -> tuple[str, dict]:
    prompt = prompt_of(cfg, keys.tokenizer, ids[:8])
    body = {"prompt": prompt, "max_tokens": 1, "logprobs": cfg.top_logprobs, "temperature": 0}
    try:
        top, chosen, _ = generation(client.complete(body, n_tokens=8))
    except (ApiRequestError, ApiRefused) as exc:
        raise ApiFatal(f"{client.url} refused a top-n request ({exc})") from None
    if len(top) < 2:
        raise ApiFatal(f"{client.url} listed {len(top)} top log-probabilities; logit-bias extraction needs >= 2")
    u = _outside(keys, top)
    try:
        biased, chosen_b, chosen_lp = generation(client.complete({**body, "logit_bias": {str(u): cfg.max_bias}},
                                                                 n_tokens=8))
    except (ApiRequestError, ApiRefused) as exc:
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
