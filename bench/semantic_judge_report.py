"""The judge study's report (bench/semantic_judge_study.py): the tables and what they mean, as markdown."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

# the study's roles and rules, named here so that the study imports its report and not the other way round
POSITIVE_ROLES = ("wordnet", "smollm2")
ROLES = POSITIVE_ROLES + ("negative", "null")
RULES = ("verifier", "judge", "verifier_and_judge", "overlap_rule")
RULE_LABELS = {"verifier": "(a) verifier alone", "judge": "(b) judge alone (judged pairs)",
               "verifier_and_judge": "(c) verifier AND judge", "overlap_rule": "(d) overlap rule (judge decides)"}
TINY = "SmolLM2-135M-Instruct"


def cell(p: dict | None) -> str:
    if not p or not p.get("n"):
        return "n/a"
    lo, hi = p["ci95"]
    return f"{p['k']}/{p['n']} = {p['rate']:.3f} [{lo:.3f}, {hi:.3f}]"


def meaning(res: dict) -> str:
    """The plain reading of the numbers, from the numbers."""
    roles = res["roles"]
    total = Counter()
    for b in roles.values():
        total.update(b["verdicts"])
    n = sum(total.values())
    if not n:
        return "No pair was judged."
    top = Counter()
    for b in roles.values():
        top.update(dict(b["top_answers"]))
    common, k = top.most_common(1)[0]
    pos_yes = sum(roles[r]["verdicts"]["yes"] for r in POSITIVE_ROLES)
    pos_n = sum(sum(roles[r]["verdicts"].values()) for r in POSITIVE_ROLES)
    neg_yes = sum(roles[r]["verdicts"]["yes"] for r in ("negative", "null"))
    neg_n = sum(sum(roles[r]["verdicts"].values()) for r in ("negative", "null"))
    same = {r: roles[r]["says_same"] for r in ROLES}
    tiny = res["config"]["model"] == "smollm2" and not res["config"].get("api_base")
    text = (f"{TINY} is a tiny judge, far below the strong model LLM Decontaminator assumes: these numbers measure "
            f"this model, not the rule. " if tiny else f"Judge: {res['config']['model']}. ")
    text += (f"Of its {n} verdicts on the sampled pairs, {total['unparsed']} ({total['unparsed'] / n:.0%}) are "
             f"`unparsed` (the answer does not start with yes/no/true/false; the most common answer is `{common}`, "
             f"{k} times), which judge.parse_verdict counts as not rephrased; {total['yes']} are yes and "
             f"{total['no']} no. It says yes to {pos_yes} of {pos_n} planted rephrases and to {neg_yes} of {neg_n} "
             "pairs that hold no rephrase (negatives and null). ")
    if total["yes"] == 0:
        text += ("Since it never says yes, every rule that needs its yes flags nothing: (b), (c) and (d) have zero "
                 "recall and zero false flags, and the judge vetoes every one of the verifier's flags, true or false. ")
    elif pos_n and neg_n and abs(pos_yes / pos_n - neg_yes / neg_n) < 0.1:
        text += "Its yes comes as often without a rephrase as with one: it carries next to no information. "
    k_pos, n_pos = (sum(same[r][x] for r in POSITIVE_ROLES) for x in ("k", "n"))
    k_neg, n_neg = (sum(same[r][x] for r in ("negative", "null")) for x in ("k", "n"))
    if n_pos and n_neg:
        rates = ", ".join(f"{r} {same[r]['rate']:.0%}" for r in ROLES if same[r]["n"])
        if k_pos / n_pos - k_neg / n_neg < 0.1:
            text += ("A looser parser would not rescue it: the answers that claim the passage holds \"the same\" "
                     "problem (the lenient reading below) come as often for pairs without a rephrase as for planted "
                     f"ones ({rates}): the model repeats the prompt's wording, it does not compare the texts. ")
        else:
            text += (f"A looser reading (answers claiming \"the same\" problem, below) separates them somewhat "
                     f"({rates}); the command does not read answers that way. ")
    text += ("Under (c) a judge can only remove the verifier's flags, and under (d) only its yes flags, so the rules "
             "are only as good as the model's yes. They are what a served model plugs into (`overlap --semantic "
             "--judge-model M --judge-api-base URL`); to know what a judge buys, rerun this study against a capable "
             "served model (`--api-base URL --model NAME`): the prompts, parser, request path and arithmetic here "
             "are the command's own" + (", only the model is a placeholder." if tiny else "."))
    return text


def render_md(res: dict) -> str:
    cfg, roles, js, sp, env = res["config"], res["roles"], res["judge_run"], res["seconds_per_pair"], \
        res.get("environment", {})
    src = res["pairs_file"]
    lines = ["# LLM judge on the rephrased-contamination study's decided pairs (issue 57)", "",
             f"`{res.get('command', 'python -m bench.semantic_judge_study')}`: judge **{cfg['model']}** "
             + (f"served at {cfg['api_base']}" if cfg.get("api_base") else
                f"({TINY if cfg['model'] == 'smollm2' else 'a local model'}) served by scoring/api/loopback.py on "
                "127.0.0.1") + " and asked through "
             "`overlap --semantic`'s own judge path (semantic_judge.judge_request -> RequestRunner -> "
             "CompletionsClient -> /v1/chat/completions; judge.parse_verdict), greedy, "
             f"{cfg['max_new_tokens']} new tokens. Threshold {cfg['threshold']:g}; a pair is sent to the judge when "
             f"its decision score is >= {cfg['lower_bar']:g}. Pairs: `{src['path']}` ({src['rows']} rows, sha256 "
             f"{src['sha256']}, written {src['mtime']}; kept as `{src.get('snapshot')}`).", "",
             "## What this means", "", meaning(res), "", "## Verdicts per role", "",
             "| role | population | judge-eligible (score >= %g) | verifier-flagged | sampled | judged | yes | no | "
             "unparsed |" % cfg["lower_bar"], "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for role, b in roles.items():
        pop, s, v = b["population"], b["sample"], b["verdicts"]
        judged = f"{s['judged']}" + (f" (+{s['extra_judged']} extra)" if s["extra_judged"] else "")
        lines.append(f"| {role} | {pop['n']} | {pop['judge_eligible']} | {pop['verifier_flagged']} | {s['n']} | "
                     f"{judged} | {v['yes']} | {v['no']} | {v['unparsed']} |")
    lines += ["", "Extra: verifier-flagged negatives/null outside the uniform sample, judged so that (c) is exact "
              "over the role; not counted in the verdict columns.", "",
              "## Combined rules (k/n = rate [95% Clopper-Pearson])", "",
              "| rule | recall wordnet | recall smollm2 | false flags, negatives | flag rate, null |",
              "|---|---|---|---|---|"]
    for rule in RULES:
        lines.append(f"| {RULE_LABELS[rule]} | " + " | ".join(cell(roles[r]["rules"][rule]) for r in ROLES) + " |")
    neg, null = roles["negative"], roles["null"]
    lines.append("| (d) scaled to the whole role | | | " + " | ".join(
        "n/a" if b["overlap_rule_over_role"]["rate"] is None else
        f"{b['overlap_rule_over_role']['rate']:.3f} [{b['overlap_rule_over_role']['ci95'][0]:.3f}, "
        f"{b['overlap_rule_over_role']['ci95'][1]:.3f}] (x{b['overlap_rule_over_role']['eligible_share']:.3f} "
        "eligible)" for b in (neg, null)) + " |")
    lines += ["", "Denominators: positives, every planted item of the rephraser (all judged unless the budget cut "
              "some). Negatives and null: (a) and (c) over every item of the role (every verifier-flagged one is "
              "judged; no other can be flagged by them); (b) and (d) over the uniform seeded sample of the "
              "judge-eligible items; the last row scales (d) by the eligible share (an ineligible pair is never "
              "judged, so never flagged).", ""]
    for role in ("negative", "null"):
        vv = roles[role]["verifier_flagged_vetoed"]
        lines.append(f"- {role}: the verifier flags {vv['verifier_flagged']}; the judge was asked about "
                     f"{vv['judged']}, said yes to {vv['judge_yes']} and vetoed {vv['vetoed']}.")
    lines += ["", "Positives by whether the decided window holds every number of the item (a planted rephrase keeps "
              "them all; a window that lacks one is most likely not the planted one, so a judge's yes there is not "
              "a true detection):", "", "| rephraser | window | n | verifier | judge |", "|---|---|---:|---|---|"]
    for role in POSITIVE_ROLES:
        for name, b in roles[role]["by_window"].items():
            lines.append(f"| {role} | {name.replace('_', ' ')} | {b['n']} | {cell(b['verifier'])} | "
                         f"{cell(b['judge'])} |")
    lines += ["", "Lenient reading (not the command's rule): answers that say the passage holds the same problem and "
              "do not start with no: " + "; ".join(f"{r} {cell(roles[r]['says_same'])}" for r in ROLES) + ".",
              "", "Most frequent answers (first 60 characters, whitespace folded):", ""]
    for role, b in roles.items():
        lines.append(f"- {role}: " + "; ".join(f"`{a}` x{n}" for a, n in b["top_answers"]))
    lines += ["", "## Cost", "",
              f"- Judge: {sp.get('n', 0)} answers, {sp.get('mean', 'n/a')} s a pair mean (median "
              f"{sp.get('median', 'n/a')}, p90 {sp.get('p90', 'n/a')}; HTTP round trip included), "
              f"{sp.get('prompt_tokens_mean', 'n/a')} prompt tokens a pair, "
              f"{sp.get('completion_tokens_mean', 'n/a')} new tokens.",
              f"- Generation recorded over all runs: {sp.get('total', 0)} s for the {sp.get('n', 0)} answers.",
              f"- This run: {js['asked_now']} asked now, {js['cached']} from the cache "
              f"(`{Path(res['cache']).name}`), {js['left_out_by_budget']} left out by the budget "
              f"({js['budget_s']:g} s), {js['failed_now']} failed; model load "
              f"{'none' if js['load_seconds'] is None else str(js['load_seconds']) + ' s'}; "
              f"wall {res.get('wall_seconds')} s.",
              f"- Machine: {env.get('device_name')}, torch {env.get('torch')} ({env.get('torch_threads')} thread), "
              f"transformers {env.get('transformers')}, load average {env.get('load_average')} (a shared machine: "
              "the seconds are an upper bound).", "",
              "Not covered: judge.to_judge's abstain clause (the pairs file has no verifier verdict), the code and "
              "knowledge prompts (the study's items are math word problems), and a judge that can answer.", ""]
    return "\n".join(lines)
