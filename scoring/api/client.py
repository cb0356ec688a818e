"""HTTP to an OpenAI-compatible `/v1/completions` endpoint: what the user asked for (ApiConfig) and a client that
keeps at most `concurrency` requests in flight (fewer while the server queues: AdaptiveLimit), holds a
requests-per-second limit, and retries 429, 5xx and lost connections with exponential backoff and jitter
(honouring Retry-After). A keep-alive connection that the server closed while it sat idle is reopened and the
request sent again at once, without costing a try.

Errors split by what the job should do with them, and say what happened:
  ApiRequestError  this request was refused (a 4xx such as a prompt too long): the row is quarantined;
  ApiRefused       the server answered, with an error, to every try (e.g. HTTP 500 on each): the job stops with
                   "the server refused the request: HTTP 500: <its message>" (an ApiFatal);
  ApiFatal         the job cannot go on (no answer at all after every retry: timeouts, refused connections;
                   401/403, an unknown model): it stops with one clear line, and a rerun resumes from the parts
                   already written.
The API key (OPENAI_API_KEY) travels as a bearer token only; it is never part of a repr, a log line or a file.
"""
from __future__ import annotations

import http.client
import json
import random
import threading
import time
import urllib.parse
from dataclasses import asdict, dataclass, fields, replace

MODES = ("echo", "logit-bias", "none")  # none: text only (scoring/generation)
PROMPT_FORMATS = ("ids", "text")


@dataclass(frozen=True)
class ApiConfig:
    base: str  # e.g. http://127.0.0.1:8000/v1
    model: str  # the served model's name
    mode: str = "echo"  # echo | logit-bias | none (the server gives no prompt log-probabilities)
    top_logprobs: int = 5  # n of the top-n log-probabilities asked per position
    concurrency: int = 8  # requests in flight per scorer actor
    rps: float = 0.0  # requests per second per scorer actor (0 = no limit); the job divides its total by actors
    max_retries: int = 6
    backoff_s: float = 0.5  # first retry waits ~this long (×2 per retry, ±50% jitter), at most max_backoff_s
    max_backoff_s: float = 20.0
    timeout_s: float = 120.0  # per request, from sending it to the last byte of the answer (--api-timeout)
    max_bias: float = 100.0  # the largest logit_bias sent (OpenAI's limit)
    search_tol: float = 1e-3  # the binary search stops when the bias bracket is this narrow (nats)
    # Chosen by the probe (scoring/api/probe.py) before scoring, so every actor uses the same method:
    method: str | None = None  # echo | inversion | direct | search
    max_tokens: int = 0  # echo: 0, or 1 where the server refuses 0 or generates anyway (the token is dropped)
    prompt_format: str = "ids"  # ids (token ids, the first choice) | text (for servers that take only strings)
    prefix_tokens: int = 0  # text prompts: tokens the server puts before the text (e.g. its BOS), seen at probe

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"--api-logprobs must be one of {', '.join(MODES)}; got {self.mode!r}")
        if not self.base.startswith(("http://", "https://")):
            raise ValueError(f"--api-base must be an http(s) URL such as http://HOST:PORT/v1; got {self.base!r}")
        if self.top_logprobs < 1 or self.concurrency < 1:
            raise ValueError("--api-top-logprobs and --api-concurrency must be at least 1")
        if not self.timeout_s > 0:
            raise ValueError(f"--api-timeout must be a positive number of seconds; got {self.timeout_s!r}")
        if self.prompt_format not in PROMPT_FORMATS:
            raise ValueError(f"prompt_format must be one of {PROMPT_FORMATS}; got {self.prompt_format!r}")

    @property
    def source(self) -> str:
        """The token-stats `lp_source` of rows scored this way (scoring/lm/tokenstats.py)."""
        return f"api:{self.method or self.mode}:top{self.top_logprobs}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ApiConfig":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def with_(self, **kw) -> "ApiConfig":
        return replace(self, **kw)


class ApiError(RuntimeError):
    pass


class ApiRequestError(ApiError):
    """The server refused this request (4xx): only the row it belongs to fails."""

    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class ApiFatal(ApiError):
    """The server cannot be used: the job stops (committed parts are kept and a rerun resumes)."""


class ApiRefused(ApiFatal):
    """The server answered every try with an HTTP error: it is there, and it says no (quoted in the message)."""

    def __init__(self, url: str, status: int, message: str, tries: int):
        super().__init__(f"the server refused the request: HTTP {status}: {message} ({url}, {tries} "
                         f"{'try' if tries == 1 else 'tries'})")


RETRYABLE = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
FATAL = frozenset({401, 403, 404})


class RateLimiter:
    """At most `rps` starts per second, spaced evenly (no bursts), shared by the client's threads."""

    def __init__(self, rps: float):
        self.interval = 1.0 / rps if rps and rps > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


class AdaptiveLimit:
    """How many requests may be in flight at once: `ceiling` (--api-concurrency) at most. A server that sheds load
    or queues makes it back off: a timeout, 429 or 503 halves it; an answer that took more than QUEUE_FACTOR times
    the fastest seen per prompt token (and over QUEUE_FLOOR_S) waited behind others, so the limit drops by one.
    Each cut counts once for the requests in flight when it was made. Answers without queueing grow it back by
    one per `limit` answers (additive increase, multiplicative decrease, as TCP does)."""

    QUEUE_FACTOR = 4.0
    QUEUE_FLOOR_S = 2.0  # a prefix-cache hit next to a miss differs by far more than 4x, but in milliseconds

    def __init__(self, ceiling: int):
        self.ceiling = max(1, int(ceiling))
        self.limit = float(self.ceiling)
        self.in_flight = 0
        self.lowest = self.ceiling
        self.cuts = 0
        self._best: float | None = None  # seconds per (prompt token + 16): the fastest answer seen
        self._generation = 0  # bumped by every cut: a signal from a request sent before it is stale
        self._cond = threading.Condition()

    def acquire(self) -> int:
        with self._cond:
            while self.in_flight >= int(self.limit):
                self._cond.wait()
            self.in_flight += 1
            return self._generation

    def release(self, generation: int, outcome: str, seconds: float | None = None, size: int = 0) -> None:
        """outcome: ok (an answer, timed), overload (timeout, 429, 503) or other (no signal)."""
        with self._cond:
            self.in_flight -= 1
            fresh = generation == self._generation
            if outcome == "overload" and fresh:
                self._cut(self.limit / 2)
            elif outcome == "ok" and seconds is not None:
                unit = seconds / (size + 16)
                self._best = unit if self._best is None else min(self._best, unit)
                queued = seconds > self.QUEUE_FLOOR_S and unit > self.QUEUE_FACTOR * self._best
                if queued and fresh and self.limit > 1:
                    self._cut(self.limit - 1)
                elif not queued:
                    self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)
            self._cond.notify_all()

    def _cut(self, to: float) -> None:
        self.limit = max(1.0, float(int(to)))
        self.lowest = min(self.lowest, int(self.limit))
        self.cuts += 1
        self._generation += 1


# A keep-alive connection the server closed while idle fails like this on its next request, before any answer.
STALE_CONNECTION = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, http.client.RemoteDisconnected)


class CompletionsClient:
    """POST {base}/completions (or {base}/chat/completions) with one keep-alive connection per thread. Thread-safe;
    counters in `stats`."""

    def __init__(self, cfg: ApiConfig, api_key: str | None = None, sleep=time.sleep, endpoint: str = "completions"):
        self.cfg = cfg
        url = urllib.parse.urlsplit(cfg.base.rstrip("/"))
        self._https = url.scheme == "https"
        self._host, self._port = url.hostname, url.port
        self.endpoint = endpoint  # "completions", or "chat/completions" for a chat endpoint (text-only audits)
        self._path = (url.path or "") + "/" + endpoint
        self._headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._local = threading.local()
        self._limiter = RateLimiter(cfg.rps)
        self.limit = AdaptiveLimit(cfg.concurrency)
        self._lock = threading.Lock()
        self._sleep = sleep
        self.stats = {"calls": 0, "retries": 0, "reconnects": 0, "timeouts": 0, "prompt_tokens": 0,
                      "seconds_waiting": 0.0}

    def __repr__(self) -> str:  # never the headers: they hold the key
        return f"CompletionsClient({self.cfg.base!r}, model={self.cfg.model!r})"

    @property
    def url(self) -> str:
        return f"{self.cfg.base.rstrip('/')}/{self.endpoint}"

    def concurrency_report(self) -> dict:
        """For run.json: the ceiling asked for, where the adaptive limit ended, its lowest, and how often it cut."""
        return {"concurrency_ceiling": self.limit.ceiling, "concurrency_final": int(self.limit.limit),
                "concurrency_lowest": self.limit.lowest, "concurrency_cuts": self.limit.cuts}

    def _conn(self) -> tuple[http.client.HTTPConnection, bool]:
        """(this thread's connection, whether it has answered before: only a reused one can be stale)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = self._local.conn = cls(self._host, self._port, timeout=self.cfg.timeout_s)
            self._local.used = False
        return conn, self._local.used

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None

    def _post(self, payload: bytes) -> tuple[int, dict, bytes]:
        for _ in range(2):
            conn, reused = self._conn()
            try:
                conn.request("POST", self._path, body=payload, headers=self._headers)
                resp = conn.getresponse()
                out = resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
                self._local.used = True
                return out
            except STALE_CONNECTION:
                self._drop()  # a half-read connection cannot be reused
                if not reused:
                    raise
                self._count(reconnects=1)  # the server closed it while idle: reopen, send again, no try spent
            except BaseException:
                self._drop()
                raise
        raise AssertionError("unreachable: a fresh connection's failure is raised above")

    def _count(self, **inc) -> None:
        with self._lock:
            for k, v in inc.items():
                self.stats[k] += v

    def complete(self, body: dict, n_tokens: int | None = None) -> dict:
        """One completion request; returns the parsed JSON. Raises ApiRequestError, ApiRefused or ApiFatal.
        `n_tokens`: the prompt's length in tokens where it is sent as text (counted in `stats`)."""
        payload = json.dumps({"model": self.cfg.model, **body}).encode()
        prompt = body.get("prompt")
        size = n_tokens if n_tokens is not None else len(prompt) if isinstance(prompt, list) else 0
        tries = self.cfg.max_retries + 1
        last, refused = "", None  # what the last try saw; (status, message) where the server answered an error
        retry_after = None
        for attempt in range(tries):
            if attempt:
                wait = min(self.cfg.max_backoff_s, self.cfg.backoff_s * 2 ** (attempt - 1)) * (0.5 + random.random())
                if retry_after is not None:
                    wait = max(wait, min(retry_after, self.cfg.max_backoff_s))
                self._count(seconds_waiting=wait, retries=1)
                self._sleep(wait)
            self._limiter.wait()
            answer, last, refused, retry_after = self._try(payload, size)
            if answer is not None:
                return answer
        if refused is not None:
            raise ApiRefused(self.url, refused[0], refused[1], tries)
        raise ApiFatal(f"{self.url} did not answer after {tries} {'try' if tries == 1 else 'tries'} (last: {last})")

    def _try(self, payload: bytes, size: int):
        """One try: (parsed answer or None, what went wrong, (status, message) if the server said no, Retry-After).
        Raises at once where a retry cannot help (401/403/404, a 4xx)."""
        generation = self.limit.acquire()
        outcome, seconds, t0 = "other", None, time.monotonic()
        try:
            try:
                status, headers, data = self._post(payload)
            except TimeoutError:
                outcome = "overload"  # a queue at the server, most likely: send less at once
                self._count(timeouts=1)
                return None, f"timed out: no answer within --api-timeout {self.cfg.timeout_s:g} s", None, None
            except (OSError, http.client.HTTPException) as exc:
                return None, f"{type(exc).__name__}: {exc}", None, None
            self._count(calls=1, prompt_tokens=size)
            if status == 200:
                try:
                    answer = json.loads(data)
                except ValueError:
                    return None, f"HTTP 200 with a body that is not JSON ({data[:80]!r})", None, None
                outcome, seconds = "ok", time.monotonic() - t0
                return answer, "", None, None
            message = _error_message(data)
            if status in FATAL:
                raise ApiFatal(f"{self.url} refused the request (HTTP {status}: {message})")
            if status not in RETRYABLE:
                raise ApiRequestError(status, message)
            if status in (429, 503):
                outcome = "overload"
            return None, f"HTTP {status}: {message}", (status, message), _seconds(headers.get("retry-after"))
        finally:
            self.limit.release(generation, outcome, seconds, size)


def _error_message(data: bytes) -> str:
    """The server's error message on one line (pydantic-style validation errors come over several)."""
    try:
        err = json.loads(data).get("error")
        text = str(err.get("message") if isinstance(err, dict) else err)
    except (ValueError, AttributeError):
        text = data.decode("utf-8", "replace")
    return " ".join(text.split())[:300]


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def is_api_fatal(exc: BaseException) -> str | None:
    """The ApiFatal message inside `exc`, however Ray wrapped it (a task error's cause chain or its text)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ApiFatal):
            return str(exc)
        exc = exc.__cause__ or exc.__context__
    return None


def _with_subclasses(cls: type) -> list[type]:
    """The class and every subclass defined so far (ApiRefused here, SelfCheckFailed in selfcheck.py)."""
    return [cls, *(c for sub in cls.__subclasses__() for c in _with_subclasses(sub))]


def api_fatal_reason(exc: BaseException) -> str | None:
    """The one-line reason when a failure (a Ray pipeline's, a task's) came from a served model that cannot be used."""
    return is_api_fatal(exc) or fatal_in_text(str(exc))


def fatal_in_text(text: str) -> str | None:
    """Ray Data re-raises a worker's exception as text; find our one line in it (ApiFatal or a subclass)."""
    best = None
    for marker in (f"{cls.__name__}: " for cls in _with_subclasses(ApiFatal)):
        at = text.rfind(marker)
        if at >= 0 and (best is None or at > best[0]):
            best = (at, marker)
    return text[best[0] + len(best[1]):].splitlines()[0].strip() if best else None


class Secret:
    """A value that prints as *** (the API key in an actor's constructor arguments, in tracebacks, in logs)."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__
