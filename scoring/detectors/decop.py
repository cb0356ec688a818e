"""DE-COP (Duarte et al., ICML 2024): the passage and three paraphrases of it as a four-option question, "which is
verbatim?", asked in K orderings (all 24 by default; each option in each position equally often, so a model that
always answers "A" scores 0.25, chance: that is the position debiasing).

- score=share: the share of parsed answers that pick the passage. An answer is parsed strictly: after optional
  "Answer:" / "The answer is" / "Option", a capital A-D, optionally bracketed, not followed by a letter or digit
  ("A", "(B)", "C.", "Answer: D"); anything else (a refusal, a sentence, junk) is unparsable and left out, and
  counted (run.json → generation.decop_answers). No parsable answer in any ordering: no score.
- score=prob: the mean over orderings of the probability of the passage's letter, the softmax over the four
  letters' log-probabilities at the first generated token that lists any of them (a letter not listed counts as
  -1000, as in Hallinan et al.'s DE-COP baseline); needs a server that returns top log-probabilities of generated
  tokens (the probe says whether it does).
Larger = member."""
import json
import math
import re

from scoring.detectors.base import register
from scoring.generation.kinds import LETTERS, kind_key

ANSWER = re.compile(r"^\s*(?:(?:the\s+)?(?:correct\s+)?(?:answer|option)(?:\s+is)?\s*[:\-]?\s*)?"
                    r"[\(\[]?([ABCD])(?![A-Za-z0-9])", re.IGNORECASE)
SCORES = ("share", "prob")


def decop_kind(params) -> tuple[str, ...]:
    return (kind_key("decop", orderings=int(params["orderings"])),)


def parse_letter(answer: str) -> str | None:
    """The answer's letter, or None where it has none by the strict rule above (a lower-case letter is a word)."""
    m = ANSWER.match(answer or "")
    return m.group(1) if m and m.group(1).isupper() else None


def letter_probability(top_logprobs_json: str | None, letter: str) -> float | None:
    """P(letter) among A-D at the first generated token whose top log-probabilities list a letter, or None."""
    for top in json.loads(top_logprobs_json or "[]"):
        letters = {}
        for token, lp in top.items():
            t = token.strip()
            if len(t) == 1 and t in LETTERS and t not in letters:
                letters[t] = lp
        if letters:
            values = {k: letters.get(k, -1000.0) for k in LETTERS}
            peak = max(values.values())
            total = sum(math.exp(v - peak) for v in values.values())
            return math.exp(values[letter] - peak) / total
    return None


@register("decop", input="generations", needs=decop_kind, orderings=24, optional={"score": "share"})
def decop(row, gens, orderings, score):
    """Share of the K orderings in which the model picks the verbatim passage (or its mean probability)."""
    if score not in SCORES:
        raise ValueError(f"decop score must be one of {SCORES}; got {score!r}")
    answers = gens[decop_kind({"orderings": orderings})[0]]
    if score == "prob":
        probs = [p for p in (letter_probability(a["top_logprobs"], a["target"]) for a in answers) if p is not None]
        return sum(probs) / len(probs) if probs else float("nan")
    picked = [parse_letter(a["text"]) for a in answers]
    parsed = [(p, a["target"]) for p, a in zip(picked, answers) if p is not None]
    return sum(p == t for p, t in parsed) / len(parsed) if parsed else float("nan")
