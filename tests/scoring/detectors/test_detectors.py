"""Every detector against values worked out by hand on a tiny, hand-made token-stats example.

Text A has 5 predicted positions with log-probs -1..-5; its numbers are small enough to check on paper. The
expected values are written as the arithmetic that produces them, not as outputs copied from the code.
"""
from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from scoring.detectors import REGISTRY, Method, parse_method, parse_methods
from scoring.detectors.dc_pdd import TOKEN_FREQ, count_tokens, laplace_frequency
from scoring.detectors.tag_tab import entity_spans, word_entropy
from scoring.lm.tokenstats import TokenStats
from scoring.lm.views import LOWERCASE, PREFIXED, REF, pac_view, stable_seed, swap_augment

LP_A = [-1.0, -2.0, -3.0, -4.0, -5.0]


def stats(*rows: dict) -> TokenStats:
    return TokenStats.from_records([{"id": f"r{i}", **r} for i, r in enumerate(rows)])


def run(spec: str, original: TokenStats, **views) -> np.ndarray:
    return parse_method(spec)(original, views)


def test_registry_holds_every_detector_of_the_issue():
    expected = {"loss", "zlib", "lowercase", "ref", "min_k", "min_k_pp", "max_k", "pac", "tag_tab", "dc_pdd", "recall"}
    assert expected <= set(REGISTRY)
    assert {m.name for m in parse_methods("all")} == {n for n, d in REGISTRY.items()
                                                      if d.input == "token_stats" and not d.opt_in}


def test_method_specs_parse_params_and_name_columns():
    m = parse_method("pac@k1=0.1@n=3")
    assert m.params["k1"] == 0.1 and m.params["n"] == 3 and m.params["k2"] == 0.3
    assert m.column == "pac@k1=0.1,k2=0.3,n=3,ratio=0.3,seed=0"
    assert m.needs == tuple(pac_view(0.3, 0, j) for j in range(3))
    assert parse_method("loss").column == "loss"
    with pytest.raises(ValueError, match="unknown detector"):
        parse_method("nope")
    with pytest.raises(ValueError, match="unknown parameter"):
        parse_method("min_k@q=1")


def test_loss_is_mean_log_prob():
    assert run("loss", stats({"lp": LP_A}, {"lp": [-0.5, -1.5]})) == pytest.approx([-3.0, -1.0])


def test_min_k_takes_the_lowest_fraction_with_at_least_one_token():
    s = stats({"lp": LP_A})
    assert run("min_k@k=0.2", s) == pytest.approx([-5.0])  # 20% of 5 = 1 token
    assert run("min_k@k=0.4", s) == pytest.approx([(-5 - 4) / 2])
    assert run("min_k@k=0.1", s) == pytest.approx([-5.0])  # int(0.5) = 0 → at least one


def test_max_k_takes_the_highest_fraction():
    assert run("max_k@k=0.4", stats({"lp": LP_A})) == pytest.approx([(-1 - 2) / 2])


def test_min_k_pp_standardises_by_the_models_own_distribution():
    mu = [-2.0] * 5
    sigma = [1.0, 1.0, 1.0, 1.0, 2.0]
    # z = (lp - mu) / sigma = [1, 0, -1, -2, -1.5]; the lowest 40% (2 tokens) are -2 and -1.5.
    assert run("min_k_pp@k=0.4", stats({"lp": LP_A, "mu": mu, "sigma": sigma})) == pytest.approx([-1.75])


def test_min_k_pp_survives_a_one_hot_distribution():
    out = run("min_k_pp@k=1.0", stats({"lp": [0.0], "mu": [0.0], "sigma": [0.0]}))
    assert np.isfinite(out).all() and out[0] == 0.0


def test_zlib_divides_mean_log_prob_by_compressed_size():
    text = "abc"
    size = len(zlib.compress(b"abc"))
    assert size == 11  # zlib: 2-byte header + 5-byte deflate block + 4-byte adler32
    assert run("zlib", stats({"lp": LP_A, "text": text})) == pytest.approx([-3.0 / 11])


def test_lowercase_is_the_ratio_of_mean_log_probs():
    low = stats({"lp": [-6.0, -6.0]})
    assert run("lowercase", stats({"lp": LP_A}), **{LOWERCASE: low}) == pytest.approx([-6.0 / -3.0])


def test_ref_is_the_difference_of_mean_log_probs():
    assert run("ref", stats({"lp": LP_A}), **{REF: stats({"lp": [-1.0, -1.0, -1.0]})}) == pytest.approx([-3 - (-1)])


def test_pac_is_polarised_distance_minus_its_mean_over_copies():
    # L(z) = top 20% (1 token: -1) − bottom 40% (2 tokens: mean(-5, -4) = -4.5) = 3.5
    # copy 0: all -2 → L = 0; copy 1: [-1, -1, -3, -3, -3] → -1 − (-3) = 2; mean = 1 → PAC = 2.5
    views = {pac_view(0.3, 0, 0): stats({"lp": [-2.0] * 5}),
             pac_view(0.3, 0, 1): stats({"lp": [-1.0, -1.0, -3.0, -3.0, -3.0]})}
    assert run("pac@k1=0.2@k2=0.4@n=2", stats({"lp": LP_A}), **views) == pytest.approx([2.5])


def test_recall_is_conditional_over_unconditional_log_likelihood_on_the_same_tokens():
    # The prefixed view also predicts the text's first token (-9); it is dropped so both means cover tokens 1..5.
    pre = stats({"lp": [-9.0, -2.0, -4.0, -6.0, -8.0, -10.0], "first_predicted": 0})
    assert run("recall", stats({"lp": LP_A}), **{PREFIXED: pre}) == pytest.approx([-6.0 / -3.0])


def test_con_recall_contrasts_the_two_prefixes_over_the_unconditional_log_likelihood():
    # LL(x) = -3 (text A). With the non-member prefix the text's tokens 1..5 average -6; with the member prefix
    # -4 (each view's own prediction of the first token, -9 and -7, is dropped as recall drops it).
    nonmember = stats({"lp": [-9.0, -2.0, -4.0, -6.0, -8.0, -10.0], "first_predicted": 0})
    member = stats({"lp": [-7.0, -2.0, -3.0, -4.0, -5.0, -6.0], "first_predicted": 0})
    views = {"prefixed:nonmember:10": nonmember, "prefixed:member:10": member}
    assert run("con_recall", stats({"lp": LP_A}), **views) == pytest.approx([(-6.0 - 0.5 * -4.0) / -3.0])
    assert run("con_recall@gamma=0", stats({"lp": LP_A}), **views) == pytest.approx(
        run("recall", stats({"lp": LP_A}), **{PREFIXED: nonmember}))  # gamma 0 is ReCaLL
    assert parse_method("con_recall@shots=3").needs == ("prefixed:nonmember:3", "prefixed:member:3")


def test_gradnorm_negates_the_mean_over_tensors_of_the_chosen_norm():
    # two tensors: inf-norms 2 and 4, 1-norms 3 and 5, 2-norms 1 and 7 (the grad view's layout: inf, 1, 2)
    grad = stats({"grad_norms": [2.0, 4.0, 3.0, 5.0, 1.0, 7.0]})
    text = stats({"lp": LP_A})
    assert run("gradnorm", text, grad=grad) == pytest.approx([-3.0])
    assert run("gradnorm@p=1", text, grad=grad) == pytest.approx([-4.0])
    assert run("gradnorm@p=2", text, grad=grad) == pytest.approx([-4.0])
    assert math.isnan(run("gradnorm", text, grad=stats({}))[0])  # a row whose gradient failed: no score
    with pytest.raises(ValueError, match="p must be one of"):
        run("gradnorm@p=3", text, grad=grad)


def test_dc_pdd_caps_probability_times_inverse_log_frequency_over_first_occurrences():
    # Targets (token_ids[1:]) are 1, 2, 1, 3, 4 with lp -1..-5; the repeated "1" at position 2 is skipped.
    counts = np.array([0, 3, 1, 0, 0])  # total 4, |V| = 5 → f = (c + 1) / 9
    f = {1: 4 / 9, 2: 2 / 9, 3: 1 / 9, 4: 1 / 9}
    alpha = [math.exp(-1) * -math.log(f[1]), math.exp(-2) * -math.log(f[2]),
             math.exp(-4) * -math.log(f[3]), math.exp(-5) * -math.log(f[4])]
    expected = sum(min(a, 0.1) for a in alpha) / 4
    s = stats({"lp": LP_A, "token_ids": [0, 1, 2, 1, 3, 4]})
    assert run("dc_pdd@a=0.1", s, **{TOKEN_FREQ: counts}) == pytest.approx([expected])
    assert alpha[0] > 0.1 and alpha[1] > 0.1 and alpha[2] < 0.1  # the cap is exercised


def test_laplace_frequency_and_token_counts():
    counts = count_tokens([[1, 1, 2], [4, 9]], vocab_size=5)  # 9 is outside the vocabulary and ignored
    assert counts.tolist() == [0, 2, 1, 0, 1]
    assert laplace_frequency(counts, np.array([1, 3, 7])).tolist() == pytest.approx([3 / 9, 1 / 9, 1 / 9])


# ---- Tag&Tab -----------------------------------------------------------------------------------------------
# "cat the sat. dog of ran." with one token per word/period; offsets are each token's first character.
TAG_TEXT = "cat the sat. dog of ran."
TAG_OFFSETS = [0, 4, 8, 11, 13, 17, 20, 23]
TAG_LP = [-2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0]  # predictions of tokens 1..7: the, sat, ., dog, of, ran, .


def test_word_entropy_prefers_frequent_words_below_one_over_e():
    assert word_entropy("the") > word_entropy("cat") > 0
    assert word_entropy("qzxqzxqzx") == 0.0


def test_tag_tab_averages_each_sentences_top_entropy_words_then_sentences():
    s = stats({"lp": TAG_LP, "text": TAG_TEXT, "offsets": TAG_OFFSETS, "token_ids": list(range(8))})
    # K=1: sentence 1 keeps "the" (lp -2), sentence 2 keeps "of" (lp -6) → mean(-2, -6) = -4
    assert run("tag_tab@k=1@min_words=1@ner=none", s) == pytest.approx([-4.0])
    # K=2: sentence 1 keeps "the", then "cat" — the first token, which nothing predicts, so only -2 counts;
    # sentence 2 keeps "of" and "dog" → mean(-6, -5); overall mean(-2, -5.5)
    assert run("tag_tab@k=2@min_words=1@ner=none", s) == pytest.approx([(-2.0 + -5.5) / 2])


def test_tag_tab_drops_short_sentences_when_long_ones_exist():
    s = stats({"lp": TAG_LP, "text": TAG_TEXT, "offsets": TAG_OFFSETS, "token_ids": list(range(8))})
    assert run("tag_tab@k=1@min_words=3@ner=none", s) == pytest.approx([-4.0])  # both sentences have 3 words
    assert run("tag_tab@k=1@min_words=4@ner=none", s) == pytest.approx([-4.0])  # none long enough → all used


def test_tag_tab_capitalised_fallback_adds_entities():
    text = "cat Paris the dog."
    assert entity_spans(text, "capitalized") == [(4, 9)]
    s = stats({"lp": [-1.0, -7.0, -2.0, -3.0], "text": text, "offsets": [0, 4, 10, 14, 17],
               "token_ids": list(range(5))})
    # K=1 picks "the" (token 2: -7); the capitalised, non-initial "Paris" (token 1: -1) joins as an entity.
    assert run("tag_tab@k=1@min_words=1@ner=capitalized", s) == pytest.approx([(-7.0 + -1.0) / 2])
    assert run("tag_tab@k=1@min_words=1@ner=none", s) == pytest.approx([-7.0])


# ---- conventions ----------------------------------------------------------------------------------------------
def test_larger_means_member_for_likelihood_detectors():
    member = {"lp": [-0.5] * 5, "mu": [-1.0] * 5, "sigma": [1.0] * 5, "text": "same text"}
    non_member = {"lp": [-4.0] * 5, "mu": [-1.0] * 5, "sigma": [1.0] * 5, "text": "same text"}
    s = stats(member, non_member)
    for spec in ("loss", "zlib", "min_k", "max_k", "min_k_pp"):
        out = run(spec, s)
        assert out[0] > out[1], spec


def test_empty_stats_give_nan_not_a_crash():
    s = stats({"lp": [], "text": ""})
    for spec in ("loss", "min_k", "max_k", "min_k_pp", "zlib"):
        assert np.isnan(run(spec, s)).all(), spec


def test_swap_augment_is_seeded_and_keeps_the_multiset():
    ids = list(range(20))
    a = swap_augment(ids, 0.3, seed=stable_seed(0, "x", 1))
    b = swap_augment(ids, 0.3, seed=stable_seed(0, "x", 1))
    c = swap_augment(ids, 0.3, seed=stable_seed(0, "x", 2))
    assert a.tolist() == b.tolist() and a.tolist() != c.tolist()
    assert sorted(a.tolist()) == ids and a.tolist() != ids
    assert swap_augment([5], 0.3, 0).tolist() == [5]


def test_method_call_returns_float64_per_text():
    out = Method("loss")(stats({"lp": LP_A}, {"lp": [-1.0]}), {})
    assert out.dtype == np.float64 and out.shape == (2,)
