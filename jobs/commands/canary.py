"""`tidemark canary make`: canaries (copyright traps) to plant before publishing, with a commitment to the set.

    tidemark canary make --n 1000 --seed 7 --out my-canaries
    (publish my-canaries/plant.txt inside your documents; keep canaries.jsonl and manifest.json private; publish or
    timestamp manifest.json's canaries_sha256 now)

The generator and the files are curation/canary.py's; `tidemark canary test` (scoring the set under a model) is
the next step of this workflow.
"""
from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    from jobs.kit.options import group

    canary = group(app, "canary", "Canaries (copyright traps): make a set to plant before publishing.")

    @canary.command("make")
    def make(
        n: int = typer.Option(..., "--n", min=2, help="how many canaries (half planted, half held out)"),
        seed: int = typer.Option(..., "--seed", help="the seed: the same seed gives byte-identical files"),
        out: Path = typer.Option(..., "--out", help="directory for canaries.jsonl, plant.txt, manifest.json"),
        words: int = typer.Option(16, "--words", min=4, help="words per canary (random common English words)"),
        plant_share: float = typer.Option(0.5, "--plant-share", help="share of canaries to plant (0 < s < 1)"),
        overwrite: bool = typer.Option(False, "--overwrite", help="replace a canary set already in --out"),
    ) -> None:
        """Make N unique random canaries, each planted or held out by a seeded coin, and a manifest whose sha256
        commits to the set."""
        from curation.canary import CanaryError, make_canaries, write_canaries
        from jobs.kit.identity import tool_version

        if (out / "manifest.json").exists() and not overwrite:
            raise typer.BadParameter(f"{out} already holds a canary set: pass --overwrite or choose another "
                                     "--out (a set that was planted must never be remade)")
        try:
            canaries = make_canaries(n, seed, words, plant_share)
        except CanaryError as exc:
            raise typer.BadParameter(str(exc)) from None
        m = write_canaries(out, canaries, seed=seed, words=words, plant_share=plant_share, tool=tool_version())
        typer.echo(f"{m['n']} canaries ({m['roles']['plant']} to plant, {m['roles']['holdout']} held out) in {out}; "
                   f"commitment sha256 {m['canaries_sha256']}\npublish {out / 'plant.txt'} (not canaries.jsonl)")
