"""The neighbourhood attack's neighbours (Mattern et al., 2023): texts one word away from a passage, which a
masked LM finds plausible. The detector (scoring/detectors/neighbour.py) compares the target model's loss on the
passage with its mean loss on these.

Generation, per passage (scoring/lm/mlm.py does the MLM part):
  1. every word the MLM holds as one token is a slot;
  2. for each slot, the slot's input embedding goes through dropout (p = 0.7 by default; the rest of the text is
     untouched) and the MLM proposes its top 10 whole words other than the original; a candidate's score is
     p(candidate) / (1 - p(original)) at that slot, as in the paper's code;
  3. the n best (slot, candidate) pairs over the whole passage, by score, each give one neighbour: the passage
     with that one word swapped (ties broken by slot, then word, so the order is total).
The dropout masks are seeded by (seed, passage id, slot), so a passage's neighbours do not depend on the batch it
came in, the worker, or a resume. A passage with fewer than n candidate swaps has fewer neighbours: the missing
views carry the error `no_neighbour` and the score averages over those that exist.

Neighbours are made where the target model runs (the scorer actor, on its GPU when it has one), after the CPU
stage's tokenising, and join the other views in the same batched forward passes: cost per passage = 1 + n target
passes, plus one MLM pass per slot.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from scoring.lm.views import encode, parse_neighbour_view, stable_seed

NO_NEIGHBOUR = "no_neighbour"
CANDIDATES_PER_SLOT = 10  # as in the paper's code (its top-k over the vocabulary, less the original)


@dataclass(frozen=True)
class NeighbourSettings:
    dropout: float
    seed: int
    n: int  # neighbours per passage: the highest view index + 1 across the requested views


def settings_of(views: Sequence[str]) -> NeighbourSettings | None:
    """The generation settings the requested `nbr:` views imply (one setting per job)."""
    parsed = [parse_neighbour_view(v) for v in views if v.startswith("nbr:")]
    if not parsed:
        return None
    kinds = {(d, s) for d, s, _ in parsed}
    if len(kinds) > 1:
        raise ValueError(f"one neighbour setting per job, got dropout/seed pairs {sorted(kinds)}")
    (dropout, seed), = kinds
    return NeighbourSettings(dropout, seed, 1 + max(j for _, _, j in parsed))


def neighbours(mlm, rid: str, text: str, settings: NeighbourSettings) -> list:
    """The passage's neighbours, best first: `Substitute`s (scoring/lm/mlm.py), at most `settings.n`."""
    ids, slots = mlm.encode(text)
    seeds = [stable_seed("neighbour", settings.seed, rid, s.token) for s in slots]
    per_slot = mlm.substitutes(ids, slots, top=CANDIDATES_PER_SLOT, mode="dropout", dropout=settings.dropout,
                               seeds=seeds)
    ranked = sorted((c for cands in per_slot for c in cands), key=lambda c: (-c.score, c.slot.start, c.word))
    return ranked[: settings.n]


class NeighbourViews:
    """Adds the `nbr:` view rows to a tokenised batch (columns of scoring/views.TOKEN_COLUMNS): for each original
    row, its neighbours' texts tokenised by the target's tokenizer. Runs on the scorer actor."""

    def __init__(self, mlm_path: str, views: Sequence[str], target_tokenizer, device: str = "cpu"):
        from scoring.lm.mlm import MaskedLM

        self.views = [v for v in views if v.startswith("nbr:")]
        self.settings = settings_of(self.views)
        self.mlm = MaskedLM(mlm_path, device=device)
        self.tokenizer = target_tokenizer

    def __call__(self, cols: dict) -> dict:
        rows = [dict(zip(cols, vals)) for vals in zip(*cols.values())]
        extra = []
        for r in rows:
            if r["view"] != "original":
                continue
            found = [] if r.get("error") else neighbours(self.mlm, str(r["id"]), r["text"] or "", self.settings)
            encoded = encode(self.tokenizer, [s.apply(r["text"]) for s in found]) if found else []
            for view in self.views:
                j = parse_neighbour_view(view)[2]
                row = {"id": r["id"], "view": view, "text": None, "token_ids": [], "offsets": None,
                       "first_predicted": 1, "prefix_len": None, "error": None}
                if j < len(found):
                    text = found[j].apply(r["text"])
                    row.update(text=text, token_ids=encoded[j][0], offsets=encoded[j][1])
                else:
                    row["error"] = (f"{NO_NEIGHBOUR}: the MLM offered {len(found)} one-word swap(s)"
                                    if not r.get("error") else r["error"])
                extra.append(row)
        if not extra:
            return cols
        return {c: list(cols[c]) + [e.get(c) for e in extra] for c in cols}


def swap_of(original: str, neighbour: str) -> tuple[int, str, str]:
    """Where a neighbour differs from its passage: (char offset, original word, replacement), found from the
    common prefix and suffix (one word differs), for neighbours.parquet."""
    a = 0
    while a < min(len(original), len(neighbour)) and original[a] == neighbour[a]:
        a += 1
    while a > 0 and original[a - 1].isalpha():  # back to the start of the word
        a -= 1
    b = 0
    while (b < min(len(original), len(neighbour)) - a and original[len(original) - 1 - b] == neighbour[len(neighbour) - 1 - b]):
        b += 1
    while b > 0 and original[len(original) - b].isalpha():
        b -= 1
    return a, original[a: len(original) - b], neighbour[a: len(neighbour) - b]
