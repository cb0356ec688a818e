"""Before a text-only audit sends anything else, ask the server (about eight short requests) what it honours, and
plan around what it does not:

- it answers a generation request on this endpoint at all (a completions request to a chat-only server, or the
  reverse, stops the job with the flag that fixes it);
- `n`: two choices for n=2, else every sample is its own seeded request;
- `seed`: the same seed twice gives the same text (reproducible samples; recorded either way: a server that
  ignores it draws fresh samples on a rerun, which the journal then never needs);
- `top_p`: accepted, else not sent;
- `stop`: a stop string cuts the answer before it;
- log-probabilities of generated tokens (completions `logprobs: k`; chat `logprobs: true, top_logprobs: k`):
  what DE-COP's probability score reads.
A field the server refuses (HTTP 4xx) counts as not honoured; a server that cannot be used raises ApiFatal.
"""
from __future__ import annotations

from scoring.api.client import ApiFatal, ApiRefused, ApiRequestError, CompletionsClient

PROBE_PROMPT = "The history of the city begins with a small settlement on the river, long before the railway came."
PROBE_SEED = 1234


def _body(chat: bool, **fields) -> dict:
    base = {"messages": [{"role": "user", "content": PROBE_PROMPT}]} if chat else {"prompt": PROBE_PROMPT}
    return {**base, **fields}


def _text(resp: dict, chat: bool, i: int = 0) -> str:
    choice = (resp.get("choices") or [{}])[i]
    return ((choice.get("message") or {}).get("content") if chat else choice.get("text")) or ""


def _has_top_logprobs(resp: dict, chat: bool) -> bool:
    lp = ((resp.get("choices") or [{}])[0]).get("logprobs") or {}
    if chat:
        return any(c.get("top_logprobs") for c in lp.get("content") or [])
    return any(t for t in lp.get("top_logprobs") or [])


def probe_generation(client: CompletionsClient, chat: bool) -> dict:
    """What the server honours; see the module docstring. Raises ApiFatal where it cannot be used."""
    def ask(**fields):
        try:
            return client.complete(_body(chat, **fields)), None
        except (ApiRequestError, ApiRefused) as exc:
            return None, str(exc)

    other = "drop --api-chat (it may serve /completions)" if chat else \
        "add --api-chat if it serves only /chat/completions"
    try:
        first, err = ask(max_tokens=8, temperature=0)
    except ApiFatal as exc:  # 401/403/404: a 404 may be the route (the other endpoint) or the model's name
        raise ApiFatal(f"{exc}; {other}" if "HTTP 404" in str(exc) else str(exc)) from None
    if first is None or not isinstance(((first.get("choices") or [{}])[0]), dict):
        raise ApiFatal(f"{client.url} does not answer a generation request ({err or 'no choices'}); {other}")
    greedy = _text(first, chat)
    report: dict = {"endpoint": client.endpoint, "greedy_probe_text": greedy[:80]}

    two, err = ask(max_tokens=4, temperature=1.0, n=2)
    report["n"] = bool(two) and len(two.get("choices") or []) >= 2
    report["n_note"] = err or f"{len((two or {}).get('choices') or [])} choice(s) for n=2"

    a, err = ask(max_tokens=12, temperature=1.0, seed=PROBE_SEED)
    b, _ = ask(max_tokens=12, temperature=1.0, seed=PROBE_SEED) if a is not None else (None, None)
    report["seed_accepted"] = a is not None
    report["seed_reproducible"] = a is not None and b is not None and _text(a, chat) == _text(b, chat)
    report["seed_note"] = err or ("the same seed gave the same text" if report["seed_reproducible"] else
                                  "the same seed gave different texts: samples are not reproducible")

    got, err = ask(max_tokens=4, temperature=1.0, top_p=0.95)
    report["top_p"] = got is not None
    words = greedy.split()
    if len(words) >= 2 and words[1] in greedy[1:]:
        stop = words[1]
        got, err = ask(max_tokens=8, temperature=0, stop=[stop])
        report["stop"] = got is not None and stop not in _text(got, chat)
    else:
        report["stop"] = None  # the greedy answer was too short to test a stop string on
    fields = {"logprobs": True, "top_logprobs": 5} if chat else {"logprobs": 5}
    got, err = ask(max_tokens=2, temperature=0, **fields)
    report["generated_logprobs"] = got is not None and _has_top_logprobs(got, chat)
    report["calls"] = client.stats["calls"]
    return report
