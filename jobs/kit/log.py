"""One log for the progress lines of every command: on stderr, each line starting with the name of the command that
runs ([evaluate], [audit], [build-benchmark], ...), scrubbed of credentials (jobs/kit/redact.py). The CLI names the
command once, before it runs (`set_command`); code called some other way logs as [tidemark]."""
from __future__ import annotations

import sys

_command = ["tidemark"]


def set_command(name: str) -> None:
    _command[0] = name


def log(message: str) -> None:
    from jobs.kit.redact import redact_text

    print(redact_text(f"[{_command[0]}] {message}"), file=sys.stderr, flush=True)
