"""A stdlib OpenAI-compatible `/v1/completions` server on 127.0.0.1 for a local Hugging Face causal LM: what the
tests, the API benchmark and `contamination-study --via-api` score against. Not a production server (one forward
at a time), but it answers the way real ones do, and can be told to answer the ways they differ:

  bias_logprobs  after:  the listed values, their ranking and the chosen token all follow logit_bias (classic OpenAI)
                 before: values and ranking are the unbiased ones; the chosen token follows the bias and its
                         unbiased log-probability is reported (vLLM's default raw logprobs)
                 hidden: as before, but the chosen token's log-probability is withheld unless it is in the
                         unbiased top-n (only the chosen token reveals the bias: the seed's binary-search setting)
                 ignore: logit_bias has no effect at all
  echo=False     refuses echo; refuse_max_tokens_0 refuses max_tokens 0 (then clients send 1)
  prompts        which prompts it takes: ("ids", "text") by default; ("text",) answers a token-id prompt with
                 HTTP 500, as llama-cpp-python's server does. A text prompt is tokenized here, after `text_prefix`
                 (token ids the server puts first, e.g. a BOS).
  echo_shift     echo pairs each prompt token with the next position's distribution (llama-cpp-python 0.3's bug)
  zero_is_unlimited  max_tokens 0 means "until the context is full" (llama-cpp-python; `stop` strings still apply)
  delay_s        each request holds the one slot this long first (a queueing server)
  drop_idle      close every connection after its answer without saying so (a keep-alive the server timed out)
  replay         answer from responses recorded from a real server (tests/fixtures/llama_cpp/record.py): each
                 request body is looked up as it was recorded; an unrecorded one gets HTTP 500 saying so
  sampled generation (scoring/api/loopback_sampling.py): a request without echo or logit_bias that asks for
                 more than one greedy token (temperature > 0, n > 1, or max_tokens > 1) is sampled with a KV cache;
                 `/v1/chat/completions` answers chat requests through a chat template. `endpoints` names the
                 routes served (("completions", "chat") by default; ("chat",) is a chat-only server),
                 `honour_n`/`honour_seed` False ignore those fields, `script(body, prompt_text)` answers with a
                 canned text where it returns one (whatever the prompt's length), `latency_s` waits before
                 answering without holding the model (a remote API's round trip)
  fail_first     HTTP statuses answered to the first requests (e.g. [429, 500]) before answering normally
  die_after      stop answering (close the socket) after this many requests: a server that goes away mid-job
  api_key        require `Authorization: Bearer <key>`
It stops itself after `lifetime_s`, so a test that forgets it cannot leave it running.
"""
from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BIAS_MODES = ("after", "before", "hidden", "ignore")


class LoopbackServer:
    def __init__(self, model_path: str, *, name: str = "loopback", bias_logprobs: str = "after", echo: bool = True,
                 refuse_max_tokens_0: bool = False, fail_first=(), die_after: int | None = None,
                 api_key: str | None = None, max_logprobs: int = 20, lifetime_s: float = 600.0, port: int = 0,
                 prompts=("ids", "text"), text_prefix=(), echo_shift: bool = False, zero_is_unlimited: bool = False,
                 delay_s: float = 0.0, replay: str | None = None, drop_idle: bool = False,
                 endpoints=("completions", "chat"), honour_n: bool = True, honour_seed: bool = True, script=None,
                 latency_s: float = 0.0):
        if bias_logprobs not in BIAS_MODES:
            raise ValueError(f"bias_logprobs must be one of {BIAS_MODES}")
        self.replay = load_replay(replay) if replay else None
        if self.replay is not None:
            self.model = self.tokenizer = None
            name = self.replay["model"]
        else:
            from scoring.lm.model import load_causal_lm

            self.model, self.tokenizer = load_causal_lm(model_path, device="cpu")
        self.prompts, self.text_prefix = tuple(prompts), [int(t) for t in text_prefix]
        self.echo_shift, self.zero_is_unlimited, self.delay_s = echo_shift, zero_is_unlimited, delay_s
        self.drop_idle = drop_idle
        self.endpoints, self.honour_n, self.honour_seed = tuple(endpoints), honour_n, honour_seed
        self.script, self.latency_s = script, latency_s
        self.name, self.bias_logprobs, self.echo = name, bias_logprobs, echo
        self.refuse_max_tokens_0, self.fail_first = refuse_max_tokens_0, list(fail_first)
        self.die_after, self.api_key, self.max_logprobs = die_after, api_key, max_logprobs
        cfg = getattr(self.model, "config", None)
        self.max_len = int(getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None) or 2048)
        self.lifetime_s = lifetime_s
        self.requests = 0
        self.statuses: dict[int, int] = {}
        self.bodies: list[dict] = []  # the last requests' bodies (tests check what clients send)
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._cache: OrderedDict = OrderedDict()  # prompt -> last position's logits (the bias search repeats them)
        self._texts: dict[int, str] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # ---- lifecycle --------------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "LoopbackServer":
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopback-api", daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._thread is not None and self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "LoopbackServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- the model ----------------------------------------------------------------------------------------------
    def text(self, token_id: int) -> str:
        t = self._texts.get(token_id)
        if t is None:
            t = self._texts[token_id] = self.tokenizer.decode([token_id])
        return t

    def _logits(self, ids: list[int], all_positions: bool):
        import torch

        key = tuple(ids)
        if not all_positions and key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        with self._model_lock, torch.inference_mode():
            z = self.model(input_ids=torch.tensor([ids])).logits[0].float()
        if all_positions:
            return z
        last = z[-1]
        self._cache[key] = last
        if len(self._cache) > 512:
            self._cache.popitem(last=False)
        return last

    def _top(self, logp, n: int) -> dict:
        import torch

        values, index = torch.topk(logp, min(n, logp.shape[-1]))
        return {self.text(int(i)): float(v) for v, i in zip(values, index)}

    def _prompt_ids(self, prompt) -> tuple[int, object]:
        """(status, the prompt's token ids or an error body)."""
        if isinstance(prompt, str) and prompt and "text" in self.prompts:
            return 200, self.text_prefix + [int(t) for t in self.tokenizer(prompt, add_special_tokens=False)["input_ids"]]
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            if "ids" in self.prompts:
                return 200, prompt
            return 500, _error("[{'type': 'string_type', 'loc': ('body', 'prompt', 'str'), 'msg': 'Input should be a "
                               "valid string'}] (prompt: Input should be a valid string)")
        return 400, _error("prompt must be a non-empty list of token ids or a string")

    def complete(self, body: dict) -> tuple[int, dict]:
        import torch

        if self.replay is not None:
            return replayed(self.replay, body)
        if self.delay_s:  # one request at a time, like a server with one slot: the others queue
            with self._model_lock:
                time.sleep(self.delay_s)
        status, prompt = self._prompt_ids(body.get("prompt"))
        if status != 200:
            return status, prompt
        vocab = self.model.config.vocab_size
        if any(t < 0 or t >= vocab for t in prompt):
            return 400, _error("token id out of range")
        if is_sampled(body):
            return self._generate(prompt, body, chat=False)
        max_tokens = int(body.get("max_tokens", 16))
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        n_top = body.get("logprobs")
        n_top = None if n_top is None else int(n_top)
        echo = bool(body.get("echo"))
        if n_top is not None and n_top > self.max_logprobs:
            return 400, _error(f"logprobs must be at most {self.max_logprobs}")
        if echo and not self.echo:
            return 400, _error("echo is not supported")
        if max_tokens < (1 if self.refuse_max_tokens_0 else 0):
            return 400, _error("max_tokens must be at least 1")
        if max_tokens == 0 and self.zero_is_unlimited:
            max_tokens = self.max_len - len(prompt)
        if len(prompt) + max_tokens > self.max_len:
            return 400, _error(f"prompt of {len(prompt)} tokens + {max_tokens} exceeds the context ({self.max_len})")
        bias = torch.zeros(vocab)
        if self.bias_logprobs != "ignore":
            for k, v in (body.get("logit_bias") or {}).items():
                bias[int(k)] = float(v)
        tokens, token_lps, tops = [], [], []
        if echo:
            logp = torch.log_softmax(self._logits(prompt, True), dim=-1)
            at = 0 if self.echo_shift else 1  # shifted: token i paired with the distribution after it
            for i, t in enumerate(prompt):
                tokens.append(self.text(t))
                token_lps.append(None if i == 0 else float(logp[i - at, t]))
                tops.append(None if i == 0 or n_top is None else self._top(logp[i - at], n_top))
        ids = list(prompt)
        for _ in range(max_tokens):
            z = self._logits(ids, False)
            raw = torch.log_softmax(z, dim=-1)
            biased = torch.log_softmax(z + bias, dim=-1)
            chosen = int(torch.argmax(biased))
            shown = biased if self.bias_logprobs == "after" else raw
            listed = self._top(shown, n_top) if n_top is not None else None
            value = float(shown[chosen])
            if self.bias_logprobs == "hidden" and (listed is None or self.text(chosen) not in listed):
                value = None
            tokens.append(self.text(chosen))
            token_lps.append(value)
            tops.append(listed)
            ids.append(chosen)
            if any(x in self.text(chosen) for x in stop):
                break
        generated = ids[len(prompt):]
        logprobs = None if n_top is None else {"tokens": tokens, "token_logprobs": token_lps, "top_logprobs": tops}
        return 200, {"id": f"cmpl-{self.requests}", "object": "text_completion", "created": int(time.time()),
                     "model": self.name,
                     "choices": [{"index": 0, "text": "".join(self.text(t) for t in (ids if echo else generated)),
                                  "logprobs": logprobs, "finish_reason": "length"}],
                     "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(generated),
                               "total_tokens": len(ids)}}


    def chat(self, body: dict) -> tuple[int, dict]:
        """/v1/chat/completions: the messages through the chat template (scoring/api/loopback_sampling.chat_text)."""
        from scoring.api.loopback_sampling import chat_text

        if self.replay is not None:
            return replayed(self.replay, body)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, _error("messages must be a non-empty list")
        text = chat_text(self.tokenizer, messages)
        prompt = self.text_prefix + [int(t) for t in self.tokenizer(text, add_special_tokens=False)["input_ids"]]
        return self._generate(prompt, body, chat=True, prompt_text=text)

    def _generate(self, prompt: list, body: dict, *, chat: bool, prompt_text: str | None = None):
        from scoring.api.loopback_sampling import response, sample

        if self.latency_s:
            time.sleep(self.latency_s)
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        canned = self.script(body, prompt_text if chat else self.tokenizer.decode(prompt)) if self.script else None
        if canned is None and len(prompt) + max_tokens > self.max_len:
            return 400, _error(f"prompt of {len(prompt)} tokens + {max_tokens} exceeds the context ({self.max_len})")
        n = int(body.get("n") or 1) if self.honour_n else 1
        if chat:
            top = int(body.get("top_logprobs") or 0) if body.get("logprobs") else None
        else:
            top = None if body.get("logprobs") is None else int(body["logprobs"])
        if top is not None and top > self.max_logprobs:
            return 400, _error(f"logprobs must be at most {self.max_logprobs}")
        if canned is not None:
            from scoring.api.loopback_sampling import Choice

            ids = self.tokenizer(canned, add_special_tokens=False)["input_ids"][:max_tokens]
            choices = [Choice(canned, "stop", ids, [])] * n
        else:
            choices = sample(self.model, self.tokenizer, prompt, n=n, max_tokens=max_tokens,
                             temperature=float(body.get("temperature", 1.0)), top_p=float(body.get("top_p", 1.0)),
                             seed=body.get("seed"), stop=body.get("stop"), top_logprobs=top,
                             honour_seed=self.honour_seed, lock=self._model_lock, text_of=self.text)
        return 200, response(choices, chat=chat, top=top, text_of=self.text, n_prompt=len(prompt), model=self.name,
                             number=self.requests)


def is_sampled(body: dict) -> bool:
    """A generation request (sampled, several choices, or several greedy tokens) rather than the one greedy token
    or echo the log-probability modes send."""
    if body.get("echo") or body.get("logit_bias"):
        return False
    return float(body.get("temperature", 1.0)) > 0 or int(body.get("n") or 1) > 1 or int(body.get("max_tokens", 16)) > 1


def _error(message: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error"}}


def request_key(body: dict) -> str:
    """A request body as a replay key: canonical JSON, without the model name."""
    return json.dumps({k: v for k, v in body.items() if k != "model"}, sort_keys=True, separators=(",", ":"))


def load_replay(path: str) -> dict:
    """A recording (tests/fixtures/llama_cpp/record.py): {"server": ..., "model": ..., "exchanges": [...]}."""
    from pathlib import Path

    rec = json.loads(Path(path).read_text())
    rec["answers"] = {request_key(x["request"]): (x["status"], x["response"]) for x in rec["exchanges"]}
    return rec


def replayed(rec: dict, body: dict) -> tuple[int, dict]:
    found = rec["answers"].get(request_key(body))
    if found is None:
        return 500, _error(f"replay: this request was not recorded from {rec['server']}")
    return found


def _handler(server: LoopbackServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as clients expect
        disable_nagle_algorithm = True  # headers and body go out as two writes: without it, 40 ms per answer

        def log_message(self, *args) -> None:  # quiet: tests and benches read counters instead
            pass

        def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
            data = json.dumps(payload).encode()
            with server._lock:  # counted before the answer leaves: a client that has it may look at once
                server.statuses[status] = server.statuses.get(status, 0) + 1
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            if server.drop_idle:
                self.close_connection = True

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": server.name, "object": "model",
                                                             "max_model_len": server.max_len}]})
            else:
                self._send(404, _error(f"no route {self.path}"))

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            with server._lock:
                server.requests += 1
                n = server.requests
                server.bodies = (server.bodies + [body])[-200:]
                fault = server.fail_first.pop(0) if server.fail_first else None
            if server.die_after is not None and n > server.die_after:
                self.close_connection = True  # gone: no answer at all
                threading.Thread(target=server.stop, daemon=True).start()
                return
            if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                return self._send(401, _error("invalid api key"))
            if fault:
                return self._send(fault, _error(f"injected {fault}"), {"Retry-After": "0"} if fault == 429 else None)
            route = self.path.rstrip("/")
            kind = "chat" if route.endswith("/chat/completions") else "completions" if route.endswith(
                "/completions") else None
            if kind not in server.endpoints:
                return self._send(404, _error(f"no route {self.path}"))
            if body.get("model") != server.name:
                return self._send(404, _error(f"model {body.get('model')!r} does not exist"))
            status, payload = server.chat(body) if kind == "chat" else server.complete(body)
            self._send(status, payload)

    return Handler


def main(argv=None) -> None:
    """`python -m scoring.api.loopback --model DIR [--port P] [--bias-logprobs after]`: serve until interrupted
    (or for --lifetime-s); prints the base URL. For trying Tidemark's --api-base without a GPU server."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--model", required=True, help="a local Hugging Face causal LM directory")
    ap.add_argument("--name", default="loopback", help="the served model name clients send")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--bias-logprobs", choices=BIAS_MODES, default="after")
    ap.add_argument("--no-echo", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the forward passes")
    ap.add_argument("--latency-s", type=float, default=0.0, help="generation requests wait this long before being "
                    "answered, without holding the model (a remote API's round trip)")
    ap.add_argument("--ignore-n", action="store_true", help="answer one choice whatever `n` asks (as llama.cpp)")
    ap.add_argument("--lifetime-s", type=float, default=3600.0)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    server = LoopbackServer(args.model, name=args.name, bias_logprobs=args.bias_logprobs, echo=not args.no_echo,
                            lifetime_s=args.lifetime_s, port=args.port, latency_s=args.latency_s,
                            honour_n=not args.ignore_n).start()
    print(server.url, flush=True)
    try:
        server._thread.join()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
