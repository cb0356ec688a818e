"""What every report-writing command does once its job has run: print report.md and say where it and report.html
are. And what every job's report.html needs from the jobs layer: the command line, with credentials redacted."""
from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

import typer


def run_and_print_report(run: Callable[[object], dict], cfg, *, errors=(FileNotFoundError, RuntimeError)) -> dict:
    """`run(cfg)`, then its report on stdout and the report's path (on stderr when that is a terminal, so a pipe
    gets the report alone). An input error in `errors` is one clear line and exit code 2, not a traceback."""
    try:
        res = run(cfg)
    except errors as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    md = Path(res["report"])
    typer.echo(md.read_text())
    page = md.with_name("report.html")
    where = f"{md}, {page.name}" if page.is_file() else str(md)
    typer.echo(f"report: {where}  ({res['seconds']} s)", err=sys.stderr.isatty())
    return res


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command as typed (the program by its name, not its install path), shell-quoted, with anything
    that looks like a credential redacted: the value after an option named like one (`--hf-token X`,
    `--api-key=X`), `--set a.secret=X`, and secrets found in the text itself (jobs/kit/redact.py)."""
    from jobs.kit.redact import REDACTED, is_secret_key, redact

    if argv is None and "-m" in getattr(sys, "orig_argv", [])[1:2]:  # `python -m jobs.cli …`: argv[0] is a path
        argv = sys.orig_argv
    args = list(sys.argv if argv is None else argv)
    if args:
        args[0] = Path(args[0]).name
    out, hide_next = [], False
    for a in args:
        name, eq, _ = a.partition("=")
        if hide_next:
            out.append(REDACTED)
        elif a.startswith("--") and eq and is_secret_key(name[2:]):
            out.append(f"{name}={REDACTED}")
        else:
            out.append(a)
        hide_next = a.startswith("--") and not eq and is_secret_key(a[2:])
    return shlex.join(redact(out))


def write_page(out_dir: Path, page, clean: Callable[[str], str] = lambda s: s) -> Path:
    """OUT/report.html: the page rendered (scoring/reports/html.py), with the versions and date filled in where the
    job left them out, `clean` applied to every string; written atomically."""
    from curation.io.atomic import atomic_write_text
    from scoring.reports.html import render, stamped

    path = Path(out_dir) / "report.html"
    atomic_write_text(path, render(stamped(page), clean))
    return path


def write_html(out_dir: Path, page) -> Path:
    """OUT/report.html for a job's `scoring.reports.html.Page`, with this process's command line, every string
    passed through the credential redaction."""
    from jobs.kit.redact import redact_text

    return write_page(out_dir, replace(page, command=page.command or command_line()), clean=redact_text)
