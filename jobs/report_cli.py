"""What every report-writing command does once its job has run: print report.md and say where it is."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import typer


def run_and_print_report(run: Callable[[object], dict], cfg, *, errors=(FileNotFoundError, RuntimeError)) -> dict:
    """`run(cfg)`, then its report on stdout and the report's path (on stderr when that is a terminal, so a pipe
    gets the report alone). An input error in `errors` is one clear line and exit code 2, not a traceback."""
    try:
        res = run(cfg)
    except errors as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(Path(res["report"]).read_text())
    typer.echo(f"report: {res['report']}  ({res['seconds']} s)", err=sys.stderr.isatty())
    return res
