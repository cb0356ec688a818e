"""Echo mode: one request per window returns the log-probability of every prompt token (the first is null) and
each position's top-n. From them: `lp` exactly, `lp_max` exactly (the top-1), and `mu`/`sigma`/`entropy` as a
top-n approximation (labelled by the rows' `lp_source`; Min-K%++ refuses it unless asked for `topk=`).
A server whose echo is not the prompt's own log-probabilities (llama-cpp-python 0.3's echo is one position late)
is caught by the probe's self-check (scoring/api/selfcheck.py) before anything is scored."""
from __future__ import annotations

import numpy as np

from scoring.api.client import ApiRequestError

# The probe's max_tokens-0 request also names stop strings: a server that takes max_tokens 0 as "no limit" then
# stops after a token or two instead of filling its context (the answer shows it, and echo then asks for 1).
PROBE_STOP = [" ", "\n", "."]


def echo_request(prompt, top: int, max_tokens: int) -> dict:
    """`prompt`: token ids or text (scoring/api/prompts.prompt_of)."""
    return {"prompt": prompt, "echo": True, "logprobs": int(top), "max_tokens": int(max_tokens), "temperature": 0}


def echo_logprobs(resp: dict) -> dict:
    try:
        logprobs = resp["choices"][0]["logprobs"]
        if not isinstance(logprobs, dict):
            raise TypeError
        return logprobs
    except (KeyError, IndexError, TypeError):
        raise ApiRequestError(200, "the response has no choices[0].logprobs (does the server support echo?)") from None


def topk_moments(values, top: int, lp: float) -> tuple[float, float, float]:
    """(lp_max, mu, sigma) from a position's listed log-probabilities: the top-1, and the mean and std of log p
    under p restricted to the `top` largest listed values and renormalised. A listed set may hold one extra entry
    (servers add the actual token); only the `top` largest count. `lp` bounds lp_max from below."""
    v = np.sort(np.asarray(list(values), dtype=np.float64))[::-1][:top]
    if not v.size:
        return lp, float("nan"), float("nan")
    w = np.exp(v - v[0])
    w /= w.sum()
    mu = float(w @ v)
    return max(float(v[0]), lp), mu, float(np.sqrt(w @ (v - mu) ** 2))


def parse_echo(resp: dict, n_prompt: int, keep_from: int, top: int, offset: int = 0) -> dict:
    """Stats for prompt positions keep_from..n_prompt-1 of an echo response (position i predicted from < i).
    `offset`: tokens the server put before the prompt (a text prompt's BOS); entry offset + i is prompt token i."""
    logprobs = echo_logprobs(resp)
    lps, tops = logprobs.get("token_logprobs") or [], logprobs.get("top_logprobs") or []
    if len(lps) < offset + n_prompt:
        raise ApiRequestError(200, f"the server echoed {len(lps)} log-probabilities for a prompt of {n_prompt} "
                                   "tokens (does it echo the prompt?)")
    out = {k: np.empty(n_prompt - keep_from, np.float32) for k in ("lp", "lp_max", "mu", "sigma", "entropy")}
    for j, i in enumerate(range(offset + keep_from, offset + n_prompt)):
        if lps[i] is None:
            raise ApiRequestError(200, f"no log-probability for prompt token {i - offset}")
        lp = float(lps[i])
        listed = (tops[i] or {}).values() if i < len(tops) else ()
        lp_max, mu, sigma = topk_moments(listed, top, lp)
        out["lp"][j], out["lp_max"][j], out["mu"][j], out["sigma"][j], out["entropy"][j] = lp, lp_max, mu, sigma, -mu
    return out
