"""Sampled generation for the loopback server (scoring/api/loopback.py): what a text-only audit asks of a model,
answered the ways real servers answer it.

- `n` continuations of one prompt, drawn as one batch with a KV cache (`past_key_values`): without the cache a
  sampled 48-token continuation re-reads its whole prefix at every token, minutes where seconds do;
- `temperature` (0 = greedy), `top_p` (nucleus), `seed` (a torch Generator per request: the same seed gives the
  same samples), `stop` strings (the text is cut before the first one, `finish_reason` "stop"), the end-of-text
  token (also "stop"), `max_tokens` ("length");
- log-probabilities of the *generated* tokens, as completions (`logprobs: k`) and chat (`logprobs: true,
  top_logprobs: k`) return them: the raw model's log-softmax, before temperature and top-p (vLLM's default);
- a chat template: the tokenizer's own where it has one, else the messages' contents joined by blank lines (what a
  base model served behind a chat endpoint sees).

Server quirks are switches on the server: `honour_n=False` answers one choice whatever `n` asks (as llama.cpp
does), `honour_seed=False` draws fresh randomness each time, `script(body, prompt_text)` returns a canned answer
for tests (DE-COP letters, names, refusals, junk) instead of the model's.
"""
from __future__ import annotations

import inspect
import os
import threading
from dataclasses import dataclass

CHAT_JOIN = "\n\n"


@dataclass
class Choice:
    text: str
    finish_reason: str
    token_ids: list
    logprobs: list  # per generated token: (log p of the token, {token text: log p} of the top-k) or None


def chat_text(tokenizer, messages) -> str:
    """The prompt a chat request becomes: the tokenizer's chat template (with the assistant's turn opened) where it
    has one, else the contents joined by blank lines."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return CHAT_JOIN.join(str(m.get("content") or "") for m in messages)


def _generator(seed, honour_seed: bool):
    import torch

    g = torch.Generator()
    g.manual_seed(int(seed) if seed is not None and honour_seed else int.from_bytes(os.urandom(7), "little"))
    return g


def _pick(logits, temperature: float, top_p: float, gen):
    """The next token of each row: argmax at temperature 0, else a draw from the tempered, top-p-cut softmax."""
    import torch

    if temperature <= 0:
        return torch.argmax(logits, dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < top_p  # the smallest head whose mass reaches top_p
        sorted_p = sorted_p * keep
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return torch.multinomial(probs / probs.sum(-1, keepdim=True), 1, generator=gen).squeeze(-1)


def sample(model, tokenizer, prompt_ids: list, *, n: int, max_tokens: int, temperature: float, top_p: float,
           seed, stop, top_logprobs: int | None, honour_seed: bool = True, lock: threading.Lock | None = None,
           text_of=None) -> list[Choice]:
    """`n` continuations of `prompt_ids`, each at most `max_tokens` tokens."""
    import torch

    text_of = text_of or (lambda t: tokenizer.decode([t]))
    stops = [s for s in ([stop] if isinstance(stop, str) else list(stop or [])) if s]
    eos = getattr(tokenizer, "eos_token_id", None)
    gen = _generator(seed, honour_seed)
    lock = lock or threading.Lock()
    ids = torch.tensor([prompt_ids] * n)
    out_ids: list[list[int]] = [[] for _ in range(n)]
    lps: list[list] = [[] for _ in range(n)]
    done = [None] * n  # finish reason once a row has stopped
    past = None
    # transformers 5.x names the KV cache `cache` (`past_key_values` is deprecated there); 4.x has only the old name
    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    with torch.inference_mode():
        for _ in range(max_tokens):
            with lock:
                res = model(input_ids=ids, use_cache=True, **{cache_arg: past})
            past = getattr(res, cache_arg)
            logits = res.logits[:, -1, :].float()
            nxt = _pick(logits, temperature, top_p, gen)
            logp = torch.log_softmax(logits, dim=-1) if top_logprobs is not None else None
            for r in range(n):
                if done[r]:
                    continue
                t = int(nxt[r])
                if eos is not None and t == eos:
                    done[r] = "stop"
                    continue
                out_ids[r].append(t)
                if logp is not None:
                    top = torch.topk(logp[r], min(max(1, top_logprobs), logp.shape[-1]))
                    lps[r].append((float(logp[r, t]), {text_of(int(i)): float(v) for v, i in zip(*top)}))
                if stops and any(s in tokenizer.decode(out_ids[r]) for s in stops):
                    done[r] = "stop"
            if all(done):
                break
            ids = nxt.view(n, 1)
    choices = []
    for r in range(n):
        text = tokenizer.decode(out_ids[r])
        reason = done[r] or "length"
        for s in stops:
            at = text.find(s)
            if at >= 0:
                text, reason = text[:at], "stop"
        choices.append(Choice(text, reason, out_ids[r], lps[r] if top_logprobs is not None else []))
    return choices


def completion_logprobs(choice: Choice, text_of) -> dict:
    """A completions answer's `logprobs` for the generated tokens (OpenAI's legacy shape)."""
    return {"tokens": [text_of(t) for t in choice.token_ids[:len(choice.logprobs)]],
            "token_logprobs": [lp for lp, _ in choice.logprobs],
            "top_logprobs": [top for _, top in choice.logprobs]}


def chat_logprobs(choice: Choice, text_of) -> dict:
    """A chat answer's `logprobs` (OpenAI's chat shape: content[i] = token, logprob, top_logprobs)."""
    return {"content": [{"token": text_of(t), "logprob": lp,
                         "top_logprobs": [{"token": k, "logprob": v} for k, v in top.items()]}
                        for t, (lp, top) in zip(choice.token_ids, choice.logprobs)]}


def response(choices: list[Choice], *, chat: bool, top: int | None, text_of, n_prompt: int, model: str,
             number: int) -> dict:
    """The JSON body a completions or chat endpoint answers with."""
    import time

    out = []
    for i, c in enumerate(choices):
        item = {"index": i, "finish_reason": c.finish_reason, "logprobs": None}
        if chat:
            item["message"] = {"role": "assistant", "content": c.text}
            if top is not None:
                item["logprobs"] = chat_logprobs(c, text_of)
        else:
            item["text"] = c.text
            if top is not None:
                item["logprobs"] = completion_logprobs(c, text_of)
        out.append(item)
    generated = sum(len(c.token_ids) for c in choices)
    return {"id": f"{'chatcmpl' if chat else 'cmpl'}-{number}", "object": "chat.completion" if chat else
            "text_completion", "created": int(time.time()), "model": model, "choices": out,
            "usage": {"prompt_tokens": n_prompt, "completion_tokens": generated, "total_tokens": n_prompt + generated}}
