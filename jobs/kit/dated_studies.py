"""The controlled cutoff studies' files (scoring/studies/dated.py makes the texts): `dated.jsonl` (what `tidemark
cutoff --texts` reads: id, text, date, source, and group for versions), `truth.json` (the month the model read
last, and which rows it trained on) and the tiny GPT-2 trained on them, saved where `load_causal_lm` reads it."""
from __future__ import annotations

import json
from pathlib import Path

from scoring.cutoff.periods import month_label, month_of
from scoring.studies.dated import cutoff_study, versions_study
from scoring.studies.known_membership import KNOWN_MEMBERSHIP_TRAINING

DATED_FIELDS = ("id", "text", "date", "source", "group")


def write_dated(study, out_dir: Path, name: str = "dated.jsonl") -> Path:
    path = out_dir / name
    with open(path, "w") as fh:
        for r in study.rows:
            fh.write(json.dumps({k: r[k] for k in DATED_FIELDS if k in r}) + "\n")
    return path


def truth(study) -> dict:
    return {"cutoff": None if study.cutoff is None else month_label(study.first_month + study.cutoff),
            "first": month_label(study.first_month), "last": month_label(study.first_month + study.months - 1),
            "trained_ids": sorted(r["id"] for r in study.rows if r["trained"]), **study.facts}


def build_study(out_dir: str | Path, *, kind: str = "cutoff", first: str = "2020-01", months: int = 18,
                cutoff: int | None = 10, train_steps: int = 400, seed: int = 0, train: dict | None = None,
                model_dir: str = "model", threads: int | None = 1, **study_kwargs) -> dict:
    """Write a study (kind `cutoff`: new documents of two sources; `versions`: one document set's monthly versions)
    and train its model with `threads` torch threads (one: a tiny model gains nothing from more, and two stall on
    a busy 2-core machine); returns the paths and the truth."""
    from jobs.kit.studies import train_tiny_gpt2
    from scoring.studies.contamination import torch_threads

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    make = cutoff_study if kind == "cutoff" else versions_study
    study = make(first_month=month_of(first), months=months, cutoff=cutoff, seed=seed, **study_kwargs)
    dated = write_dated(study, out)
    facts = truth(study)
    (out / "truth.json").write_text(json.dumps(facts, indent=1))
    with torch_threads(threads):
        record = train_tiny_gpt2(study.train_texts, out / model_dir, tokenizer_texts=study.tokenizer_texts,
                                 steps=train_steps, seed=seed, **{**KNOWN_MEMBERSHIP_TRAINING, **(train or {})})
    return {"dated": str(dated), "model": record["path"], "train": record, "truth": facts, "rows": study.rows}
