"""`tidemark canary make` and `tidemark canary test`: canaries (copyright traps) to plant before publishing, with a
commitment to the set, and the test of a model against them.

    tidemark canary make --n 1000 --seed 7 --out my-canaries
    (publish my-canaries/plant.txt inside your documents; keep canaries.jsonl and manifest.json private; publish or
    timestamp manifest.json's canaries_sha256 now)
    tidemark canary test --canaries my-canaries --model PATH --out OUT [--detector loss]

The generator and the files are curation/canary.py's; the test's run is jobs/parts/audit/canary.py, its
statistics scoring/audits/canary.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer

from jobs.kit.options import command, option, progress_option
from jobs.kit.served_model import ServedFields


@dataclass
class CanaryTestConfig(ServedFields):
    canaries: list[str] = option(help="a canary set's directory (from `canary make`); repeat the option to test "
                                 "several independent sets in one run (a p-value per set and Fisher's combination)")
    model: str = option(help="HF causal LM (local dir, .gguf, smollm2); with --api-base, the served model's name")
    out: str = option(help="output directory (scores.parquet, report.json, report.md, report.html)")
    detector: str = option("loss", "the one detector whose score is tested (larger = more member-like), chosen "
                           "before the test: e.g. loss, zlib, min_k@k=0.2, ref (with --ref-model)")
    ref_model: Optional[str] = option(None, "reference model, for --detector ref")
    shard_size: int = option(1000, "canaries per scoring part (the unit of resume)", min=1)
    progress: bool = progress_option()

    def method(self, served=None):
        """The detector, refused when it is not one scored detector the test can use as it is (over a served
        model, one the server's log-probabilities can give)."""
        from jobs.commands.evaluate import resolve_methods
        from scoring.lm.views import PREFIXED

        one = ("name one detector: the p-value is a false-positive rate only for a statistic chosen before the "
               "test (trying several and keeping the best does not keep it)")
        if self.detector in ("all", "") or "," in self.detector:
            raise typer.BadParameter(one, param_hint="--detector")
        try:
            methods = resolve_methods(self.detector, self.ref_model, served)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--detector") from None
        if len(methods) != 1:
            raise typer.BadParameter(one, param_hint="--detector")
        m = methods[0]
        if PREFIXED in m.needs:
            raise typer.BadParameter(f"{m.column} conditions on a prefix of non-members; here those would be "
                                     "held-out canaries, which are the test's control", param_hint="--detector")
        return m


def register(app: typer.Typer) -> None:
    from jobs.kit.options import group

    canary = group(app, "canary", "Canaries (copyright traps): make a set to plant before publishing; later, test "
                   "a model against it.")

    @canary.command("make")
    def make(
        n: int = typer.Option(..., "--n", min=2, help="how many canaries (half planted, half held out)"),
        seed: int = typer.Option(..., "--seed", help="the seed: the same seed gives byte-identical files"),
        out: Path = typer.Option(..., "--out", help="directory for canaries.jsonl, plant.txt, manifest.json"),
        words: int = typer.Option(16, "--words", min=4, help="words per canary"),
        plant_share: float = typer.Option(0.5, "--plant-share", help="share of canaries to plant (0 < s < 1)"),
        overwrite: bool = typer.Option(False, "--overwrite", help="replace a canary set already in --out"),
        generator: str = typer.Option("words", "--generator", help="words: random common English words; "
                                      "lm:PATH: sentences sampled from a local causal LM directory"),
        temperature: float = typer.Option(1.0, "--temperature", min=0.01, help="with --generator lm:PATH: the "
                                          "sampling temperature (higher: less likely text, easier to detect)"),
    ) -> None:
        """Make N unique canaries (random words, or a local LM's samples), each planted or held out by a seeded
        coin, and a manifest whose sha256 commits to the set."""
        from curation.canary import CanaryError, make_canaries, write_canaries
        from jobs.kit.identity import tool_version

        if (out / "manifest.json").exists() and not overwrite:
            raise typer.BadParameter(f"{out} already holds a canary set: pass --overwrite or choose another "
                                     "--out (a set that was planted must never be remade)")
        lm, made_by = _generator(generator, temperature)
        try:
            canaries = make_canaries(n, seed, words, plant_share, lm=lm, temperature=temperature)
        except CanaryError as exc:
            raise typer.BadParameter(str(exc)) from None
        m = write_canaries(out, canaries, seed=seed, words=words, plant_share=plant_share, tool=tool_version(),
                           generator=made_by)
        typer.echo(f"{m['n']} canaries ({m['roles']['plant']} to plant, {m['roles']['holdout']} held out) in {out}; "
                   f"commitment sha256 {m['canaries_sha256']}\npublish {out / 'plant.txt'} (not canaries.jsonl)")

    canary.command("test")(command(
        CanaryTestConfig, _run_test,
        doc="Score every canary of one or more sets with one detector (locally or over --api-base) and test whether "
            "the planted canaries score higher than the held-out ones (one-sided Mann-Whitney U; Fisher's combination "
            "across sets). Refuses an edited set before scoring."))


def _generator(spec: str, temperature: float) -> tuple[str | None, dict | None]:
    """(the LM directory or None, what the manifest records about the generator) for --generator."""
    if spec == "words":
        return None, None
    if not spec.startswith("lm:") or not Path(spec[3:]).is_dir():
        raise typer.BadParameter("expected words or lm:PATH, PATH a local causal LM directory", param_hint="--generator")
    import torch
    import transformers

    from jobs.kit.identity import model_identity

    return spec[3:], {"generator": "lm", "model": model_identity(spec[3:]), "temperature": temperature,
                      "sampled_with": {"torch": torch.__version__, "transformers": transformers.__version__}}


def _run_test(cfg: CanaryTestConfig) -> dict:
    from curation.canary import CanaryError
    from jobs.kit.report_out import run_and_print_report
    from jobs.parts.audit.canary import run_canary_test

    return run_and_print_report(run_canary_test, cfg, errors=(FileNotFoundError, RuntimeError, CanaryError))
