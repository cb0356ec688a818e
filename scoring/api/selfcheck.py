"""The probe's self-check: before anything is scored, the log-probabilities the chosen mode returns for a probe
window are read a second, independent way and compared. A mode that disagrees is refused in one line naming the
mode, the position and both values; run.json records which checks ran and the largest difference.

  echo        at every probe position i (the first predicted token included): the echoed log-probability of
              token i, and the echoed top-1, against a `max_tokens: 1` request on the i-token prefix (its top-n:
              token i's value where it is listed, and the top-1). A server whose echo pairs each token with the
              next position's distribution (llama-cpp-python 0.3) disagrees by nats and is caught here.
  logit-bias  at the first predicted token and a few more: the bias extraction of the probed method run on a
              token that the unbiased top-n lists, so its true value is shown beside the extracted one.

Tolerance: 0.02 nats. Both reads come from the same server and the same weights, so they differ only by its float
arithmetic (a prefix is computed in another batch shape than the whole window). Measured: 0 on the loopback server
(float32) and 0.0 for `direct` on llama-cpp-python 0.3.36 serving SmolLM2-135M Q4_1, where its shifted echo was
off by 14.5 at the worst probe position (docs/served-models.md). The search adds its own bracket (search_tol / 2).
"""
from __future__ import annotations

from scoring.api.client import ApiConfig, ApiFatal, ApiRequestError, CompletionsClient
from scoring.api.echo import echo_logprobs, echo_request
from scoring.api.logit_bias import BiasExtractor, TokenKeys, generation, next_token_response
from scoring.api.prompts import prompt_of

TOLERANCE_NATS = 0.02
BIAS_POSITIONS = 3  # positions the logit-bias check extracts (each costs 2 calls, or ~17 for the search)


class SelfCheckFailed(ApiFatal):
    """The chosen mode's numbers disagree with the independent read: the mode is refused (the message says where)."""


def reference_tops(client: CompletionsClient, cfg: ApiConfig, ids, keys: TokenKeys, positions) -> dict[int, dict]:
    """Position i -> the top-n of a max_tokens=1 request on ids[:i] (unbiased). A text prefix that the server
    tokenizes differently cannot be compared and is left out."""
    tops = {}
    for i in positions:
        try:
            resp = next_token_response(client, cfg, keys.tokenizer, ids[:i])
        except ApiRequestError:
            continue
        top, _, _ = generation(resp)
        if top:
            tops[i] = top
    return tops


def _tolerance(cfg: ApiConfig) -> float:
    return TOLERANCE_NATS + (cfg.search_tol / 2 if cfg.method == "search" else 0.0)


def _record(cfg: ApiConfig, comparisons: list[dict], reference: str) -> dict:
    worst = max(comparisons, key=lambda c: c["difference"])
    return {"mode": cfg.method, "reference": reference, "positions": sorted({c["position"] for c in comparisons}),
            "comparisons": len(comparisons), "max_abs_difference": worst["difference"], "worst": worst,
            "tolerance_nats": _tolerance(cfg), "passed": worst["difference"] <= _tolerance(cfg)}


def _refuse(mode: str, worst: dict, keys: TokenKeys, ids, tolerance: float, how: str, hint: str = "") -> str:
    i = worst["position"]
    return (f"--api-logprobs {mode} is refused by the self-check: at probe position {i} ({keys.key(ids[i])!r}) "
            f"{how} {worst['value']:.4f} where {worst['reference_read']} gives {worst['reference']:.4f} "
            f"(|difference| {worst['difference']:.3g} > tolerance {tolerance:g}){hint}")


def check_echo(client: CompletionsClient, cfg: ApiConfig, ids, keys: TokenKeys) -> dict:
    resp = client.complete(echo_request(prompt_of(cfg, keys.tokenizer, ids), cfg.top_logprobs, cfg.max_tokens),
                           n_tokens=len(ids))
    logprobs = echo_logprobs(resp)
    lps, echo_tops = logprobs.get("token_logprobs") or [], logprobs.get("top_logprobs") or []
    k = cfg.prefix_tokens
    positions = list(range(1, len(ids)))
    refs = reference_tops(client, cfg, ids, keys, positions)
    comparisons = []
    for i, top in refs.items():
        lp = lps[k + i] if k + i < len(lps) else None
        listed = keys.lookup(top, int(ids[i]))
        if lp is not None and listed is not None:
            comparisons.append(_compare(i, "token", float(lp), listed, "the echoed log-probability of the token is"))
        echoed = echo_tops[k + i] if k + i < len(echo_tops) else None
        if echoed:
            comparisons.append(_compare(i, "top-1", max(echoed.values()), max(top.values()),
                                        "the echoed top-1 log-probability is"))
    if not comparisons:
        raise SelfCheckFailed("--api-logprobs echo cannot be checked: the server's echo lists no top log-"
                              f"probabilities and no probe token is in its top-{cfg.top_logprobs}; raise "
                              "--api-top-logprobs, or use --api-logprobs logit-bias")
    record = _record(cfg, comparisons, f"max_tokens=1 requests on each prefix (top-{cfg.top_logprobs})")
    if not record["passed"]:
        worst = record["worst"]
        hint = " (the echoed values are the next position's: the server's echo is shifted by one)" if _shifted(
            echo_tops, refs, k) else ""
        raise SelfCheckFailed(_refuse("echo", worst, keys, ids, record["tolerance_nats"], worst.pop("how"), hint))
    record["worst"].pop("how", None)
    return record


def _compare(i: int, kind: str, value: float, reference: float, how: str) -> dict:
    return {"position": i, "kind": kind, "value": float(value), "reference": float(reference),
            "difference": abs(float(value) - float(reference)), "how": how,
            "reference_read": f"a max_tokens=1 request on the {i}-token prefix"}


def _shifted(echo_tops, refs: dict, k: int) -> bool:
    """Whether the echoed top-1 at position i matches the reference top-1 at i + 1 for most positions."""
    pairs = [(max(echo_tops[k + i].values()), max(refs[i + 1].values())) for i in refs
             if i + 1 in refs and k + i < len(echo_tops) and echo_tops[k + i]]
    return bool(pairs) and sum(abs(a - b) <= TOLERANCE_NATS for a, b in pairs) > len(pairs) / 2


def _listed_token(top: dict, keys: TokenKeys, true_id: int) -> int | None:
    """A token the unbiased top-n lists that is not its top-1 (inversion needs the top-1 as its reference): the true
    token where it qualifies, else the highest-ranked other listed token whose text names one token."""
    best = max(top, key=top.get)
    if keys.lookup(top, true_id) is not None and keys.key(true_id) != best and not keys.ambiguous(true_id):
        return true_id
    for text in sorted(top, key=top.get, reverse=True):
        if text == best:
            continue
        if text.startswith("token_id:"):
            return int(text.split(":", 1)[1])
        found = keys.tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(found) == 1 and keys.key(found[0]) == text and not keys.ambiguous(found[0]):
            return int(found[0])
    return None


def check_bias(client: CompletionsClient, cfg: ApiConfig, ids, keys: TokenKeys) -> dict:
    extractor = BiasExtractor(client, cfg, keys)
    comparisons = []
    for i in range(1, len(ids)):
        if len({c["position"] for c in comparisons}) >= BIAS_POSITIONS:
            break
        top = reference_tops(client, cfg, ids, keys, [i]).get(i)
        w = _listed_token(top, keys, int(ids[i])) if top and len(top) >= 2 else None
        if w is None:
            continue
        got = extractor.extract(ids[:i], w, top)
        c = _compare(i, f"token {keys.key(w)!r}", got.lp, keys.lookup(top, w),
                     f"the {cfg.method} extraction of {keys.key(w)!r} gives")
        c["reference_read"] = f"the unbiased top-{cfg.top_logprobs} of the {i}-token prefix"
        comparisons.append(c)
    if not comparisons:
        raise SelfCheckFailed(f"--api-logprobs logit-bias cannot be checked: no probe position lists a second "
                              f"token in its top-{cfg.top_logprobs} with an unambiguous text")
    record = _record(cfg, comparisons, "the unbiased top-n value of a listed token, extracted again through "
                                       "logit_bias")
    worst = record["worst"]
    if not record["passed"]:
        raise SelfCheckFailed(_refuse("logit-bias", worst, keys, ids, record["tolerance_nats"], worst.pop("how")))
    worst.pop("how", None)
    return record


def self_check(client: CompletionsClient, cfg: ApiConfig, ids, keys: TokenKeys) -> dict:
    """The check's record for run.json; raises SelfCheckFailed (one line) where the mode's numbers are wrong."""
    return check_echo(client, cfg, ids, keys) if cfg.method == "echo" else check_bias(client, cfg, ids, keys)
