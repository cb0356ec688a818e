"""One log for the progress lines of every command: on stderr, each line starting with the name of the command that
runs ([evaluate], [audit], [build-benchmark], ...), scrubbed of credentials (jobs/kit/redact.py). The CLI names the
command once, before it runs (`set_command`); code called some other way logs as [tidemark]."""
from __future__ import annotations

import sys
import time

_command = ["tidemark"]


def set_command(name: str) -> None:
    _command[0] = name


def log(message: str) -> None:
    from jobs.kit.redact import redact_text

    print(redact_text(f"[{_command[0]}] {message}"), file=sys.stderr, flush=True)


class PhaseClock:
    """Seconds spent between successive `lap(name)` calls."""

    def __init__(self):
        self.laps: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self._t, 3)
        self._t = now
