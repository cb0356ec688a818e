"""Canaries (copyright traps) that a text owner plants before publishing and tests later (Zhang et al., SaTML 2025;
Meeus et al., ICML 2024): N unique random sequences, each assigned `plant` or `holdout` by a seeded coin. The owner
publishes the planted half inside their documents and never publishes the holdout half; later, planted canaries
that score as more member-like than held-out ones, under a one-sided rank test, are evidence of training with a
false-positive rate equal to the p-value, whatever the text distribution, because the coin decided which half
was published.

Files (`make_canaries`, written by `tidemark canary make`):
    canaries.jsonl   {"id", "text", "role"} per canary, in id order
    plant.txt        only the canaries to publish, one per line
    manifest.json    generator (random words, or a local LM's samples: its files' digests and the temperature),
                     seed, n, words per canary, plant share, and the sha256 of canaries.jsonl: a
                     commitment the owner can publish or timestamp before planting
`load_canaries` refuses, before any scoring, a file that does not match its manifest's digest (edited after
`make`), a missing or unknown role, a duplicate id or an empty text.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

GENERATOR_WORDS = "words"
VOCABULARY = 20_000  # the most frequent English words (wordfreq, bundled: no download), lowercase letters only
ROLES = ("plant", "holdout")
PLANTING_NOTE = """How to plant these canaries
- Publish each line of this file inside your documents (for example once per page, or in a footer), exactly as
  written. Repetition makes a canary easier to detect: trap sequences of 25-100 tokens needed about 1,000
  repetitions to be detected in a 1.3B-parameter model (Meeus et al., 2024); longer and repeated canaries help.
- Never publish the holdout canaries in canaries.jsonl (role "holdout"): they are the test's control. Keep
  canaries.jsonl and manifest.json private until the test; publish or timestamp manifest.json's canaries_sha256
  now, so that the canaries can be shown to predate the model.
"""


class CanaryError(ValueError):
    """A canary set that cannot be tested as it is (edited, incomplete or malformed)."""


def vocabulary(size: int = VOCABULARY) -> list[str]:
    from wordfreq import top_n_list

    return [w for w in top_n_list("en", size * 2) if re.fullmatch(r"[a-z]{3,}", w)][:size]


def make_canaries(n: int, seed: int, words: int = 16, plant_share: float = 0.5, *, lm: str | None = None,
                  temperature: float = 1.0) -> list[dict]:
    """N canaries of `words` words, ids canary-00000.., roles from a seeded coin (exactly round(n * plant_share)
    planted, chosen by a seeded shuffle, so both halves are non-empty for n >= 2). The words are random vocabulary
    words, or, with `lm` (a local model directory), the model's samples at `temperature` (curation/canary_lm.py)."""
    if n < 2:
        raise CanaryError("at least 2 canaries are needed: one planted and one held out")
    if not 0 < plant_share < 1:
        raise CanaryError("--plant-share must be between 0 and 1")
    rng = random.Random(seed)
    if lm:
        from curation.canary_lm import sample_texts

        try:
            texts = sample_texts(lm, n, words, seed, temperature)
        except (OSError, ValueError) as exc:
            raise CanaryError(f"--generator lm:{lm}: {exc}") from None
    else:
        vocab = vocabulary()
        texts, seen = [], set()
        while len(texts) < n:
            text = " ".join(rng.choice(vocab) for _ in range(words))
            if text not in seen:  # unique sequences; at 20k^16 collisions do not happen, but the check is cheap
                seen.add(text)
                texts.append(text)
    roles = draw_roles(n, rng, plant_share)
    return [{"id": f"canary-{i:05d}", "text": t, "role": r} for i, (t, r) in enumerate(zip(texts, roles))]


def draw_roles(n: int, rng: random.Random, plant_share: float = 0.5) -> list[str]:
    """The coin: exactly round(n * plant_share) of n canaries planted (at least one of each role), chosen by a
    shuffle from `rng`. make_canaries draws with it, and the null bench re-draws with it."""
    planted = max(1, min(n - 1, round(n * plant_share)))
    order = list(range(n))
    rng.shuffle(order)
    plant = set(order[:planted])
    return ["plant" if i in plant else "holdout" for i in range(n)]


def canaries_bytes(canaries: list[dict]) -> bytes:
    return "".join(json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n" for c in canaries).encode("utf-8")


def write_canaries(out: Path, canaries: list[dict], *, seed: int, words: int, plant_share: float,
                   tool: str, generator: dict | None = None) -> dict:
    """canaries.jsonl, plant.txt and manifest.json (written last): the manifest's digest commits to the set."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = canaries_bytes(canaries)
    (out / "canaries.jsonl").write_bytes(data)
    plant = [c["text"] for c in canaries if c["role"] == "plant"]
    note = "\n".join(f"# {line}" if line else "#" for line in PLANTING_NOTE.strip().split("\n"))
    (out / "plant.txt").write_text(note + "\n\n" + "\n".join(plant) + "\n")
    made_by = generator or {"generator": GENERATOR_WORDS, "vocabulary": f"wordfreq top {VOCABULARY} English words"}
    manifest = {**made_by, "seed": seed, "n": len(canaries), "words": words, "plant_share": plant_share,
                "roles": {r: sum(c["role"] == r for c in canaries) for r in ROLES},
                "canaries_sha256": hashlib.sha256(data).hexdigest(), "tool": tool}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def load_canaries(path: Path) -> tuple[list[dict], dict]:
    """A canary set's rows and manifest, refused with the reason when it cannot be tested as made."""
    path = Path(path)
    data_path, manifest_path = path / "canaries.jsonl", path / "manifest.json"
    if not data_path.is_file() or not manifest_path.is_file():
        raise CanaryError(f"{path}: expected canaries.jsonl and manifest.json (from `tidemark canary make`)")
    data = data_path.read_bytes()
    manifest = json.loads(manifest_path.read_text())
    digest = hashlib.sha256(data).hexdigest()
    if digest != manifest.get("canaries_sha256"):
        raise CanaryError(f"{data_path} does not match its manifest (sha256 {digest[:12]}... against "
                          f"{str(manifest.get('canaries_sha256'))[:12]}...): the set was edited after it was made, "
                          "so the test's guarantee no longer holds")
    rows, seen = [], set()
    for n, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("role") not in ROLES:
            raise CanaryError(f"{data_path}:{n}: role {row.get('role')!r}; expected one of {ROLES}")
        if not str(row.get("text") or "").strip():
            raise CanaryError(f"{data_path}:{n}: empty text")
        if row.get("id") in seen:
            raise CanaryError(f"{data_path}:{n}: duplicate id {row.get('id')!r}")
        seen.add(row.get("id"))
        rows.append(row)
    missing = [r for r in ROLES if not any(row["role"] == r for row in rows)]
    if missing:
        raise CanaryError(f"{data_path}: no {missing[0]} canary: the test compares planted with held-out ones")
    return rows, manifest
