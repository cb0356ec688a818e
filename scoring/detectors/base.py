"""The detector registry. A detector is a pure function

    fn(stats: TokenStats, views: Mapping[str, TokenStats | np.ndarray], **params) -> np.ndarray  (one float per text)

registered with its name, default parameters and the views it needs (a function of its parameters, since e.g.
PAC's copies depend on N). Convention for every detector: a larger score means "more likely a member". Nothing
here ever flips a sign after looking at labels.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import numpy as np

from scoring.lm.tokenstats import TokenStats


@dataclass(frozen=True)
class Detector:
    name: str
    fn: Callable[..., np.ndarray]
    defaults: Mapping[str, object]
    needs: Callable[[Mapping[str, object]], tuple[str, ...]]  # views/resources besides "original"
    description: str = ""
    # Parameters named in the score column only when set away from their default (added later, so that existing
    # columns keep their names): e.g. min_k_pp's `topk`.
    optional: Mapping[str, object] = field(default_factory=dict)
    # Needs mu/sigma over the whole vocabulary, which a served model's API cannot give (scoring/api): refused
    # there unless its `topk` parameter accepts the top-n approximation (`distribution_gate`).
    full_distribution: bool = False
    # What the detector reads: "token_stats" (log-probabilities: weights, or a server that returns them) or
    # "generations" (text a model generated: scoring/generation; `needs` then names prompt kinds, not views).
    input: str = "token_stats"
    # Needs the weights themselves (a gradient: GradNorm): refused over an API, whatever it returns.
    weights_only: bool = False
    # Run only when named, never by `all`: Con-ReCall consumes labelled rows, GradNorm costs a backward per text.
    opt_in: bool = False


REGISTRY: dict[str, Detector] = {}
INPUTS = ("token_stats", "generations")


def register(name: str, *, needs=(), description: str = "", optional: Mapping[str, object] | None = None,
             full_distribution: bool = False, input: str = "token_stats", weights_only: bool = False,
             opt_in: bool = False, **defaults):
    """Decorator: `@register("min_k", k=0.2)`. `needs` is a tuple of view names or a function of the params."""
    needs_fn = needs if callable(needs) else (lambda params, _n=tuple(needs): _n)
    if input not in INPUTS:
        raise ValueError(f"detector {name!r}: input must be one of {INPUTS}")

    def wrap(fn):
        if name in REGISTRY:
            raise ValueError(f"detector {name!r} registered twice")
        REGISTRY[name] = Detector(name, fn, {**defaults, **(optional or {})}, needs_fn,
                                  description or (fn.__doc__ or "").strip(), dict(optional or {}), full_distribution,
                                  input, weights_only, opt_in)
        return fn

    return wrap


@dataclass(frozen=True)
class Method:
    """A detector with concrete parameters: one column of the score table."""

    name: str
    params: Mapping[str, object] = field(default_factory=dict)

    @property
    def detector(self) -> Detector:
        return REGISTRY[self.name]

    @property
    def column(self) -> str:
        optional = self.detector.optional if self.name in REGISTRY else {}
        shown = {k: v for k, v in self.params.items() if not (k in optional and v == optional[k])}
        if not shown:
            return self.name
        return self.name + "@" + ",".join(f"{k}={_fmt(v)}" for k, v in sorted(shown.items()))

    @property
    def needs(self) -> tuple[str, ...]:
        return tuple(self.detector.needs(self.params))

    def __call__(self, stats: TokenStats, views: Mapping[str, object]) -> np.ndarray:
        return np.asarray(self.detector.fn(stats, views, **self.params), dtype=np.float64)


@dataclass(frozen=True)
class OnView:
    """A detector run on another view's token stats, as its own score column: e.g. Min-K% under the unlearned
    model, which the scoring pool scores as the `ref` view (jobs/commands/unlearning_audit.py)."""

    method: Method
    view: str
    column: str

    @property
    def needs(self) -> tuple[str, ...]:
        return (self.view, *[n for n in self.method.needs if n != self.view])

    def __call__(self, stats: TokenStats, views: Mapping[str, object]) -> np.ndarray:
        return self.method(views[self.view], views)


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _coerce(raw: str, default):
    if isinstance(default, bool):
        return raw.lower() in ("1", "true", "yes")
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    return raw


def parse_method(spec: str) -> Method:
    """`min_k` → defaults; `min_k@k=0.1`; several params: `pac@k1=0.05@k2=0.3`."""
    name, *assignments = spec.strip().split("@")
    if name not in REGISTRY:
        raise ValueError(f"unknown detector {name!r}; known: {', '.join(sorted(REGISTRY))}")
    params = dict(REGISTRY[name].defaults)
    for a in assignments:
        key, _, raw = a.partition("=")
        if key not in params:
            raise ValueError(f"{name}: unknown parameter {key!r}; parameters: {', '.join(params) or 'none'}")
        params[key] = _coerce(raw, params[key])
    return Method(name, params)


def parse_methods(specs: str | list[str] | None, input: str = "token_stats") -> list[Method]:
    """Comma-separated specs; `all` (or None) = every registered detector of that `input` with its defaults.
    Named detectors that read another input are refused by name (InputError), with the ones that run."""
    if specs is None or specs == "all" or specs == ["all"]:
        return [Method(n, dict(d.defaults)) for n, d in sorted(REGISTRY.items()) if d.input == input and not d.opt_in]
    items = specs.split(",") if isinstance(specs, str) else [s for x in specs for s in x.split(",")]
    methods = [parse_method(s) for s in items if s.strip()]
    wrong = [m.name for m in methods if m.detector.input != input]
    if wrong:
        runs = ", ".join(sorted(n for n, d in REGISTRY.items() if d.input == input))
        why = (f"{', '.join(wrong)} read{'s' if len(wrong) == 1 else ''} the text a model generates "
               "(--api-logprobs none)" if input == "token_stats" else
               f"{', '.join(wrong)} need{'s' if len(wrong) == 1 else ''} log-probabilities, which a text-only server "
               "(--api-logprobs none) does not give")
        raise InputError(f"{why}; the detectors that run here: {runs}")
    return methods


class InputError(ValueError):
    """A detector asked of a job that cannot feed it (log-probability detectors over a text-only server, or the
    other way round)."""


# ---- small shared helpers for detectors -----------------------------------------------------------------------
def mean_or_nan(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def k_count(n: int, k: float) -> int:
    """How many positions "k%" selects: at least one, as in the reference code's guard for short texts."""
    return max(1, int(n * k))


def bottom_k_mean(x: np.ndarray, k: float) -> float:
    if not len(x):
        return float("nan")
    return float(np.mean(np.sort(x)[: k_count(len(x), k)]))


def top_k_mean(x: np.ndarray, k: float) -> float:
    if not len(x):
        return float("nan")
    return float(np.mean(np.sort(x)[::-1][: k_count(len(x), k)]))


def prefix_aligned(lp_prefixed: np.ndarray, lp: np.ndarray, first: int) -> np.ndarray:
    """A prefixed view's log-probabilities over the same tokens as the unprefixed `lp`: the prefixed view also
    predicts the text's first token (from the prefix), which the unprefixed one cannot, so it is dropped."""
    return lp_prefixed[first:] if len(lp_prefixed) == len(lp) + first else lp_prefixed


class DistributionError(ValueError):
    """A detector that needs the whole next-token distribution, asked of stats that do not have it."""


def api_top_n(source: str | None) -> int | None:
    """n of an `api:<method>:top<n>` lp_source; None for the weights ("local", or null in older tables)."""
    if not source or not source.startswith("api:"):
        return None
    return int(source.rsplit(":top", 1)[1])


def distribution_gate(methods, sources_by_view: Mapping[str, Iterable[str | None]]) -> None:
    """Refuse, naming them, detectors whose parameters do not fit where their token stats came from: over an API,
    a full-distribution detector needs `topk=n` (the server's top-n, as scored); from the weights it must not
    ask for the approximation. `sources_by_view`: the lp_source values of each view's rows."""
    bad = []
    for m in methods:
        view = getattr(m, "view", "original")  # an OnView reads another view's stats
        m = getattr(m, "method", m)
        if not m.detector.full_distribution:
            continue
        tops = {api_top_n(s) for s in sources_by_view.get(view, ())}
        api = sorted(t for t in tops if t is not None)
        topk = int(m.params.get("topk") or 0)
        if api and not topk:
            bad.append(f"{m.column} needs the full next-token distribution, which a served model's API does not "
                       f"give; drop it, or accept the top-{api[0]} approximation with {m.name}@topk={api[0]}")
        elif topk and not api:
            bad.append(f"{m.column}: topk={topk} is the API approximation, and these token stats come from the "
                       f"weights; use {m.name} (exact)")
        elif topk and any(t != topk for t in api):
            bad.append(f"{m.column}: the token stats hold top-{api} log-probabilities; use topk={api[0]}")
    if bad:
        raise DistributionError("; ".join(bad))
