"""HTTP to an OpenAI-compatible `/v1/completions` endpoint: what the user asked for (ApiConfig) and a client that
keeps at most `concurrency` requests in flight, holds a requests-per-second limit, and retries 429, 5xx and broken
connections with exponential backoff and jitter (honouring Retry-After).

Errors split by what the job should do with them:
  ApiRequestError  this request was refused (a 4xx such as a prompt too long): the row is quarantined;
  ApiFatal         the job cannot go on (no answer after every retry, 401/403, an unknown model): it stops with
                   one clear line, and a rerun resumes from the parts already written.
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

MODES = ("echo", "logit-bias")


@dataclass(frozen=True)
class ApiConfig:
    base: str  # e.g. http://127.0.0.1:8000/v1
    model: str  # the served model's name
    mode: str = "echo"  # echo | logit-bias
    top_logprobs: int = 5  # n of the top-n log-probabilities asked per position
    concurrency: int = 8  # requests in flight per scorer actor
    rps: float = 0.0  # requests per second per scorer actor (0 = no limit); the job divides its total by actors
    max_retries: int = 6
    backoff_s: float = 0.5  # first retry waits ~this long (×2 per retry, ±50% jitter), at most max_backoff_s
    max_backoff_s: float = 20.0
    timeout_s: float = 120.0
    max_bias: float = 100.0  # the largest logit_bias sent (OpenAI's limit)
    search_tol: float = 1e-3  # the binary search stops when the bias bracket is this narrow (nats)
    # Chosen by the probe (scoring/api/probe.py) before scoring, so every actor uses the same method:
    method: str | None = None  # echo | inversion | direct | search
    max_tokens: int = 0  # echo: 0, or 1 where the server refuses 0 (the generated token is dropped)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"--api-logprobs must be one of {', '.join(MODES)}; got {self.mode!r}")
        if not self.base.startswith(("http://", "https://")):
            raise ValueError(f"--api-base must be an http(s) URL such as http://HOST:PORT/v1; got {self.base!r}")
        if self.top_logprobs < 1 or self.concurrency < 1:
            raise ValueError("--api-top-logprobs and --api-concurrency must be at least 1")

    @property
    def source(self) -> str:
        """The token-stats `lp_source` of rows scored this way (scoring/tokenstats.py)."""
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


class CompletionsClient:
    """POST {base}/completions with one keep-alive connection per thread. Thread-safe; counters in `stats`."""

    def __init__(self, cfg: ApiConfig, api_key: str | None = None, sleep=time.sleep):
        self.cfg = cfg
        url = urllib.parse.urlsplit(cfg.base.rstrip("/"))
        self._https = url.scheme == "https"
        self._host, self._port = url.hostname, url.port
        self._path = (url.path or "") + "/completions"
        self._headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._local = threading.local()
        self._limiter = RateLimiter(cfg.rps)
        self._lock = threading.Lock()
        self._sleep = sleep
        self.stats = {"calls": 0, "retries": 0, "prompt_tokens": 0, "seconds_waiting": 0.0}

    def __repr__(self) -> str:  # never the headers: they hold the key
        return f"CompletionsClient({self.cfg.base!r}, model={self.cfg.model!r})"

    @property
    def url(self) -> str:
        return f"{self.cfg.base.rstrip('/')}/completions"

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = self._local.conn = cls(self._host, self._port, timeout=self.cfg.timeout_s)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None

    def _post(self, payload: bytes) -> tuple[int, dict, bytes]:
        conn = self._conn()
        try:
            conn.request("POST", self._path, body=payload, headers=self._headers)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        except BaseException:
            self._drop()  # a half-read connection cannot be reused
            raise

    def _count(self, **inc) -> None:
        with self._lock:
            for k, v in inc.items():
                self.stats[k] += v

    def complete(self, body: dict) -> dict:
        """One completion request; returns the parsed JSON. Raises ApiRequestError or ApiFatal."""
        payload = json.dumps({"model": self.cfg.model, **body}).encode()
        prompt = body.get("prompt")
        last = ""
        for attempt in range(self.cfg.max_retries + 1):
            if attempt:
                self._count(retries=1)
            self._limiter.wait()
            retry_after = None
            try:
                status, headers, data = self._post(payload)
            except (OSError, http.client.HTTPException) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                self._count(calls=1, prompt_tokens=len(prompt) if isinstance(prompt, list) else 0)
                if status == 200:
                    try:
                        return json.loads(data)
                    except ValueError:
                        last = f"HTTP 200 with a body that is not JSON ({data[:80]!r})"
                else:
                    message = _error_message(data)
                    if status in FATAL:
                        raise ApiFatal(f"{self.url} refused the request (HTTP {status}: {message})")
                    if status not in RETRYABLE:
                        raise ApiRequestError(status, message)
                    last = f"HTTP {status}: {message}"
                    retry_after = _seconds(headers.get("retry-after"))
            if attempt == self.cfg.max_retries:
                break
            wait = min(self.cfg.max_backoff_s, self.cfg.backoff_s * 2 ** attempt) * (0.5 + random.random())
            if retry_after is not None:
                wait = max(wait, min(retry_after, self.cfg.max_backoff_s))
            self._count(seconds_waiting=wait)
            self._sleep(wait)
        raise ApiFatal(f"{self.url} did not answer after {self.cfg.max_retries + 1} tries (last: {last})")


def _error_message(data: bytes) -> str:
    try:
        err = json.loads(data).get("error")
        return str(err.get("message") if isinstance(err, dict) else err)[:300]
    except (ValueError, AttributeError):
        return data[:300].decode("utf-8", "replace")


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


def fatal_in_text(text: str) -> str | None:
    """Ray Data re-raises a worker's exception as text; find our one line in it."""
    marker = "ApiFatal: "
    at = text.rfind(marker)
    return text[at + len(marker):].splitlines()[0].strip() if at >= 0 else None


class Secret:
    """A value that prints as *** (the API key in an actor's constructor arguments, in tracebacks, in logs)."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__
