"""Options declared once: a job config's dataclass field carries its default, its `--help` text and its typer
settings (`option(...)`), and `command(Config, run)` turns the fields into the command's typer options. A default
or a help text is written in one place, and a new field is a new option without a second edit."""
from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, Callable, Sequence

import typer

OPTION = "option"  # the metadata key of a field that is a command-line option


def option(default: Any = dataclasses.MISSING, help: str = "", *, flags: Sequence[str] = (), **typer_kwargs) -> Any:
    """A config field that is also a command-line option. `default` left out: a required option. `flags`: the
    option's names when they are not `--field-name` (e.g. `("--progress/--quiet",)`); `typer_kwargs`: min, max,
    hidden, ... as typer.Option takes them, and `cli_default` where the command line's default differs from the
    config's (e.g. None for "not given", which the command's `make` resolves)."""
    meta = {OPTION: {"help": help, "flags": tuple(flags), **typer_kwargs}}
    return dataclasses.field(default=default, metadata=meta)


def runner_option() -> Any:
    """`runner: str`, shown as --runner (jobs/plane/local_plane.py): where a scoring job's plane runs."""
    return option("auto", "where the scoring runs: ray (Ray Data actor pools on RAY_ADDRESS's cluster or a local Ray "
                  "runtime), local (this process alone, no Ray: the same stages and part files; a row that crashes "
                  "the process ends the job, its committed parts kept), or auto: local for a local input of at most "
                  "8 MiB when no cluster is named or running, else ray (docs/scaling.md)")


def progress_option() -> Any:
    """`progress: bool`, shown as --progress/--quiet (every command's progress bars)."""
    return option(True, "progress bars (--quiet: none)", flags=("--progress/--quiet",))


def option_fields(config: type) -> list[dataclasses.Field]:
    """The config's option fields, its own first and then those it inherits (the order `--help` shows them)."""
    own = set(config.__dict__.get("__annotations__", {}))
    fields = [f for f in dataclasses.fields(config) if OPTION in f.metadata]
    return [f for f in fields if f.name in own] + [f for f in fields if f.name not in own]


def parameters(config: type, skip: Sequence[str] = ()) -> list[inspect.Parameter]:
    """The option fields as keyword parameters whose defaults are typer.Options (what typer reads)."""
    hints = typing.get_type_hints(config)
    params = []
    for f in option_fields(config):
        if f.name in skip:
            continue
        meta = dict(f.metadata[OPTION])
        flags, text = meta.pop("flags"), meta.pop("help")
        default = ... if f.default is dataclasses.MISSING else f.default
        default = meta.pop("cli_default", default)
        kind = typing.Optional[hints[f.name]] if default is None else hints[f.name]
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=kind,
                                        default=typer.Option(default, *flags, help=text, **meta)))
    return params


def command(config: type, run: Callable[[Any], Any], *, doc: str, skip: Sequence[str] = (),
            extra: Sequence[inspect.Parameter] = (), make: Callable[..., Any] | None = None) -> Callable:
    """A typer command function: its options are `config`'s option fields (less `skip`) plus `extra` parameters;
    called, it builds the config (`make(**options)` when given, else `config(**options)`) and returns `run(cfg)`.
    `doc` is the command's help."""
    params = parameters(config, skip) + list(extra)

    def cmd(**kwargs):
        return run((make or config)(**kwargs))

    cmd.__signature__ = inspect.Signature(params)
    cmd.__doc__ = doc
    cmd.__name__ = config.__name__.removesuffix("Config").lower() or "command"
    return cmd


def group(app: typer.Typer, name: str, help: str) -> typer.Typer:
    """A command group (`tidemark NAME SUBCOMMAND`) added to `app`; its bare name prints its help."""
    sub = typer.Typer(help=help, no_args_is_help=True)
    app.add_typer(sub, name=name)
    return sub
