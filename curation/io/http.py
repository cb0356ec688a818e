"""A small, polite JSON-over-HTTP GET client for public APIs (the MediaWiki API today).

A `JsonClient` *is* a `fetch(params) -> dict` callable, which is the seam the sources take: tests pass a plain
function that returns fixtures, production passes a `JsonClient`. It does the three things public APIs ask of a
crawler and that are easy to get subtly wrong:

- a descriptive User-Agent on every request (Wikimedia blocks generic ones);
- a minimum interval between requests, so a crawl stays serial and slow by construction;
- retries on 429, 5xx, connection errors and API-level "slow down" bodies (MediaWiki's `maxlag`), with capped
  exponential backoff; a `Retry-After` header, when the server sends one, wins over the computed delay.

No jitter: a source crawls from one worker, and deterministic delays keep the backoff tests exact.
`sleep` and `clock` are injected so tests run instantly.
"""
from __future__ import annotations

import email.utils
import time
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

import requests

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})

Fetch = Callable[[Mapping[str, Any]], dict]


class HttpError(RuntimeError):
    """A request that failed for good: a non-retryable status, or retries exhausted."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """`Retry-After` is either delta-seconds or an HTTP date (RFC 9110 10.2.3); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


class JsonClient:
    """GET `endpoint?params` and return the decoded JSON body, politely (see the module docstring)."""

    def __init__(
        self,
        endpoint: str,
        user_agent: str,
        *,
        session: requests.Session | None = None,
        min_interval_s: float = 0.2,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        timeout_s: float = 30.0,
        retry_body: Callable[[dict], bool] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        if not user_agent or len(user_agent) < 8:
            raise ValueError("a descriptive User-Agent with contact information is required")
        self.endpoint = endpoint
        self.user_agent = user_agent
        self.session = session or requests.Session()
        self.min_interval_s = min_interval_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.timeout_s = timeout_s
        self.retry_body = retry_body
        self.sleep = sleep
        self.clock = clock
        self._last_start: float | None = None
        self.requests_sent = 0

    def __call__(self, params: Mapping[str, Any]) -> dict:
        return self.get(params)

    def _throttle(self) -> None:
        if self._last_start is not None:
            wait = self._last_start + self.min_interval_s - self.clock()
            if wait > 0:
                self.sleep(wait)
        self._last_start = self.clock()

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        computed = self.backoff_s * (2 ** attempt)
        return min(self.max_backoff_s, retry_after if retry_after is not None else computed)

    def get(self, params: Mapping[str, Any]) -> dict:
        last_problem = ""
        for attempt in range(self.max_retries + 1):
            self._throttle()
            self.requests_sent += 1
            retry_after = None
            try:
                # The header goes on each request, not only on the session, so an injected session cannot lose it.
                resp = self.session.get(
                    self.endpoint, params=dict(params), headers={"User-Agent": self.user_agent},
                    timeout=self.timeout_s,
                )
            except (requests.ConnectionError, requests.Timeout) as exc:
                last_problem = f"{type(exc).__name__}: {exc}"
            else:
                retry_after = retry_after_seconds(resp.headers.get("Retry-After"))
                if resp.status_code in RETRY_STATUS:
                    last_problem = f"HTTP {resp.status_code}"
                elif resp.status_code >= 400:
                    raise HttpError(f"HTTP {resp.status_code} for {resp.url}", resp.status_code)
                else:
                    try:
                        body = resp.json()
                    except ValueError as exc:
                        raise HttpError(f"invalid JSON from {resp.url}: {exc}", resp.status_code) from exc
                    if not (self.retry_body and self.retry_body(body)):
                        return body
                    last_problem = f"retryable body: {str(body)[:200]}"
            if attempt < self.max_retries:
                self.sleep(self._delay(attempt, retry_after))
        raise HttpError(f"gave up after {self.max_retries + 1} attempts on {self.endpoint}: {last_problem}")
