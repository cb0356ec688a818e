"""Prompt kinds: what a text-only method asks about one benchmark row. A detector names the kinds it reads
(`needs`), by key (`continuation@prefix=0.5`), and detectors that read the same kind share its generations
(`ngram_coverage`, `creativity_index` and `samia` read one set of sampled continuations).

  continuation@prefix=P   the passage's first P of its words; `samples` sampled continuations, compared with the
                          rest of the passage (the `target`)
  paraphrase              DE-COP's three paraphrases of the passage, in one greedy-ish answer (temperature 0.1);
                          or made locally by a rewriter (the jobs layer passes them in)
  decop@orderings=K       the four-option question (the passage and its three paraphrases) in K orderings, each
                          option in each position equally often; greedy, a few tokens; target: the passage's letter
  name_cloze@ner=N        the passage with its one name masked (names found by N: auto, spacy or rule), greedy;
                          target: the name

Seeds depend on the job's seed, the row id, the kind and the sample only (never on the part), so a rerun asks
exactly the same requests and finds them in the journal.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from scoring.generation.names import cloze
from scoring.generation.prompts import DEFAULTS, render
from scoring.generation.requests import GenRequest, failed_row
from scoring.generation.text import split_passage, word_count
from scoring.lm.views import stable_seed

LETTERS = "ABCD"
PARAPHRASE_TEMPERATURE = 0.1  # DE-COP's paraphrases (Claude at 0.1; Hallinan et al.'s baseline the same)
ANSWER_TOKENS = 4  # DE-COP's answer: a letter, maybe bracketed or after "Answer:"
NAME_TOKENS = 12  # "<name>Gatsby</name>"


@dataclass(frozen=True)
class Settings:
    """How the job samples (its flags) and what the server honours (the probe)."""

    chat: bool = False
    samples: int = 10
    max_new_tokens: int | None = None  # None: per row, the reference's length in tokens
    temperature: float = 1.0
    top_p: float = 0.95
    seed: int = 0
    n_ok: bool = True  # the server returns n choices for `n`
    seed_ok: bool = True  # the server accepts `seed`
    top_p_ok: bool = True
    logprobs_ok: bool = False  # the server returns top log-probabilities of generated tokens
    prompts: dict = field(default_factory=lambda: {k: dict(v) for k, v in DEFAULTS.items()})

    def template(self, kind: str) -> str:
        return self.prompts[kind]["chat" if self.chat else "completion"]


def kind_key(name: str, **params) -> str:
    if not params:
        return name
    return name + "@" + ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                 for k, v in sorted(params.items()))


def parse_kind(key: str) -> tuple[str, dict[str, str]]:
    name, _, rest = key.partition("@")
    return name, dict(p.split("=", 1) for p in rest.split(",") if p)


def estimate_tokens(text: str) -> int:
    """Prompt tokens where no tokenizer is given: UTF-8 bytes / 3, rounded up (above the ~4 bytes a token that
    English BPE vocabularies average, so a budget holds)."""
    return math.ceil(len(text.encode("utf-8")) / 3)


def _seed(s: Settings, rid: str, kind: str, sample: int) -> int | None:
    return stable_seed("generate", s.seed, rid, kind, sample) % (2**31 - 1) if s.seed_ok else None


def _sampled(s: Settings, rid: str, kind: str, prompt: str, max_tokens: int, target: str, info: dict
             ) -> list[GenRequest]:
    """`s.samples` sampled answers: one request with n where the server honours it, else one seeded request each."""
    base = GenRequest(rid, kind, 0, s.samples, prompt, max_tokens, s.temperature, target,
                      top_p=s.top_p if s.top_p_ok else None, info=info)
    if s.n_ok or s.samples == 1:
        return [replace(base, seed=_seed(s, rid, kind, 0))]
    return [replace(base, first_sample=i, n=1, seed=_seed(s, rid, kind, i)) for i in range(s.samples)]


def continuation(rid: str, text: str, kind: str, s: Settings, count_tokens: Callable[[str], int] | None):
    """The continuation requests of a row, or the reason it has none."""
    prefix = float(parse_kind(kind)[1].get("prefix", 0.5))
    prompt_text, reference, keep = split_passage(text, prefix)
    if not keep:
        return "too_short: a passage of fewer than 2 words has no continuation to compare with"
    max_tokens = s.max_new_tokens or max(1, count_tokens(reference) if count_tokens else
                                         math.ceil(1.5 * word_count(reference)))
    prompt = render(s.template("continuation"), prefix=prompt_text)
    return _sampled(s, rid, kind, prompt, max_tokens, reference, {"prefix_words": keep})


def paraphrase(rid: str, text: str, s: Settings, count_tokens: Callable[[str], int] | None):
    size = count_tokens(text) if count_tokens else math.ceil(1.5 * word_count(text))
    prompt = render(s.template("paraphrase"), passage=text)
    return [GenRequest(rid, "paraphrase", 0, 1, prompt, 3 * size + 48, PARAPHRASE_TEMPERATURE, "",
                       seed=_seed(s, rid, "paraphrase", 0))]


_LABELLED = re.compile(r"(Example ([A-Z]):\s*)(.*?)(?=\n\nExample [A-Z]:|$)", re.S)
_LABELLED_LOOSE = re.compile(r"(Example ([A-Z]):\s*)(.*?)(?=Example [A-Z]:|$)", re.S)


def parse_paraphrases(answer: str, completion: bool) -> list[str]:
    """The paraphrases labelled B, C and D in an answer (DE-COP's parse: the strict pattern, then a looser one
    without bold markers). A completion prompt ends in "Example B:", so its answer starts inside B."""
    text = ("Example B: " + answer) if completion else answer
    found = {m.group(2): m.group(3).strip().removesuffix("---").strip() for m in _LABELLED.finditer(text)}
    if len([k for k in "BCD" if k in found]) != 3:
        loose = text.replace("**", "")
        found = {m.group(2): m.group(3).strip() for m in _LABELLED_LOOSE.finditer(loose)}
    return [found[k] for k in "BCD" if found.get(k)]


def usable_paraphrases(text: str, candidates: Sequence[str]) -> list[str]:
    """Paraphrases that can stand as distractors: non-empty, not the passage, not each other (after spacing and
    case). DE-COP repeats or reuses the original when fewer than three parse; here such a row is not asked, since
    two identical options make the question unanswerable."""
    norm = lambda t: " ".join(t.split()).lower()  # noqa: E731
    seen, out = {norm(text)}, []
    for c in candidates:
        if c and c.strip() and norm(c) not in seen:
            seen.add(norm(c))
            out.append(c.strip())
    return out[:3]


def orderings(k: int, seed: int, rid: str) -> list[tuple[int, ...]]:
    """K orderings of (passage=0, paraphrases 1-3): all 24 for K=24, else K/4 of the six rotation classes
    (seeded by row), each class's four rotations putting every option in every position once."""
    every = list(itertools.permutations(range(4)))
    if k == 24:
        return every
    if k % 4 or not 4 <= k <= 24:
        raise ValueError(f"decop orderings must be 4, 8, 12, 16, 20 or 24; got {k}")
    classes = sorted({min(tuple(p[i:] + p[:i]) for i in range(4)) for p in every})
    import random

    chosen = random.Random(stable_seed("decop-orderings", seed, rid)).sample(classes, k // 4)
    return [tuple(c[i:] + c[:i]) for c in chosen for i in range(4)]


def decop(rid: str, text: str, kind: str, paraphrases: Sequence[str], s: Settings):
    k = int(parse_kind(kind)[1].get("orderings", 24))
    passages = [text, *paraphrases]
    out = []
    for j, order in enumerate(orderings(k, s.seed, rid)):
        options = "".join(f"{LETTERS[p]}. {passages[o]}\n" for p, o in enumerate(order))
        prompt = render(s.template("decop"), options=options, source=s.prompts["decop"]["source"])
        out.append(GenRequest(rid, kind, j, 1, prompt, ANSWER_TOKENS, 0.0, LETTERS[order.index(0)],
                              seed=_seed(s, rid, kind, j), logprobs=5 if s.logprobs_ok else 0,
                              info={"order": list(order)}))
    return out


def name_cloze(rid: str, text: str, kind: str, s: Settings):
    c = cloze(text, parse_kind(kind)[1].get("ner", "auto"))
    if c.reason:
        return c.reason
    prompt = render(s.template("name_cloze"), passage=c.masked)
    return [GenRequest(rid, kind, 0, 1, prompt, NAME_TOKENS, 0.0, c.name, seed=_seed(s, rid, kind, 0))]


def first_phase(rid: str, text: str, kinds: Sequence[str], s: Settings,
                count_tokens: Callable[[str], int] | None = None, local_paraphrases: bool = False
                ) -> tuple[list[GenRequest], list[dict]]:
    """(requests, rows for kinds the row is not asked) of everything that needs no earlier answer; DE-COP's
    question waits for the paraphrases (`second_phase`)."""
    requests, skipped = [], []
    for kind in kinds:
        name = parse_kind(kind)[0]
        if name == "continuation":
            got = continuation(rid, text, kind, s, count_tokens)
        elif name == "name_cloze":
            got = name_cloze(rid, text, kind, s)
        elif name == "decop":
            if local_paraphrases or any(r.kind == "paraphrase" for r in requests):
                continue
            got = paraphrase(rid, text, s, count_tokens)
        else:
            raise ValueError(f"unknown prompt kind {kind!r}")
        if isinstance(got, str):
            skipped.append(failed_row(rid, kind, got))
        else:
            requests.extend(got)
    return requests, skipped


def second_phase(rid: str, text: str, kinds: Sequence[str], paraphrase_rows: Sequence[dict], s: Settings
                 ) -> tuple[list[GenRequest], list[dict]]:
    """DE-COP's questions, once the row's paraphrases are known (from the served model or a local rewriter)."""
    requests, skipped = [], []
    for kind in (k for k in kinds if parse_kind(k)[0] == "decop"):
        answered = [r for r in paraphrase_rows if r["sample"] >= 0]
        if not answered:
            why = next((r["error"] for r in paraphrase_rows if r.get("error")), "no paraphrase answer")
            skipped.append(failed_row(rid, kind, f"decop_paraphrases: {why}"))
            continue
        if answered[0]["endpoint"] in ("completions", "chat"):
            found = parse_paraphrases(answered[0]["text"], completion=answered[0]["endpoint"] == "completions")
        else:
            found = [r["text"] for r in answered]
        usable = usable_paraphrases(text, found)
        if len(usable) < 3:
            skipped.append(failed_row(rid, kind, f"decop_paraphrases: {len(usable)} of 3 usable paraphrases"))
            continue
        requests.extend(decop(rid, text, kind, usable, s))
    return requests, skipped
