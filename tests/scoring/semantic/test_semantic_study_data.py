"""The rephrased-contamination study's data (bench/semantic_items.py, bench/semantic_rephrase.py, the planting in
bench/semantic_study.py), without a model: the item generator (templates, determinism, answers, how rarely two
siblings share a 13-gram), the filters that decide what counts as a rephrased item, the SmolLM2 cache read back
without loading the model, the WordNet rephrases on the hand-made WordNet fixture, and where a plant lands in a
document."""
from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from bench.semantic_items import NAMES, TEMPLATES, generate
from bench.semantic_rephrase import (REASONS, added_numbers, cache_key, llm_rephrases, lost_names, lost_numbers,
                                     quality, reason, shares_ngram, wordnet_rephrases)
from bench.semantic_study import plant
from scoring.overlap.ngrams import text_ngrams

MINI_WORDNET = Path(__file__).resolve().parents[2] / "fixtures" / "wordnet_mini"
ITEM = ("Maria buys 14 notebooks at $3 each and 6 pens at $2 each at the bookshop. Maria pays with a $100 bill. "
        "How much change does Maria get back?")


def test_the_generator_has_many_templates_and_is_seeded():
    assert len(TEMPLATES) >= 25 and len(NAMES) >= 30
    a, b = generate(300, seed=3), generate(300, seed=3)
    assert a == b and a != generate(300, seed=4)
    assert len({x["input"] for x in a}) == 300 and len({x["id"] for x in a}) == 300
    assert {x["template"] for x in a} == set(TEMPLATES)
    for x in a:
        assert set(x) == {"id", "input", "target", "template"}
        assert re.fullmatch(r"#### \d+", x["target"]), x
        assert x["input"].rstrip().endswith("?"), x["input"]
    nums = [int(n.replace(",", "")) for x in a for n in re.findall(r"\d[\d,]*", x["input"])]
    assert sum(n <= 10 for n in nums) > 100 and sum(n >= 100 for n in nums) > 100
    assert len({n for n in NAMES for x in a if n in x["input"]}) >= 30


def test_answers_follow_from_the_numbers():
    by_template = {x["template"]: x for x in generate(90, seed=1)}
    ages = by_template["ages_sum"]["input"]
    x, older = map(int, re.findall(r"\d+", ages)[:2])
    assert by_template["ages_sum"]["target"] == f"#### {x + (x + older) + (x + older) // 2}"
    trip = [int(n) for n in re.findall(r"\d+", by_template["travel_rate"]["input"])]
    assert by_template["travel_rate"]["target"] == f"#### {trip[0] // trip[1] * trip[2]}"


def test_two_siblings_rarely_share_a_13_gram():
    """Hard negatives are other draws of a template: if they shared the template's boilerplate 13-grams with the
    benchmark's items, the verbatim scan would flag items that were never planted."""
    by = defaultdict(list)
    for x in generate(600, seed=2):
        by[x["template"]].append(set(text_ngrams(x["input"], 13)[1].tolist()))
    pairs = shared = 0
    for grams in by.values():
        for i in range(len(grams)):
            for j in range(i + 1, len(grams)):
                pairs += 1
                shared += bool(grams[i] & grams[j])
    assert shared / pairs < 0.015, shared / pairs


def test_the_filters_keep_a_true_rephrase_and_say_why_others_are_dropped():
    good = ("At the bookshop Maria picks up fourteen notebooks costing $3 apiece plus 6 pens for $2 apiece; she hands "
            "over a $100 note. What change is due to her?")
    assert lost_numbers(ITEM, good) == set() and added_numbers(ITEM, good) == set()
    assert reason(ITEM, good) is None and not shares_ngram(ITEM, good)
    assert reason(ITEM, "") == REASONS[0] and reason(ITEM, None) == REASONS[0]
    dropped_a_number = good.replace("fourteen", "some")
    assert lost_numbers(ITEM, dropped_a_number) == {"14"} and reason(ITEM, dropped_a_number) == REASONS[1]
    copied_tail = "Here is one: Maria pays with a $100 bill. How much change does Maria get back? 14, 3, 6 and 2."
    assert shares_ngram(ITEM, copied_tail) and reason(ITEM, copied_tail) == REASONS[2]
    assert reason(ITEM, ITEM) == REASONS[2]
    solved = good + " She pays 14 * 3 + 6 * 2 = 54, so she gets 46 back."
    assert added_numbers(ITEM, solved) == {"54", "46"} and reason(ITEM, solved) is None
    assert lost_names("Tom met Ana in Paris.", "tom met her in paris.") == {"Ana"}


def test_smollm2_outputs_are_read_from_the_cache_without_the_model(tmp_path):
    items = generate(3, seed=0)
    cache = tmp_path / "smollm2.jsonl"
    outputs = [items[0]["input"], "", "A rewrite that keeps no number at all?"]
    cache.write_text("".join(json.dumps({"key": cache_key(it["input"]), "id": it["id"], "input": it["input"],
                                         "output": out, "new_tokens": 5, "seconds": 0.5}) + "\n"
                             for it, out in zip(items[:2], outputs)))
    got, stats = llm_rephrases(items, cache, budget_s=0.0)  # budget 0: the model is never loaded
    assert set(got) == {items[0]["id"], items[1]["id"]}
    assert stats["cached"] == 2 and stats["generated_now"] == 0 and stats["left_out_by_budget"] == 1
    assert got[items[0]["id"]]["reason"] == REASONS[2] and got[items[1]["id"]]["reason"] == REASONS[0]
    q = quality(items, got)
    assert q["n"] == 2 and q["identical"] == 1 and q["kept"] == 0
    assert q["dropped"] == {REASONS[0]: 1, REASONS[1]: 0, REASONS[2]: 1}


def test_wordnet_rephrases_keep_digits_and_carry_their_reason():
    items = [{"id": "a", "input": "The quick dog runs to 12 cities. Happy drivers drive 340 cars quickly.",
              "target": "#### 1", "template": "t"}]
    got = wordnet_rephrases(items, rate=1.0, seed=0, wordnet_dir=str(MINI_WORDNET))["a"]
    assert got["rephrase"] != items[0]["input"] and got["swapped"] > 0
    assert lost_numbers(items[0]["input"], got["rephrase"]) == set()
    assert got["reason"] == reason(items[0]["input"], got["rephrase"])


def test_plants_land_whole_at_the_recorded_word_and_positives_get_their_own_document():
    docs = [[f"w{d}_{i}" for i in range(50)] for d in range(6)]
    positives = [{"id": f"p{i}", "role": "wordnet", "text": f"planted item {i} with\nfive words"} for i in range(4)]
    hard = [{"id": f"h{i}", "role": "hard", "text": f"a sibling {i}"} for i in range(9)]
    out = plant(docs, positives, hard, seed=0)
    texts = {p["id"]: p["text"] for p in positives + hard}
    seen = []
    for d in out:
        words = d["text"].split()
        assert len(words) == d["base_words"] + sum(p["n_words"] for p in d["plants"])
        assert sum(p["role"] != "hard" for p in d["plants"]) <= 1
        for p in d["plants"]:
            assert words[p["start"]:p["start"] + p["n_words"]] == texts[p["id"]].split()
            seen.append(p["id"])
    assert sorted(seen) == sorted(texts)


def test_the_variants_rescore_as_verify_does_and_find_anchor_twins():
    from bench.semantic_variants import _rare, anchor_twins, weighted_recall
    from scoring.semantic.anchors import anchors
    from scoring.semantic.verify import WindowTerms, anchor_weight, verify

    item = anchors("Tom packs 24 pencils into 3 boxes at Lincoln School. How many palindromes?", answer="#### 72")
    window = WindowTerms.of("Lincoln school: tom has 3 boxes of 24 pencils, no palindromes.")
    v = verify(item, window)
    assert weighted_recall(item, window) == (v.score, v.abstain)
    no_rare = WindowTerms.of("Lincoln School: Tom has 3 boxes of 24 pencils.")
    assert weighted_recall(item, no_rare, anchor_weight)[0] < 1.0 == weighted_recall(item, no_rare, _rare(0.0))[0]
    assert weighted_recall(item, no_rare) == (verify(item, no_rare).score, False) == (1.0, False)
    a = {"input": "Today Ana has 12 cats and 3 dogs.", "template": "t"}
    planted = [{"input": "Today Ana has 12 cats, 3 dogs and 40 hens.", "template": "t"},  # a twin: holds them all
               {"input": "Today Bea has 12 cats and 3 dogs.", "template": "u"},  # renamed: the same problem, a twin
               {"input": "Today Ana has 12 cats and 4 dogs.", "template": "v"}]  # another number: another problem
    assert anchor_twins([a, a | {"template": "u"}, a | {"template": "v"}], planted) == [True, True, False]
    assert anchor_twins([a | {"template": "w"}], planted) == [False]  # only a sibling of its own template counts


def test_the_crosslingual_studys_anchor_candidates_and_survival_by_hand():
    import numpy as np

    from bench.semantic_crosslingual import anchor_top, numbers_score, survival
    from scoring.semantic.anchors import anchors
    from scoring.semantic.prefilter import Prefilter
    from scoring.semantic.verify import WindowTerms

    lucas = anchors("Then Lucas had 1,050 stickers and gave 54 to Hiro.")  # 1050: 3, 54: 3, Lucas 2, Hiro 2 = 10
    france = anchors("What is the capital of France?")  # abstains: no candidate by anchors
    # the prefilter's bound counts the one name the verifier may forgive (2) as present: 10 + 2 for the first window
    windows = [WindowTerms.of(t) for t in ("Lucas avait 1\u202f050 autocollants et en donna 54 à Hiro.",  # 12/10
                                           "Il y avait 1050 personnes.",  # 5/10: at the bar, ranked 4th
                                           "卢卡斯有1,050张贴纸, 给了Hiro 54张",  # 1050, 54, Hiro: 10/10
                                           "Lucas avait 1050 et 54 autocollants",  # 10/10, a later window
                                           "Il y avait 54 personnes.")]  # 3 + 2 = 5/10: ranked 5th
    scores, ids = anchor_top(Prefilter([lucas, france], bar=0.5), windows, m=3)
    assert ids[0].tolist() == [0, 2, 3] and np.allclose(scores[0], [1.2, 1.0, 1.0])  # ties: the lower index first
    assert anchor_top(Prefilter([lucas], bar=0.5), windows, m=5)[1][0].tolist() == [0, 2, 3, 1, 4]
    assert ids[1].tolist() == [-1, -1, -1] and np.isneginf(scores[1]).all()
    assert numbers_score(lucas, windows[1]) == 0.5 and numbers_score(lucas, windows[2]) == 1.0
    orig = [{"id": "a", "input": "Then Lucas had 1,050 stickers and gave 54 to Hiro."},
            {"id": "b", "input": "A train covers 120 miles in 2 hours."}]
    got = survival(orig, {"a": "Puis Hugo avait 1 050 autocollants et en donna 54 à Hiro.",  # Lucas -> Hugo; "1 050"
                          "b": "Un train parcourt 193 km en 2 heures."})  # miles -> km: 120 lost
    assert got["every_number"]["k"] == 0 and got["every_name"] == {"k": 0, "n": 1, "rate": 0.0,
                                                                   "ci95": [0.0, 0.975]}
