"""The detector registry. A detector is a pure function

    fn(stats: TokenStats, views: Mapping[str, TokenStats | np.ndarray], **params) -> np.ndarray  (one float per text)

registered with its name, default parameters and the views it needs (a function of its parameters, since e.g.
PAC's copies depend on N). Convention for every detector: a larger score means "more likely a member". Nothing
here ever flips a sign after looking at labels.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from scoring.tokenstats import TokenStats


@dataclass(frozen=True)
class Detector:
    name: str
    fn: Callable[..., np.ndarray]
    defaults: Mapping[str, object]
    needs: Callable[[Mapping[str, object]], tuple[str, ...]]  # views/resources besides "original"
    description: str = ""


REGISTRY: dict[str, Detector] = {}


def register(name: str, *, needs=(), description: str = "", **defaults):
    """Decorator: `@register("min_k", k=0.2)`. `needs` is a tuple of view names or a function of the params."""
    needs_fn = needs if callable(needs) else (lambda params, _n=tuple(needs): _n)

    def wrap(fn):
        if name in REGISTRY:
            raise ValueError(f"detector {name!r} registered twice")
        REGISTRY[name] = Detector(name, fn, dict(defaults), needs_fn, description or (fn.__doc__ or "").strip())
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
        if not self.params:
            return self.name
        return self.name + "@" + ",".join(f"{k}={_fmt(v)}" for k, v in sorted(self.params.items()))

    @property
    def needs(self) -> tuple[str, ...]:
        return tuple(self.detector.needs(self.params))

    def __call__(self, stats: TokenStats, views: Mapping[str, object]) -> np.ndarray:
        return np.asarray(self.detector.fn(stats, views, **self.params), dtype=np.float64)


@dataclass(frozen=True)
class OnView:
    """A detector run on another view's token stats, as its own score column: e.g. Min-K% under the unlearned
    model, which the scoring pool scores as the `ref` view (jobs/unlearning_audit.py)."""

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


def parse_methods(specs: str | list[str] | None) -> list[Method]:
    """Comma-separated specs; `all` (or None) = every registered detector with its defaults."""
    if specs is None or specs == "all" or specs == ["all"]:
        return [Method(n, dict(d.defaults)) for n, d in sorted(REGISTRY.items())]
    items = specs.split(",") if isinstance(specs, str) else [s for x in specs for s in x.split(",")]
    return [parse_method(s) for s in items if s.strip()]


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
