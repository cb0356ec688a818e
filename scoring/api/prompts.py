"""How a window reaches the server, and the check that the server read the same tokens.

Token ids are the first choice: the server scores exactly the ids Tidemark planned. Some servers take only strings
(llama-cpp-python's server answers a token-id prompt with HTTP 500, "prompt: Input should be a valid string"); for
them the window goes as the text its ids decode to, and the server tokenizes it again. That can differ (a window
that starts inside a word, a server that adds its BOS), so every text answer is checked against the local
tokenizer before its numbers are used:
  - where the answer echoes the prompt's tokens, they must be ours, after the `prefix_tokens` the server puts
    first (seen once, at probe time);
  - otherwise the server's `usage.prompt_tokens` must count prefix_tokens + ours.
A mismatch fails the row (quarantined with the first differing position), never a silent misalignment.
"""
from __future__ import annotations

from scoring.api.client import ApiConfig, ApiRequestError


def decode_exact(tokenizer, ids) -> str:
    """The text of `ids` with nothing added or tidied (special tokens and spacing as they are)."""
    return tokenizer.decode([int(i) for i in ids], skip_special_tokens=False, clean_up_tokenization_spaces=False)


def prompt_of(cfg: ApiConfig, tokenizer, ids):
    """The request's `prompt`: the ids themselves, or their text (cfg.prompt_format). A text that the tokenizer
    would not turn back into the same ids (a prefix that ends inside a word the ids split otherwise) cannot carry
    them: ApiRequestError naming the first differing token, before anything is sent."""
    ids = [int(i) for i in ids]
    if cfg.prompt_format != "text":
        return ids
    text = decode_exact(tokenizer, ids)
    again = [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]
    if again != ids:
        j = next((j for j, (a, b) in enumerate(zip(again, ids)) if a != b), min(len(again), len(ids)))
        raise ApiRequestError(200, f"a text prompt cannot carry these {len(ids)} tokens: their text re-tokenizes "
                                   f"differently from token {j} on ({tokenizer.decode(ids[j:j + 3])!r}); this server "
                                   "takes only text, so the row cannot be scored exactly")
    return text


def same_token(theirs, token_id: int, keys) -> bool:
    """The server's text for a token (or vLLM's `token_id:N`) is the local tokenizer's token `token_id`. A token
    that is part of a UTF-8 character decodes to U+FFFD here; servers print it as bytes, nothing or U+FFFD."""
    ours = keys.key(token_id)
    if theirs in (ours, f"token_id:{int(token_id)}"):
        return True
    return "\ufffd" in ours and isinstance(theirs, str) and (not theirs or "\ufffd" in theirs or
                                                              theirs.startswith(("bytes:", "\\x")))


def check_echoed_tokens(tokens, ids, keys, offset: int, what: str = "the window") -> None:
    """The echoed prompt tokens from `offset` on must be `ids`: else ApiRequestError naming the first difference."""
    tokens = list(tokens or [])
    for i, t in enumerate(ids):
        at = offset + i
        theirs = tokens[at] if at < len(tokens) else None
        if theirs is None or not same_token(theirs, int(t), keys):
            raise ApiRequestError(200, f"the server tokenized {what} differently from --tokenizer: token {i} is "
                                       f"{keys.key(int(t))!r} (id {int(t)}) here and {theirs!r} there")


def check_prompt_count(resp: dict, n_tokens: int, cfg: ApiConfig, what: str = "the prefix") -> None:
    """Text prompts without echo: the server must have read prefix_tokens + n_tokens tokens (usage.prompt_tokens);
    a server that reports no usage cannot be checked and is trusted (the probe says so in run.json)."""
    if cfg.prompt_format != "text":
        return
    got = (resp.get("usage") or {}).get("prompt_tokens")
    want = cfg.prefix_tokens + int(n_tokens)
    if got is not None and int(got) != want:
        raise ApiRequestError(200, f"the server tokenized {what} of {n_tokens} tokens into {int(got) - cfg.prefix_tokens}"
                                   f" tokens (usage.prompt_tokens {got}, {cfg.prefix_tokens} of them its own prefix):"
                                   " its text does not re-tokenize to the same ids")
