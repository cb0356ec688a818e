"""A served model as a job's target (`--api-base`): the options `evaluate` and `audit` share, the probe the driver
runs once before scoring, the branch the scoring pool gets, and what the job records (an identity for resume,
the extraction report for run.json). The scoring itself is scoring/api."""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import typer

from jobs.kit.options import option
from jobs.plane.retry_policy import STALL_TIMEOUT_S
from scoring.api.client import ApiConfig

# The served-model defaults are the client's (scoring/api/client.ApiConfig): one place for 8 / 6 / 120 s.
_API = {f.name: f.default for f in dataclasses.fields(ApiConfig)}


@dataclass(kw_only=True)
class PoolSettings:
    """How a job's scoring pool runs (the job configs' shared fields, each a command-line option) and the
    ScoringSpec built from them."""

    actors: int = option(0, "scorer actors (model replicas); 0: one on a GPU or for a served model, and on CPUs one "
                         "single-threaded actor per CPU while their copies of the weights fit in a quarter of the "
                         "cluster's memory", min=0)
    gpus_per_actor: float = option(0.0, "GPUs per scorer actor (0 = CPU)", min=0.0)
    batch_size: Optional[int] = option(None, "sequences per forward pass (default: 64 on GPU; on CPU up to 16 within "
                                       "2,048 tokens)")
    context: Optional[int] = option(None, "window length in tokens (default: model max, ≤2048)")
    stride: Optional[int] = option(None, "window stride for long texts (default: context/2)")
    stall_timeout: float = option(STALL_TIMEOUT_S, "seconds without a part finishing after which the job stops with "
                                  "an error (e.g. the cluster lost the nodes its scorers need); the parts already "
                                  "written stay, and the same command resumes from them", min=1.0)

    def pool_spec(self, branches, prefix_text: str | None = None, neighbour_model: str | None = None):
        from jobs.plane.scoring_pool import ScoringSpec
        from jobs.plane.tasks import hooks_from_env

        return ScoringSpec(tuple(branches), prefix_text=prefix_text, context=self.context, stride=self.stride,
                           max_batch_size=self.batch_size, actors=self.actors, gpus_per_actor=self.gpus_per_actor,
                           hooks=hooks_from_env(), neighbour_model=neighbour_model,
                           stall_timeout_s=self.stall_timeout)


@dataclass(kw_only=True)
class ServedFields(PoolSettings):
    """The served-model settings of a job config (evaluate, audit, dataset-inference), beside its pool settings."""

    api_base: Optional[str] = option(
        None, "score a served model through its OpenAI-compatible API, e.g. http://HOST:8000/v1 (vLLM, SGLang, ...): "
        "--model is then the served name and --tokenizer a local tokenizer that matches it; a key in OPENAI_API_KEY "
        "is sent as a bearer token and never written")
    tokenizer: Optional[str] = option(None, "with --api-base: the served model's tokenizer, a local directory (token "
                                      "ids, windows, and the detectors that need ids)")
    api_logprobs: str = option(
        _API["mode"], "echo: one request per window, the prompt's log-probabilities echoed back (max_tokens 0 where "
        "the server really generates nothing, else 1); logit-bias: for servers without a correct echo, per position "
        "a top-n request, plus logit_bias on the true token when it is not listed (exact where the server allows, "
        "else the seed's binary search; calls per token and the error bound go to run.json). Prompts go as token "
        "ids, or as text where the server takes only strings (checked against --tokenizer). Before scoring, a "
        "self-check compares the mode's log-probs with a second, independent read and refuses a mode that disagrees "
        "(e.g. llama-cpp-python's echo, one position late); see docs/served-models.md. none: the server gives no "
        "prompt log-probabilities (a hosted chat API): only the detectors that read generated text run "
        "(ngram_coverage, creativity_index, samia, decop, name_cloze; `tidemark evaluate` only; docs/text-only.md)")
    api_chat: bool = option(False, "with --api-logprobs none: ask through /v1/chat/completions, each method's prompt as "
                            "the user's message (default: /v1/completions, a base model continuing the text)")
    api_top_logprobs: int = option(_API["top_logprobs"], "top-n log-probabilities asked per position: lp_max, and "
                                   "the approximation min_k_pp@topk=N accepts", min=1)
    api_concurrency: int = option(_API["concurrency"], "requests in flight per scorer actor, at most: fewer while "
                                  "the server queues (a timeout, 429 or 503 halves it; answers slower than 4x the "
                                  "fastest, by over 2 s, take one off; it grows back as answers come quickly)", min=1)
    api_rps: float = option(_API["rps"], "requests per second for the whole job, split evenly among the scorer "
                            "actors (0 = no limit); 429/5xx answers are retried with backoff", min=0.0)
    api_max_retries: int = option(_API["max_retries"], "retries of a request that got 429, 5xx or no answer "
                                  "(backoff 0.5 s doubling, +-50% jitter, at most 20 s; Retry-After honoured); then "
                                  "the job stops and a rerun resumes", min=0)
    api_timeout: float = option(_API["timeout_s"], "seconds one request may take, from sending it to its last byte; "
                                "a completion without streaming sends nothing until it is done, so this includes "
                                "the time it waits in the server's queue. A timeout halves the concurrency and is "
                                "retried", min=0.001)

    def served(self) -> "ServedModel | None":
        """Probe the served model (None without --api-base). First, a local model path that does not exist is
        refused (FileNotFoundError: one line, exit 2)."""
        from scoring.lm.model import missing_local_model

        for flag, model in (("--model", None if self.api_base else self.model),
                            ("--ref-model", getattr(self, "ref_model", None))):
            why = missing_local_model(model) if model else None
            if why:
                raise FileNotFoundError(f"{flag} {why}")
        if self.api_chat and self.api_logprobs != "none":
            raise typer.BadParameter("--api-chat needs --api-logprobs none: a chat endpoint returns no prompt "
                                     "log-probabilities")
        return served_model(model=self.model, api_base=self.api_base, tokenizer=self.tokenizer,
                            mode=self.api_logprobs, top_logprobs=self.api_top_logprobs,
                            concurrency=self.api_concurrency, rps=self.api_rps, max_retries=self.api_max_retries,
                            timeout_s=self.api_timeout, actors=self.actors,
                            context=self.context, gpus_per_actor=self.gpus_per_actor)

    @property
    def tokenizer_path(self) -> str:
        """The tokenizer every local step uses: the served model's, or the local model's own."""
        return self.tokenizer or self.model


@dataclass(frozen=True)
class ServedModel:
    api: "object"  # the probed scoring.api.client.ApiConfig
    tokenizer: str
    context: int
    probe: dict

    def branch(self, views: Sequence[str], rename_original: str | None = None):
        from jobs.plane.scoring_pool import ModelBranch
        from scoring.api.client import Secret

        key = os.environ.get("OPENAI_API_KEY")
        api = {**self.api.to_dict(), "context": self.context, "key": Secret(key) if key else None}
        return ModelBranch(self.api.model, tuple(views), rename_original, tokenizer=self.tokenizer, api=api)

    def identity(self) -> dict:
        """What the scores depend on: the served name, the tokenizer's files, the method, n and the windows; not
        the address (a replica elsewhere serves the same model) and never the key."""
        from jobs.kit.identity import model_identity

        a = self.api
        facts = {"served_model": a.model, "tokenizer": model_identity(self.tokenizer), "method": a.method,
                 "top_logprobs": a.top_logprobs, "context": self.context,
                 "search_tol": a.search_tol if a.method == "search" else None}
        if a.prompt_format != "ids":  # only then, so that outputs scored over token ids keep their identity
            facts.update(prompt_format=a.prompt_format, prefix_tokens=a.prefix_tokens)
        return facts


def served_model(*, model: str, api_base: str | None, tokenizer: str | None, mode: str, top_logprobs: int,
                 concurrency: int, rps: float, actors: int, context: int | None, gpus_per_actor: float = 0.0,
                 max_retries: int = _API["max_retries"], timeout_s: float = _API["timeout_s"]) -> ServedModel | None:
    """Probe the server (a few requests) and fix the method; None without --api-base. Raises typer.BadParameter
    for options that do not fit together and ApiFatal (a RuntimeError: one line, exit 2) for a server that
    cannot be used."""
    from scoring.api.client import ApiConfig
    from scoring.api.probe import probe
    from scoring.lm.model import load_tokenizer

    if not api_base:
        if tokenizer:
            raise typer.BadParameter("--tokenizer is for a served model; give --api-base too")
        return None
    if mode == "none":
        raise typer.BadParameter("--api-logprobs none (a server that answers only in text) runs the generation "
                                 "detectors of `tidemark evaluate`; this command needs log-probabilities")
    if not tokenizer:
        raise typer.BadParameter("--api-base needs --tokenizer: a local tokenizer that matches the served model")
    if gpus_per_actor:
        raise typer.BadParameter("--gpus-per-actor has no meaning with --api-base (the server holds the model)")
    try:
        cfg = ApiConfig(base=api_base, model=model, mode=mode, top_logprobs=top_logprobs, concurrency=concurrency,
                        rps=rps / max(1, actors) if rps else 0.0, max_retries=max_retries, timeout_s=timeout_s)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    tok = load_tokenizer(tokenizer)
    probed, report = probe(cfg, tok, os.environ.get("OPENAI_API_KEY"))
    # An echoed window plus the token it asks for must fit the server's context: where it refuses max_tokens 0,
    # the default window is one token shorter than the model's (pass the same --context to a local run to compare
    # the two exactly). Logit-bias prompts stop before the predicted token, so a full window fits.
    window = int(context or served_context(tokenizer, tok) - (probed.max_tokens if probed.method == "echo" else 0))
    return ServedModel(probed, tokenizer, window, report)


def served_context(tokenizer_path: str, tok) -> int:
    """The window the local scorer would use (the model's positions, at most 2,048): from the config.json beside
    the tokenizer when there is one, else the tokenizer's model_max_length. Pass --context to choose."""
    cfg = Path(tokenizer_path, "config.json")
    if cfg.is_file():
        c = json.loads(cfg.read_text())
        n = c.get("max_position_embeddings") or c.get("n_positions")
        if n:
            return min(int(n), 2048)
    n = getattr(tok, "model_max_length", None)
    return min(int(n), 2048) if n and n < 1_000_000 else 2048


def drop_full_distribution(methods, spec: str, served: ServedModel | None):
    """Over an API, full-distribution detectors without `topk=` cannot be computed, nor those that need the weights
    (GradNorm): with `--methods all` they are left out (and said so), named explicitly they are refused with the
    way out."""
    from scoring.detectors.base import DistributionError, distribution_gate

    if served is None:
        return methods
    keep, dropped = [], []
    for m in methods:
        if m.detector.weights_only:  # a gradient: no API returns one
            if spec not in ("all", None):
                raise typer.BadParameter(f"{m.column} needs the model's weights (it back-propagates the loss); a "
                                         "served model's API has none: drop it, or run with a local --model")
            typer.echo(f"[served model] left out of --methods all: {m.column} (needs the model's weights)", err=True)
            continue
        try:
            distribution_gate([m], {"original": {served.api.source}})
            keep.append(m)
        except DistributionError as exc:
            if spec not in ("all", None):
                raise typer.BadParameter(str(exc)) from None
            dropped.append(m.column)
    if dropped:
        typer.echo(f"[served model] left out of --methods all: {', '.join(dropped)} (needs the full next-token "
                   f"distribution; min_k_pp@topk={served.api.top_logprobs} accepts the top-n approximation)",
                   err=True)
    return keep


def run_record(served: ServedModel | None, part_api: dict | None) -> dict | None:
    """run.json's `served_model`: where, how (the probe's method and why), what it cost, and how exact it is."""
    if served is None:
        return None
    a, s = served.api, dict(part_api or {})
    calls, positions = s.get("calls", 0), s.get("positions", 0)
    exact = a.method in ("echo", "inversion", "direct")
    return {
        "api_base": a.base, "model": a.model, "tokenizer": served.tokenizer, "mode": a.mode, "method": a.method,
        "top_logprobs": a.top_logprobs, "context": served.context, "concurrency_per_actor": a.concurrency,
        "rps_per_actor": a.rps, "timeout_s": a.timeout_s, "prompt_format": a.prompt_format,
        "probe": served.probe, "self_check": (served.probe or {}).get("self_check"), "lp_source": a.source,
        "requests": s,
        "calls_per_token": round(calls / positions, 4) if positions else None,
        "tokens_per_call": round(s.get("prompt_tokens", 0) / calls, 2) if calls else None,
        "extraction_error_bound_nats": 0.0 if exact else s.get("max_bound"),
        "extraction": ("exact: the server's own log-probabilities (up to its float rounding)" if exact else
                       f"binary search on logit_bias: |error| <= {a.search_tol / 2:g} nats per token")
        + (f"; {s['beyond_bias']} token(s) stayed hidden at the largest bias ({a.max_bias:g}) and hold an upper "
           "bound instead" if s.get("beyond_bias") else ""),
        "mu_sigma_entropy": f"top-{a.top_logprobs} approximation (min_k_pp only with topk={a.top_logprobs})",
    }
