"""Embedding + verifier + LLM judge in the rephrased-contamination study (issue 57): what `overlap --semantic`'s
optional judge (scoring/semantic/judge.py, jobs/parts/overlap/semantic_judge.py) does to the study's decided pairs.

Input: bench/results/_work/semantic_decided_pairs.jsonl, written by bench/semantic_study.py: for every query its
decided pair (the benchmark item and its best corpus window by decision score), with the role of the query (wordnet
and smollm2: items whose rephrase was planted, the positives; negative: benchmark items never planted; null: items
in no document), the window's cosine and the verifier's decision score.

Sample (seeded): every positive that has a passage; `negatives` negatives and `null` null items drawn uniformly from
those a judge would be sent under semantic_judge's score rule (decision score above 0 and at least LOWER_BAR x the
threshold: 0.5 at threshold 1.0), topped up from the rest only if too few qualify; plus every verifier-flagged
negative or null item the draw missed (`extra`: few, judged so that rule (c) is exact over the whole role). The
abstain clause of judge.to_judge (too few anchors, cosine >= the floor) needs the verifier's verdict, which the pairs
file does not hold; it is left out here.

Judge: SmolLM2-135M-Instruct (`make smollm2`) served by scoring/api/loopback.py on 127.0.0.1 (its chat endpoint,
the model's chat template, greedy), asked through the path `overlap --semantic --judge-model` uses:
semantic_judge.judge_request (judge.kind_of + judge.messages) sent by scoring/generation's RequestRunner over
scoring/api/client's CompletionsClient, one request at a time; the answer read by judge.parse_verdict. Only the
sampling length differs: MAX_NEW_TOKENS (8) new tokens instead of judge.MAX_TOKENS, since the verdict is the first
word. Answers are cached in bench/results/_work/semantic_judge_cache.jsonl keyed by the request's digest (the
messages, sampling and served model name: generation/requests.GenRequest.key), so a rerun pays only for pairs not
yet asked; `--budget-s` caps the seconds of generation one run spends (pairs past it stay unjudged and are left out
of the rules that need their verdict). The queue puts the verifier-flagged pairs first (rule (c) needs their
verdicts), then the rest interleaved across roles in a seeded order, so a budget cut leaves a balanced subsample.

Rules (threshold 1.0), per pair (`rule_flags`):
  (a) verifier:            decision score >= threshold
  (b) judge:               the judge says yes (only pairs it was asked about)
  (c) verifier_and_judge:  (a) and the judge says yes: the judge can only veto
  (d) overlap_rule:        the overlap command's rule: a pair is judged when its score is >= LOWER_BAR x threshold,
                           flagged iff the verdict is yes (judge.rephrased); a pair not judged is not flagged
Reported per role with exact 95% Clopper-Pearson intervals: recall on the positives per rephraser, false flags on
the negatives, the flag rate on the null. For negatives and null (a) and (c) are exact over the whole role (every
verifier-flagged pair is judged); (b) and (d) are measured on the uniform sample of the judge-eligible pairs, and
(d) is also scaled to the whole role (the eligible share is known for every pair; ineligible pairs are never
flagged under (d)).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Sequence

from bench.semantic_measure import proportion
from bench.semantic_judge_report import POSITIVE_ROLES, RULE_LABELS, RULES, ROLES, TINY, render_md  # noqa: F401

WORK = Path(__file__).resolve().parent / "results" / "_work"
PAIRS = WORK / "semantic_decided_pairs.jsonl"
CACHE = WORK / "semantic_judge_cache.jsonl"
SNAPSHOT = WORK / "semantic_judge_pairs.jsonl"  # the pairs a run read: the study rewrites PAIRS (its --quick too)
THRESHOLD = 1.0
MAX_NEW_TOKENS = 8
VERDICTS = ("yes", "no", "unparsed")
FULL = {"positives": None, "negatives": 200, "null": 200, "extras": True, "budget_s": 600.0, "seed": 0}
QUICK = {"positives": 3, "negatives": 3, "null": 3, "extras": False, "budget_s": 60.0, "seed": 0}


def log(msg: str) -> None:
    print(f"[semantic_judge_study] {msg}", file=sys.stderr, flush=True)


# ---- the arithmetic (pure: tests/scoring/semantic/test_semantic_judge_study.py) ----------------------------------
def eligible(score: float, threshold: float = THRESHOLD) -> bool:
    """Whether semantic_judge would send the pair to the judge by its score (judge.to_judge's score clause)."""
    from scoring.semantic.judge import LOWER_BAR

    return score > 0.0 and score >= threshold * LOWER_BAR


def rule_flags(score: float, verdict: str | None, threshold: float = THRESHOLD) -> dict[str, bool | None]:
    """Each rule's flag for one pair; None where the rule needs a verdict the pair does not have."""
    from scoring.semantic.judge import rephrased

    v = score >= threshold
    judged = verdict is not None
    yes = verdict == "yes"
    if eligible(score, threshold):
        overlap = rephrased(v, verdict) if judged else None
    else:
        overlap = rephrased(v, None)  # not judged: the verifier's decision, never a flag below the lower bar
    return {"verifier": v,
            "judge": yes if judged else None,
            "verifier_and_judge": (yes if judged else None) if v else False,
            "overlap_rule": overlap}


def tally(pairs: Iterable[dict], verdicts: dict, threshold: float = THRESHOLD) -> dict[str, dict]:
    """rule -> proportion of pairs flagged among those where the rule is decided (pairs: dicts with id, score)."""
    flags = [rule_flags(p["decision_score"], verdicts.get(p["id"]), threshold) for p in pairs]
    out = {}
    for rule in RULES:
        vals = [f[rule] for f in flags if f[rule] is not None]
        out[rule] = proportion(sum(vals), len(vals))
    return out


def scaled(p: dict, share: float) -> dict:
    """A rate measured on the eligible pairs, over the whole role (ineligible pairs are never flagged)."""
    if not p["n"]:
        return {"rate": None, "ci95": None, "eligible_share": round(share, 4)}
    return {"rate": round(p["rate"] * share, 4), "ci95": [round(x * share, 4) for x in p["ci95"]],
            "eligible_share": round(share, 4)}


# ---- the data -----------------------------------------------------------------------------------------------------
def read_pairs(path: Path) -> tuple[list[dict], dict]:
    raw = path.read_bytes()
    rows = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    ids = Counter(r["id"] for r in rows)
    if max(ids.values(), default=1) > 1:
        raise ValueError(f"{path}: ids repeat ({ids.most_common(1)})")
    return rows, {"path": rel(path), "rows": len(rows), "sha256": hashlib.sha256(raw).hexdigest()[:16],
                  "mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(path.stat().st_mtime))}


def draw_sample(rows: Sequence[dict], cfg: dict, threshold: float = THRESHOLD) -> list[dict]:
    """The pairs to judge, each tagged `how`: positive | sample | extra (see the module docstring)."""
    rng = random.Random(cfg["seed"])
    out = []
    for role in POSITIVE_ROLES:
        pos = [r for r in rows if r["role"] == role and r.get("passage")]
        out += [r | {"how": "positive"} for r in (pos if cfg["positives"] is None else pos[:cfg["positives"]])]
    for role, n in (("negative", cfg["negatives"]), ("null", cfg["null"])):
        pool = [r for r in rows if r["role"] == role and r.get("passage")]
        good = [r for r in pool if eligible(r["decision_score"], threshold)]
        rest = [r for r in pool if not eligible(r["decision_score"], threshold)]
        chosen = rng.sample(good, min(n, len(good)))
        if len(chosen) < n:
            chosen += rng.sample(rest, min(n - len(chosen), len(rest)))
        taken = {r["id"] for r in chosen}
        out += [r | {"how": "sample"} for r in chosen]
        if cfg.get("extras", True):
            out += [r | {"how": "extra"} for r in pool if r["id"] not in taken and r["decision_score"] >= threshold]
    return out


def queue(sample: Sequence[dict], seed: int, threshold: float = THRESHOLD) -> list[dict]:
    """Judging order: the verifier-flagged pairs first, then the rest round-robin over the roles, each role's own
    order shuffled with the seed."""
    rng = random.Random(seed + 1)
    first = [p for p in sample if p["decision_score"] >= threshold]
    by_role = {r: [p for p in sample if p["role"] == r and p["decision_score"] < threshold] for r in ROLES}
    for v in by_role.values():
        rng.shuffle(v)
    rest, i = [], 0
    while any(i < len(v) for v in by_role.values()):
        rest += [v[i] for v in by_role.values() if i < len(v)]
        i += 1
    return first + rest


def says_same(answer: str) -> bool:
    """A lenient reading of an answer that is not a verdict: it claims the passage holds the same problem ("The
    passage contains the same math problem: ...") and does not start with no. Not the command's rule (that is
    judge.parse_verdict); reported only to show whether a looser parser would have rescued the judge."""
    from scoring.semantic.judge import parse_verdict

    return "same" in answer.lower() and parse_verdict(answer) != "no"


def numbers_kept(item: str, passage: str) -> bool:
    """Whether the passage holds every number of the item (a planted rephrase keeps them all: a positive whose
    decided window lacks one is most likely not its planted window)."""
    from scoring.semantic.anchors import numbers

    return numbers(item) <= numbers(passage or "")


# ---- the judge ----------------------------------------------------------------------------------------------------
def read_cache(path: Path) -> dict[str, dict]:
    out = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                out[rec["key"]] = rec
    return out


def requests_for(pairs: Sequence[dict]) -> list:
    from jobs.parts.overlap.semantic_judge import judge_request
    from scoring.semantic.judge import kind_of

    return [replace(judge_request(p["id"], kind_of(p["input"]), p["input"], p["passage"]), max_tokens=MAX_NEW_TOKENS)
            for p in pairs]


def judge_pairs(pairs: Sequence[dict], cfg: dict, model: str, cache_path: Path, api_base: str | None = None) -> dict:
    """Ask the judge about each pair the cache lacks until the budget is spent; id -> cache record for every pair
    answered (now or before), and the run's stats. Without `api_base`, `model` is a local causal LM (a path or
    scoring/lm/model.py alias) that the loopback server serves under that name; with it, the served model's name on
    that OpenAI-compatible server (key from $OPENAI_API_KEY, as `overlap --judge-api-key-env` defaults)."""
    import os

    from scoring.semantic.judge import prompt_digest

    served_name = model
    reqs = requests_for(pairs)
    keys = [r.key(True, served_name) for r in reqs]
    known = read_cache(cache_path)
    missing = [(p, r, k) for p, r, k in zip(pairs, reqs, keys) if k not in known]
    stats = {"pairs": len(pairs), "cached": len(pairs) - len(missing), "asked_now": 0, "failed_now": 0,
             "generation_seconds_now": 0.0, "load_seconds": None, "budget_s": cfg["budget_s"],
             "left_out_by_budget": 0, "server": "loopback (127.0.0.1)" if api_base is None else "served",
             "path": "HTTP /v1/chat/completions <- CompletionsClient <- RequestRunner"}
    if missing and cfg["budget_s"] > 0:
        import torch

        from scoring.api.client import ApiConfig, CompletionsClient
        from scoring.api.loopback import LoopbackServer
        from scoring.generation.runner import RequestRunner

        torch.set_num_threads(1)
        server = None
        if api_base is None:
            t0 = time.perf_counter()
            server = LoopbackServer(model, name=served_name, lifetime_s=cfg["budget_s"] + 900).start()
            stats["load_seconds"] = round(time.perf_counter() - t0, 1)
        api = ApiConfig(base=server.url if server else api_base, model=served_name, mode="none", method="generate",
                        concurrency=1, timeout_s=300.0)
        key_value = None if server else os.environ.get("OPENAI_API_KEY")
        runner = RequestRunner(CompletionsClient(api, key_value, endpoint="chat/completions"), chat=True,
                               model=served_name, concurrency=1)
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with cache_path.open("a") as f:
                for n, (p, req, key) in enumerate(missing):
                    if stats["generation_seconds_now"] >= cfg["budget_s"]:
                        break
                    t = time.perf_counter()
                    row = runner.run([req])[0]
                    secs = time.perf_counter() - t
                    stats["generation_seconds_now"] += secs
                    if row["sample"] < 0:  # refused: not cached, asked again next run
                        stats["failed_now"] += 1
                        log(f"{p['id']}: {row['error']}")
                        continue
                    kind = req.kind.split(":", 1)[1]
                    rec = {"key": key, "id": p["id"], "role": p["role"], "kind": kind,
                           "prompt_digest": prompt_digest(kind), "model": model, "served_name": served_name,
                           "max_tokens": req.max_tokens, "temperature": req.temperature, "answer": row["text"],
                           "prompt_tokens": row["prompt_tokens"], "completion_tokens": row["completion_tokens"],
                           "seconds": round(secs, 3)}
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    f.flush()
                    known[key] = rec
                    stats["asked_now"] += 1
                    if (n + 1) % 20 == 0:
                        mean = stats["generation_seconds_now"] / (n + 1)
                        log(f"{n + 1} of {len(missing)} asked, {mean:.2f} s a pair")
        finally:
            runner.close()
            if server is not None:
                server.stop()
    answered = {}
    for p, key in zip(pairs, keys):
        if key in known:
            answered[p["id"]] = known[key]
        else:
            stats["left_out_by_budget"] += 1
    stats["generation_seconds_now"] = round(stats["generation_seconds_now"], 1)
    return {"answers": answered, "stats": stats}


# ---- the study ----------------------------------------------------------------------------------------------------
def summarise(rows: Sequence[dict], sample: Sequence[dict], answers: dict[str, dict],
              threshold: float = THRESHOLD) -> dict:
    from scoring.semantic.judge import parse_verdict

    verdicts = {i: parse_verdict(a["answer"]) for i, a in answers.items()}
    out: dict = {}
    for role in ROLES:
        pop = [r for r in rows if r["role"] == role]
        mine = [p for p in sample if p["role"] == role]
        core = [p for p in mine if p["how"] in ("positive", "sample")]
        judged = [p for p in core if p["id"] in verdicts]
        n_elig = sum(eligible(r["decision_score"], threshold) for r in pop)
        ver_flagged = [r for r in pop if r["decision_score"] >= threshold]
        block = {"population": {"n": len(pop), "with_passage": sum(bool(r.get("passage")) for r in pop),
                                "judge_eligible": n_elig, "verifier_flagged": len(ver_flagged)},
                 "sample": {"n": len(core), "eligible": sum(eligible(p["decision_score"], threshold) for p in core),
                            "judged": len(judged), "extra_judged": sum(p["id"] in verdicts for p in mine
                                                                      if p["how"] == "extra")},
                 "verdicts": {v: sum(verdicts[p["id"]] == v for p in judged) for v in VERDICTS},
                 "kinds": dict(Counter(answers[p["id"]]["kind"] for p in judged)),
                 "says_same": proportion(sum(says_same(answers[p["id"]]["answer"]) for p in judged), len(judged)),
                 "top_answers": Counter(" ".join(answers[p["id"]]["answer"].split())[:60] for p in judged
                                        ).most_common(5)}
        sample_rules = tally(core, verdicts, threshold)
        if role in POSITIVE_ROLES:  # the sample is the role: every rule as measured
            block["rules"] = sample_rules
            split = {}
            for kept in (True, False):
                sub = [p for p in core if numbers_kept(p["input"], p["passage"]) == kept]
                split["window_has_all_numbers" if kept else "window_lacks_a_number"] = {
                    "n": len(sub), "verifier": tally(sub, verdicts, threshold)["verifier"],
                    "judge": tally(sub, verdicts, threshold)["judge"]}
            block["by_window"] = split
        else:
            # (a) and (c): exact over the role (every verifier-flagged pair is judged, others are never flagged)
            ver_judged = [r for r in ver_flagged if r["id"] in verdicts]
            yes = sum(verdicts[r["id"]] == "yes" for r in ver_judged)
            both = proportion(yes, len(pop)) if len(ver_judged) == len(ver_flagged) else None
            share = n_elig / len(pop) if pop else 0.0
            eligible_core = [p for p in core if eligible(p["decision_score"], threshold)]
            on_sample = tally(eligible_core, verdicts, threshold)
            block["rules"] = {"verifier": proportion(len(ver_flagged), len(pop)), "judge": on_sample["judge"],
                              "verifier_and_judge": both, "overlap_rule": on_sample["overlap_rule"]}
            block["overlap_rule_over_role"] = scaled(on_sample["overlap_rule"], share)
            block["verifier_flagged_vetoed"] = {"verifier_flagged": len(ver_flagged), "judged": len(ver_judged),
                                                "judge_yes": yes, "vetoed": len(ver_judged) - yes}
            block["rules_on_sample"] = sample_rules
        out[role] = block
    return out


def seconds_per_pair(answers: dict[str, dict]) -> dict:
    secs = sorted(a["seconds"] for a in answers.values())
    if not secs:
        return {"n": 0}
    toks = [a["prompt_tokens"] or 0 for a in answers.values()]
    return {"n": len(secs), "mean": round(sum(secs) / len(secs), 3), "median": secs[len(secs) // 2],
            "p90": secs[min(len(secs) - 1, int(0.9 * len(secs)))], "total": round(sum(secs), 1),
            "prompt_tokens_mean": round(sum(toks) / len(toks), 1),
            "completion_tokens_mean": round(sum(a["completion_tokens"] or 0 for a in answers.values()) / len(secs), 2)}


def rel(path: Path) -> str:
    """A path under the repository as written from its root, others as they are."""
    root = Path(__file__).resolve().parents[1]
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return str(path)


def run(cfg: dict, pairs_path: Path = PAIRS, cache_path: Path = CACHE, model: str = "smollm2",
        snapshot: Path | None = SNAPSHOT, api_base: str | None = None) -> dict:
    from scoring.semantic.judge import LOWER_BAR, MAX_TOKENS, TEMPERATURE, prompt_digest, KINDS

    rows, source = read_pairs(pairs_path)
    if snapshot is not None and pairs_path.resolve() != snapshot.resolve():  # kept: rerun with --pairs SNAPSHOT
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        snapshot.write_bytes(pairs_path.read_bytes())
    source["snapshot"] = rel(snapshot) if snapshot is not None else None
    sample = draw_sample(rows, cfg)
    order = queue(sample, cfg["seed"])
    log(f"{len(rows)} pairs read; {len(order)} to judge ({dict(Counter(p['role'] for p in order))})")
    judged = judge_pairs(order, cfg, model, cache_path, api_base)
    answers = judged["answers"]
    return {"config": cfg | {"threshold": THRESHOLD, "lower_bar": THRESHOLD * LOWER_BAR,
                             "max_new_tokens": MAX_NEW_TOKENS, "judge_module_max_tokens": MAX_TOKENS,
                             "temperature": TEMPERATURE, "prompt_digests": {k: prompt_digest(k) for k in KINDS},
                             "model": model, "api_base": api_base},
            "pairs_file": source, "cache": rel(cache_path), "judge_run": judged["stats"],
            "seconds_per_pair": seconds_per_pair(answers),
            "roles": summarise(rows, sample, answers)}


# ---- the report ---------------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    from bench.common import environment, write_results

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--quick", action="store_true", help="a few pairs per role, to check the plumbing")
    ap.add_argument("--budget-s", type=float, default=None, help="seconds of judge generation this run may spend")
    ap.add_argument("--pairs", default=str(PAIRS))
    ap.add_argument("--cache", default=str(CACHE))
    ap.add_argument("--model", default="smollm2", help="the local causal LM the loopback server serves, or with "
                    "--api-base the served model's name")
    ap.add_argument("--api-base", default=None, help="an OpenAI-compatible server (http://HOST:PORT/v1) to judge "
                    "with instead of the loopback server; key from $OPENAI_API_KEY")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.budget_s is not None:
        cfg["budget_s"] = args.budget_s
    if args.seed is not None:
        cfg["seed"] = args.seed
    pairs = Path(args.pairs)
    if not pairs.is_file():
        log(f"{pairs} is missing: run python -m bench.semantic_study first")
        return 2
    t0 = time.perf_counter()
    snapshot = SNAPSHOT.with_name(SNAPSHOT.stem + "_quick.jsonl") if args.quick else SNAPSHOT
    result = run(cfg, pairs, Path(args.cache), args.model, snapshot, args.api_base)
    result["wall_seconds"] = round(time.perf_counter() - t0, 1)
    result["command"] = "python -m bench.semantic_judge_study " + " ".join(
        argv if argv is not None else sys.argv[1:])
    result["environment"] = environment("cpu")
    write_results(args.out, "semantic_judge_study_quick" if args.quick else "semantic_judge_study", result, render_md, log)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
