"""Options declared once (jobs/kit/options.py): a config field's default, help and limits become the command's typer
option, and the command builds the config from what was typed. No Ray."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import typer
from typer.testing import CliRunner

from jobs.kit.options import command, option, progress_option


@dataclass
class ToyConfig:
    path: str = option(help="where to read")
    size: int = option(3, "how many", min=1)
    name: Optional[str] = option(None, "an optional name", flags=("--name", "-n"))
    rate: float = option(0.05, "a rate; not given = the config's default", cli_default=None)
    progress: bool = progress_option()
    internal: int = 7  # not an option


def toy_app(make=None):
    seen = []
    app = typer.Typer()
    app.command("toy")(command(ToyConfig, seen.append, doc="A toy command.", make=make))
    app.command("other")(lambda: None)  # two commands, so typer keeps the `toy` name
    return app, seen


def test_fields_become_options_with_their_defaults_and_limits():
    app, seen = toy_app()
    result = CliRunner().invoke(app, ["toy", "--path", "p", "-n", "x", "--quiet"])
    assert result.exit_code == 0, result.output
    assert seen == [ToyConfig(path="p", size=3, name="x", rate=None, progress=False)]
    assert CliRunner().invoke(app, ["toy", "--path", "p", "--size", "0"]).exit_code == 2  # min=1
    assert CliRunner().invoke(app, ["toy"]).exit_code == 2  # --path is required
    help_text = " ".join(CliRunner().invoke(app, ["toy", "--help"]).output.split())
    assert "A toy command." in help_text and "how many" in help_text and "--internal" not in help_text


def test_make_resolves_what_the_command_line_leaves_out():
    def make(*, rate, **options):
        return ToyConfig(rate=0.05 if rate is None else rate, **options)

    app, seen = toy_app(make)
    CliRunner().invoke(app, ["toy", "--path", "p"])
    CliRunner().invoke(app, ["toy", "--path", "p", "--rate", "0.2"])
    assert [c.rate for c in seen] == [0.05, 0.2] and seen[0].progress is True


def test_served_defaults_are_the_api_clients_own():
    """--api-concurrency, --api-max-retries and --api-timeout default to ApiConfig's values: one place, not four."""
    from jobs.commands.evaluate import EvaluateConfig
    from scoring.api.client import ApiConfig

    api = {f.name: f.default for f in dataclasses.fields(ApiConfig)}
    cfg = {f.name: f.default for f in dataclasses.fields(EvaluateConfig)}
    assert (cfg["api_concurrency"], cfg["api_max_retries"], cfg["api_timeout"]) == \
        (api["concurrency"], api["max_retries"], api["timeout_s"])
