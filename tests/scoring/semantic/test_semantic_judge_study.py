"""The judge study's arithmetic (bench/semantic_judge_study.py) on hand-made pairs, without a model: each rule's
flag per pair, the tallies with their Clopper-Pearson intervals, the sample and queue, and the per-role summary."""
from __future__ import annotations

from bench.semantic_judge_study import (draw_sample, eligible, queue, render_md, rule_flags, scaled, seconds_per_pair,
                                        summarise, tally)
from scoring.stats.proportions import clopper_pearson_ci

# (id, role, decision score, the judge's verdict or None when it was not asked)
SIX = [("p1", "wordnet", 1.2, "yes"),  # flagged by both
       ("p2", "smollm2", 0.7, "yes"),  # a near miss the judge rescues
       ("p3", "wordnet", 1.0, "unparsed"),  # flagged by the verifier, vetoed (unparsed is not a yes)
       ("n1", "negative", 1.5, "no"),  # a verifier false flag the judge vetoes
       ("n2", "negative", 0.3, None),  # below the lower bar: never judged, never flagged
       ("z1", "null", 0.6, None)]  # eligible but not judged (the budget): the judge's rules cannot say
EXPECTED = {"p1": (True, True, True, True), "p2": (False, True, False, True), "p3": (True, False, False, False),
            "n1": (True, False, False, False), "n2": (False, None, False, False), "z1": (False, None, False, None)}


def pairs():
    return [{"id": i, "role": r, "decision_score": s} for i, r, s, _ in SIX]


def verdicts():
    return {i: v for i, _, _, v in SIX if v is not None}


def test_each_rule_flags_each_pair_as_the_overlap_command_would():
    for i, _, score, verdict in SIX:
        f = rule_flags(score, verdict)
        assert (f["verifier"], f["judge"], f["verifier_and_judge"], f["overlap_rule"]) == EXPECTED[i], i


def test_the_lower_bar_is_half_the_threshold():
    assert eligible(0.5) and eligible(1.0) and not eligible(0.49) and not eligible(0.0, threshold=0.0)
    assert eligible(1.0, threshold=2.0) and not eligible(0.9, threshold=2.0)


def test_tallies_count_only_the_pairs_a_rule_decides():
    t = tally(pairs(), verdicts())
    assert {r: (p["k"], p["n"]) for r, p in t.items()} == {
        "verifier": (3, 6), "judge": (2, 4), "verifier_and_judge": (1, 6), "overlap_rule": (2, 5)}
    lo, hi = clopper_pearson_ci(2, 5)
    assert t["overlap_rule"]["rate"] == 0.4 and t["overlap_rule"]["ci95"] == [round(lo, 4), round(hi, 4)]
    empty = tally([], {})
    assert empty["judge"] == {"k": 0, "n": 0, "rate": None, "ci95": None}


def test_scaling_to_the_whole_role_multiplies_rate_and_bounds():
    s = scaled({"k": 2, "n": 5, "rate": 0.4, "ci95": [0.05, 0.85]}, 0.5)
    assert s == {"rate": 0.2, "ci95": [0.025, 0.425], "eligible_share": 0.5}
    assert scaled({"k": 0, "n": 0, "rate": None, "ci95": None}, 0.5)["rate"] is None


def rows():
    """Two positives per rephraser, ten negatives and ten null: scores 0.0, 0.1, ... 0.9 plus flagged ones."""
    out = [{"id": f"{r}{k}", "role": r, "input": "Ann has 3 apples and 4 pears. How many fruits?",
            "passage": "x Ann owns 3 apples plus 4 pears; how many fruits in all? y" if k else "no numbers here",
            "decision_score": 1.0 if k else 0.2, "cosine": 0.8} for r in ("wordnet", "smollm2") for k in range(2)]
    for r in ("negative", "null"):
        out += [{"id": f"{r}{k}", "role": r, "input": "Bo has 5 cats. How many legs?", "passage": "text",
                 "decision_score": k / 10, "cosine": 0.5} for k in range(10)]
        out.append({"id": f"{r}-flag", "role": r, "input": "Bo has 5 cats. How many legs?", "passage": "Bo 5",
                    "decision_score": 1.1, "cosine": 0.7})
    return out


def test_the_sample_prefers_eligible_pairs_and_adds_every_verifier_flag():
    cfg = {"positives": None, "negatives": 3, "null": 3, "extras": True, "seed": 0}
    s = draw_sample(rows(), cfg)
    assert draw_sample(rows(), cfg) == s  # seeded
    by = {(p["role"], p["how"]) for p in s}
    assert {p["id"] for p in s if p["how"] == "positive"} == {"wordnet0", "wordnet1", "smollm20", "smollm21"}
    for r in ("negative", "null"):
        drawn = [p for p in s if p["role"] == r and p["how"] == "sample"]
        assert len(drawn) == 3 and all(eligible(p["decision_score"]) for p in drawn)
        assert f"{r}-flag" in {p["id"] for p in s if p["role"] == r}  # sampled or extra
    assert ("negative", "sample") in by
    q = queue(s, 0)
    assert sorted(p["id"] for p in q) == sorted(p["id"] for p in s)
    flagged = [p["decision_score"] >= 1.0 for p in q]
    assert flagged == sorted(flagged, reverse=True)  # the verifier-flagged pairs first
    few = draw_sample(rows(), cfg | {"negatives": 8})  # 6 eligible of 11: topped up from the rest
    assert sum(p["role"] == "negative" and p["how"] == "sample" for p in few) == 8


def test_the_summary_per_role_without_a_model():
    rs = rows()
    cfg = {"positives": None, "negatives": 4, "null": 4, "extras": True, "seed": 1}
    s = draw_sample(rs, cfg)
    answer = {"negative-flag": "No.", "null-flag": "Yes, it does."}
    answers = {p["id"]: {"answer": answer.get(p["id"], "Yes" if p["role"] in ("wordnet", "smollm2") else "The"),
                         "kind": "math", "seconds": 1.0, "prompt_tokens": 300, "completion_tokens": 8} for p in s}
    out = summarise(rs, s, answers)
    assert out["wordnet"]["rules"]["verifier"]["k"] == 1 and out["wordnet"]["rules"]["judge"]["k"] == 2
    assert out["wordnet"]["rules"]["overlap_rule"]["k"] == 1  # the score-0.2 positive is never judged
    assert out["wordnet"]["by_window"]["window_lacks_a_number"]["n"] == 1
    neg, null = out["negative"], out["null"]
    assert (neg["rules"]["verifier"]["k"], neg["rules"]["verifier"]["n"]) == (1, 11)  # over the whole role
    assert neg["rules"]["verifier_and_judge"]["k"] == 0 and null["rules"]["verifier_and_judge"]["k"] == 1
    assert neg["verifier_flagged_vetoed"] == {"verifier_flagged": 1, "judged": 1, "judge_yes": 0, "vetoed": 1}
    assert neg["overlap_rule_over_role"]["eligible_share"] == round(6 / 11, 4)
    assert neg["verdicts"]["unparsed"] + neg["verdicts"]["no"] == neg["sample"]["judged"]
    res = {"config": {"model": "smollm2", "max_new_tokens": 8, "threshold": 1.0, "lower_bar": 0.5},
           "pairs_file": {"path": "p.jsonl", "rows": len(rs), "sha256": "0", "mtime": "t", "snapshot": "s.jsonl"},
           "cache": "c.jsonl", "judge_run": {"asked_now": 0, "cached": len(s), "left_out_by_budget": 0,
                                             "budget_s": 600.0, "failed_now": 0, "load_seconds": None},
           "seconds_per_pair": seconds_per_pair(answers), "roles": out}
    md = render_md(res)
    assert "(d) overlap rule" in md and "unparsed" in md
