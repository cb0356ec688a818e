"""The `tidemark` command line: a thin typer app; each job module registers its own command(s).

Job modules import heavy dependencies (torch, ray) inside their functions so that `tidemark --help` stays fast.
"""
from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="tidemark",
    help="Find out what a large language model was trained on: membership benchmarks, detectors, corpus audits.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

# One module per job; each defines `register(app)`. Order is the order shown in --help.
JOB_MODULES = (
    "jobs.commands.build_benchmark",
    "jobs.commands.evaluate",
    "jobs.commands.rescore",
    "jobs.commands.demo",
    "jobs.commands.shift_audit",
    "jobs.commands.doc_mia",
    "jobs.commands.audit",
    "jobs.commands.overlap",
    "jobs.commands.index_corpus",
    "jobs.commands.trace",
    "jobs.commands.canary",
    "jobs.commands.unlearning_audit",
    "jobs.commands.contamination_study",
    "jobs.commands.dataset_inference",
    "jobs.commands.cutoff",
    "jobs.commands.impact",
    "jobs.commands.paraphrase",
    "jobs.commands.infra",
)

for _name in JOB_MODULES:
    importlib.import_module(_name).register(app)


@app.callback()
def _name_the_command(ctx: typer.Context) -> None:
    """Every progress line says which command wrote it (jobs/kit/log.py)."""
    from jobs.kit.log import set_command

    if ctx.invoked_subcommand:
        set_command(ctx.invoked_subcommand)

# No log line may carry a credential (jobs/kit/redact.py): every record, from any logger, is scrubbed.
importlib.import_module("jobs.kit.redact").install_log_redaction()


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
