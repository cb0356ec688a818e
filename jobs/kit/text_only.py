"""A served model that answers only in text (`--api-logprobs none`): the options of a text-only run (samples,
sampling, budget, prompts), the probe the driver runs once before anything else, and what the job records of it.
The requests and detectors are scoring/generation; the pool stage is jobs/parts/text_only/generation.py."""
from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Optional

import typer

from jobs.kit.options import option


@dataclass(kw_only=True)
class GenerationFields:
    """How a text-only run samples and what it may spend (evaluate's options; used with --api-logprobs none)."""

    samples: int = option(10, "text-only: sampled continuations per passage for ngram_coverage, creativity_index and "
                          "samia (Hallinan et al. used 20, SaMIA 10; AUC grows with samples)", min=1)
    max_new_tokens: Optional[int] = option(
        None, "text-only: tokens per sampled continuation (default: the true continuation's length, in --tokenizer's "
        "tokens where given, else 1.5 per word)", min=1)
    temperature: float = option(1.0, "text-only: sampling temperature of the continuations", min=0.0)
    top_p: float = option(0.95, "text-only: nucleus sampling of the continuations (not sent where the server "
                          "refuses it)", min=0.01, max=1.0)
    max_requests: Optional[int] = option(
        None, "text-only: the most requests this run may send. The plan is printed first; parts that would pass the "
        "limit are not started, and the job stops (exit 2) naming the plan and the limit. Answers already paid for "
        "(saved parts, the journal) cost nothing on a rerun", min=0)
    max_tokens: Optional[int] = option(
        None, "text-only: the most prompt + generated tokens this run may spend (an upper bound: every answer counted "
        "at its max tokens; prompts counted with --tokenizer, else estimated at 3 bytes a token)", min=0)
    prompts: Optional[str] = option(None, "text-only: a YAML file replacing any of the methods' prompts "
                                    "(docs/text-only.md lists the keys and the defaults)")
    decop_paraphrases: str = option(
        "served", "text-only: DE-COP's three paraphrases per passage: `served` (the audited model, with DE-COP's "
        "paraphrase prompt), or a local rewriter as `tidemark paraphrase` has them: `wordnet`, `mlm:PATH`")
    trace_index: Optional[str] = option(
        None, "text-only: trace every generated sample back to this corpus index (`tidemark index-corpus`) into "
        "OUT/trace/ (`tidemark trace`'s outputs): the corpus documents the model's continuations reproduce")
    dry_run: bool = option(False, "text-only: probe the server, print the plan (requests and tokens per method) "
                           "and stop without sending anything else")


@dataclass(frozen=True)
class TextOnlyRun:
    """What the lower layers of a text-only run read (the probe, the planner, the pool, the budget), resolved once
    from the command's config by `of`: evaluate's and cutoff's configs both carry these fields, and nothing below
    the command reads the config itself."""

    model: str
    api_base: Optional[str]
    api_chat: bool
    tokenizer: Optional[str]
    api_concurrency: int
    api_rps: float
    api_max_retries: int
    api_timeout: float
    actors: int
    gpus_per_actor: float
    stall_timeout: float
    samples: int
    max_new_tokens: Optional[int]
    temperature: float
    top_p: float
    seed: int
    prompts: Optional[str]
    decop_paraphrases: str
    shard_size: int
    max_requests: Optional[int]
    max_tokens: Optional[int]
    dry_run: bool
    resume: bool
    progress: bool

    @classmethod
    def of(cls, cfg) -> "TextOnlyRun":
        return cls(**{f.name: getattr(cfg, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class TextOnlyModel:
    api: object  # scoring.api.client.ApiConfig, mode "none"
    chat: bool
    tokenizer: str | None
    probe: dict

    @property
    def endpoint(self) -> str:
        return "chat/completions" if self.chat else "completions"

    def identity(self) -> dict:
        """What the answers depend on: the served name, the endpoint, what the server honours (it changes the
        requests), the tokenizer where it sets token counts; not the address, never the key."""
        from jobs.kit.identity import model_identity

        p = self.probe
        return {"served_model": self.api.model, "endpoint": self.endpoint, "n": p.get("n"),
                "seed": p.get("seed_accepted"), "top_p": p.get("top_p"),
                "logprobs": p.get("generated_logprobs"), "tokenizer": model_identity(self.tokenizer)}

    def api_dict(self) -> dict:
        from scoring.api.client import Secret

        key = os.environ.get("OPENAI_API_KEY")
        return {**self.api.to_dict(), "key": Secret(key) if key else None}

    def settings(self, run: TextOnlyRun, prompts: dict):
        from scoring.generation.kinds import Settings

        p = self.probe
        return Settings(chat=self.chat, samples=run.samples, max_new_tokens=run.max_new_tokens,
                        temperature=run.temperature, top_p=run.top_p, seed=run.seed, n_ok=bool(p.get("n")),
                        seed_ok=bool(p.get("seed_accepted")), top_p_ok=bool(p.get("top_p")),
                        logprobs_ok=bool(p.get("generated_logprobs")), prompts=prompts)


def text_only_model(cfg: TextOnlyRun) -> TextOnlyModel:
    """Check the options and probe the server (about eight requests). BadParameter for options that do not fit;
    ApiFatal (one line, exit 2) for a server that cannot be used."""
    from scoring.api.client import ApiConfig, CompletionsClient
    from scoring.api.probe import PROBE_RETRIES
    from scoring.generation.probe import probe_generation

    if not cfg.api_base:
        raise typer.BadParameter("--api-logprobs none is for a served model: give --api-base")
    if cfg.gpus_per_actor:
        raise typer.BadParameter("--gpus-per-actor has no meaning with --api-base (the server holds the model)")
    try:
        api = ApiConfig(base=cfg.api_base, model=cfg.model, mode="none", concurrency=cfg.api_concurrency,
                        rps=cfg.api_rps / max(1, cfg.actors) if cfg.api_rps else 0.0,
                        max_retries=cfg.api_max_retries, timeout_s=cfg.api_timeout, method="generate")
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    endpoint = "chat/completions" if cfg.api_chat else "completions"
    client = CompletionsClient(api.with_(max_retries=min(api.max_retries, PROBE_RETRIES)),
                               os.environ.get("OPENAI_API_KEY"), endpoint=endpoint)
    return TextOnlyModel(api, bool(cfg.api_chat), cfg.tokenizer, probe_generation(client, bool(cfg.api_chat)))


def check_methods(methods, model: TextOnlyModel) -> None:
    """Refuse, by name, what this server cannot feed: DE-COP's probability score without generated-token
    log-probabilities."""
    for m in methods:
        if m.name == "decop" and m.params.get("score") == "prob" and not model.probe.get("generated_logprobs"):
            raise typer.BadParameter(f"{m.column} reads the log-probabilities of the answer letter, which this server "
                                     "does not return for generated tokens (the probe asked); use decop (score=share)")

