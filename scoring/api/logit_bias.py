"""Log-probabilities from a server that returns only the top-n per generated position and no echo (seed 001's
black-box setting). Every predicted position costs one unbiased `max_tokens: 1` call on the tokens before it: the
top-n gives `lp_max` exactly, a top-n approximation of `mu`/`sigma`, and `lp` when the true token u is listed.
When it is not, `logit_bias` on u reveals it, by the method the probe (scoring/api/probe.py) found to work:

  inversion  the server's log-probabilities reflect the bias (classic OpenAI). One biased call: u enters the list
             (bias B) beside the unbiased top-1 token v, and since a bias moves only u's logit,
                 log p(u) = lp_B(u) − lp_B(v) − B + log p(v)        (exact up to the server's float rounding)
  direct     the server reports unbiased log-probabilities even for a biased request (vLLM's raw logprobs): one
             biased call makes u the chosen token, and its reported log-probability is log p(u) itself.
  search     the server shows neither (only the unbiased top-n and the chosen token): the seed's binary search for
             the smallest bias b* that makes u the chosen (greedy) token; then z_u + b* = z_top, so
                 log p(u) = log p(top) − b*,   to within half the final bracket (search_tol / 2)
             starting from the bracket [log p(top) − log p(n-th listed), B]: u is below every listed token.
A token still hidden at the largest bias B has log p(u) < log p(ref) − B: the bound is recorded as its value and
the position is counted (`beyond_bias`); its error is then unbounded and the report says so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from scoring.api.client import ApiConfig, CompletionsClient, ApiRequestError
from scoring.api.echo import topk_moments
from scoring.api.prompts import check_prompt_count, prompt_of


class TokenKeys:
    """Servers key top_logprobs by decoded token text (or `token_id:N` with vLLM's return_tokens_as_token_ids).
    `key(i)` is the text of token i; a text several tokens share is ambiguous, and such positions are counted."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._cache: dict[int, str] = {}
        self._counts: dict[str, int] | None = None

    def key(self, token_id: int) -> str:
        k = self._cache.get(token_id)
        if k is None:
            k = self._cache[token_id] = self.tokenizer.decode([int(token_id)])
        return k

    def ambiguous(self, token_id: int) -> bool:
        if self._counts is None:
            counts: dict[str, int] = {}
            for text in self.tokenizer.batch_decode([[i] for i in range(len(self.tokenizer))]):
                counts[text] = counts.get(text, 0) + 1
            self._counts = counts
        return self._counts.get(self.key(token_id), 0) > 1

    def lookup(self, listed: dict, token_id: int):
        """u's value in a top-n dict, or None."""
        if not listed:
            return None
        value = listed.get(f"token_id:{int(token_id)}")
        return value if value is not None else listed.get(self.key(token_id))

    def is_token(self, text: str | None, token_id: int) -> bool:
        return text is not None and text in (self.key(token_id), f"token_id:{int(token_id)}")


@dataclass
class Position:
    lp: float
    lp_max: float
    mu: float
    sigma: float
    calls: int
    bound: float  # the extraction error bound of lp (0: exact up to float rounding; inf: beyond the bias range)
    listed: bool  # u was in the unbiased top-n (one call, exact)
    ambiguous: bool = False


def next_token_response(client: CompletionsClient, cfg: ApiConfig, tokenizer, prefix,
                        bias: dict[int, float] | None = None) -> dict:
    """The answer to a max_tokens=1 request with top-n log-probabilities on the token ids `prefix` (sent as ids or
    text, as probed; a text prefix's token count checked), optionally with `logit_bias`."""
    body = {"prompt": prompt_of(cfg, tokenizer, prefix), "max_tokens": 1, "logprobs": cfg.top_logprobs,
            "temperature": 0}
    if bias:
        body["logit_bias"] = {str(int(k)): float(v) for k, v in bias.items()}
    resp = client.complete(body, n_tokens=len(prefix))
    check_prompt_count(resp, len(prefix), cfg, f"the {len(prefix)}-token prefix")
    return resp


def generation(resp: dict) -> tuple[dict, str | None, float | None]:
    """(top-n dict, chosen token text, its log-probability) of a max_tokens=1 response."""
    try:
        lp = resp["choices"][0]["logprobs"]
        top = (lp.get("top_logprobs") or [{}])[0] or {}
        tokens, values = lp.get("tokens") or [None], lp.get("token_logprobs") or [None]
        return {k: float(v) for k, v in top.items() if v is not None}, tokens[0], values[0]
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ApiRequestError(200, "the response has no choices[0].logprobs") from None


class BiasExtractor:
    def __init__(self, client: CompletionsClient, cfg: ApiConfig, keys: TokenKeys):
        if cfg.method not in ("inversion", "direct", "search"):
            raise ValueError(f"logit-bias extraction needs a probed method; got {cfg.method!r}")
        self.client, self.cfg, self.keys = client, cfg, keys

    def call(self, prompt, bias: dict[int, float] | None = None):
        return generation(next_token_response(self.client, self.cfg, self.keys.tokenizer, prompt, bias))

    def position(self, prompt, u: int) -> Position:
        top, _, _ = self.call(prompt)
        if not top:
            raise ApiRequestError(200, "the server listed no top log-probabilities")
        ambiguous = self.keys.ambiguous(u)
        listed = self.keys.lookup(top, u)
        if listed is not None:
            return self._done(top, listed, 1, 0.0, True, ambiguous)
        return self.extract(prompt, u, top, ambiguous)

    def extract(self, prompt, u: int, top: dict, ambiguous: bool = False) -> Position:
        """u's log-probability through logit_bias, by the probed method, given the unbiased top-n `top` (the
        self-check also runs it on a listed token, to compare with the value the list shows)."""
        ref, lp_ref = max(top.items(), key=lambda kv: kv[1])
        B = self.cfg.max_bias
        if self.cfg.method == "search":
            return self._search(prompt, u, top, lp_ref, ambiguous)
        biased, chosen, chosen_lp = self.call(prompt, {u: B})
        value = self.keys.lookup(biased, u)
        if value is None and self.keys.is_token(chosen, u):
            value = chosen_lp
        if value is None:  # hidden even at the largest bias: below the last listed token by more than B
            return self._done(top, min(top.values()) - B, 2, math.inf, False, ambiguous)
        if self.cfg.method == "direct":
            return self._done(top, float(value), 2, 0.0, False, ambiguous)
        if ref not in biased:
            raise ApiRequestError(200, "the biased response dropped the unbiased top-1 token (top_logprobs < 2?)")
        return self._done(top, float(value) - biased[ref] - B + lp_ref, 2, 0.0, False, ambiguous)

    def _search(self, prompt, u, top, lp_ref, ambiguous) -> Position:
        calls = 1
        # u already listed happens only in the self-check: then only the chosen token says when the bias won
        unlisted = self.keys.lookup(top, u) is None

        def chosen_at(bias: float) -> bool:
            nonlocal calls
            calls += 1
            listed, chosen, _ = self.call(prompt, {u: bias})
            return self.keys.is_token(chosen, u) or (unlisted and self.keys.lookup(listed, u) is not None)

        lo = max(0.0, lp_ref - min(top.values())) if unlisted else 0.0
        hi = self.cfg.max_bias
        if not chosen_at(hi):
            return self._done(top, lp_ref - hi, calls, math.inf, False, ambiguous)
        while hi - lo > self.cfg.search_tol:
            mid = 0.5 * (lo + hi)
            if chosen_at(mid):
                hi = mid
            else:
                lo = mid
        return self._done(top, lp_ref - 0.5 * (lo + hi), calls, 0.5 * (hi - lo), False, ambiguous)

    def _done(self, top, lp, calls, bound, listed, ambiguous) -> Position:
        lp_max, mu, sigma = topk_moments(top.values(), self.cfg.top_logprobs, lp)
        return Position(float(lp), lp_max, mu, sigma, calls, bound, listed, ambiguous)
