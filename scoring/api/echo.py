"""Echo mode: one request per window returns the log-probability of every prompt token (the first is null) and
each position's top-n. From them: `lp` exactly, `lp_max` exactly (the top-1), and `mu`/`sigma`/`entropy` as a
top-n approximation (labelled by the rows' `lp_source`; Min-K%++ refuses it unless asked for `topk=`)."""
from __future__ import annotations

import numpy as np

from scoring.api.client import ApiRequestError


def echo_request(ids, top: int, max_tokens: int) -> dict:
    return {"prompt": [int(i) for i in ids], "echo": True, "logprobs": int(top), "max_tokens": int(max_tokens),
            "temperature": 0}


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


def parse_echo(resp: dict, n_prompt: int, keep_from: int, top: int) -> dict:
    """Stats for prompt positions keep_from..n_prompt-1 of an echo response (position i predicted from < i)."""
    try:
        logprobs = resp["choices"][0]["logprobs"]
        lps, tops = logprobs["token_logprobs"], logprobs.get("top_logprobs") or []
    except (KeyError, IndexError, TypeError):
        raise ApiRequestError(200, "the response has no choices[0].logprobs (does the server support echo?)") from None
    if len(lps) < n_prompt:
        raise ApiRequestError(200, f"the server echoed {len(lps)} log-probabilities for a prompt of {n_prompt} "
                                   "tokens (does it echo token-id prompts?)")
    out = {k: np.empty(n_prompt - keep_from, np.float32) for k in ("lp", "lp_max", "mu", "sigma", "entropy")}
    for j, i in enumerate(range(keep_from, n_prompt)):
        if lps[i] is None:
            raise ApiRequestError(200, f"no log-probability for prompt token {i}")
        lp = float(lps[i])
        listed = (tops[i] or {}).values() if i < len(tops) else ()
        lp_max, mu, sigma = topk_moments(listed, top, lp)
        out["lp"][j], out["lp_max"][j], out["mu"][j], out["sigma"][j], out["entropy"][j] = lp, lp_max, mu, sigma, -mu
    return out
