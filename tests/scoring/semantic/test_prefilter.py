"""The first stage (scoring/semantic/prefilter.py): hand-computed keeps and drops, and the promise it makes, checked
against the verifier itself on random windows."""
import numpy as np
import pytest

from scoring.semantic.anchors import Anchors, anchors
from scoring.semantic.prefilter import Prefilter
from scoring.semantic.verify import WindowTerms, verify

# numbers 1050 and 54 weigh 3 each, the name 2: 8 in all, so a window needs 4 at bar 0.5
LUCAS = Anchors(numbers=frozenset({"1050", "54"}), entities=frozenset({"Hiro"}))
FRANCE = Anchors(entities=frozenset({"France"}))  # weight 2 < MIN_WEIGHT 4: abstains


def keep(item, text, bar=0.5):
    return Prefilter([item], bar).keep(WindowTerms.of(text))


def test_weighted_recall_against_the_bar():
    assert keep(LUCAS, "In 1,050 the king met hiro at dawn.")  # 3 + 2 = 5 >= 4
    assert keep(LUCAS, "Of 1050 coins, 54 were lost.")  # 6
    assert not keep(LUCAS, "He spent 54 dollars.")  # 3 < 4
    assert not keep(LUCAS, "He spent 54 dollars.", bar=0.5) and keep(LUCAS, "He spent 54 dollars.", bar=0.3)
    assert not keep(LUCAS, "Nothing here matches at all.")


def test_abstaining_item_keeps_any_shared_anchor_and_uncovered_items_are_counted():
    pf = Prefilter([FRANCE, Anchors()])
    assert pf.keep(WindowTerms.of("the wine of france is known"))
    assert not pf.keep(WindowTerms.of("the wine of spain is known"))
    assert pf.uncovered == 1


def test_a_multi_word_literal_counts_everywhere():
    item = Anchors(code=frozenset({"hello world", "greet"}))  # 3 + 3; the literal is free, so every window keeps
    assert Prefilter([item]).keep(WindowTerms.of("unrelated text"))
    only_ident = Anchors(code=frozenset({"greet_user", "parse_args"}))
    assert not Prefilter([only_ident]).keep(WindowTerms.of("unrelated text"))
    assert Prefilter([only_ident]).keep(WindowTerms.of("call greet_user() first"))


def test_bar_is_checked():
    with pytest.raises(ValueError, match="bar"):
        Prefilter([LUCAS], bar=0.0)


def test_no_window_the_verifier_would_flag_is_dropped():
    """The promise: for an item that does not abstain, a window whose verifier score is >= bar is kept."""
    rng = np.random.default_rng(0)
    vocab = ("Lucas Hiro Julia Paris Ohio stickers marbles 12 54 1,050 3.5 seven twenty-five sort_by getName the a "
             "of had gave bought and then").split()
    items = [anchors(" ".join(rng.choice(vocab, 12))) for _ in range(40)]
    pf = Prefilter(items, bar=0.5)
    checked = 0
    for _ in range(300):
        terms = WindowTerms.of(" ".join(rng.choice(vocab, 20)))
        verdicts = [verify(a, terms) for a in items]
        if any(not v.abstain and v.score >= 0.5 for v in verdicts):
            checked += 1
            assert pf.keep(terms)
    assert checked > 50


def test_names_of_several_words_and_a_forgivable_name_are_bounded_from_above():
    """A name's words each bring their share of its weight, and a name the verifier may forgive counts everywhere:
    the prefilter's recall is then an upper bound of the verifier's, never below it."""
    item = anchors("There are 20 students in Leila's homeroom at Oakwood Middle School, and 40% of them ride.")
    pf = Prefilter([item], bar=0.5)  # 10 in all (20: 3, 40: 3, two names: 2 each), 2 of it forgivable: free
    assert pf.free[0] == 2.0 and pf.total[0] == 10.0
    got = pf.found(WindowTerms.of("Oakwood had 20 pupils"))  # 3 + 2/3 (a third of the school's name) + 2 free
    assert np.isclose(got[0], 3 + 2 / 3 + 2) and verify(item, "Oakwood had 20 pupils").score == 0.3
    assert pf.keep(WindowTerms.of("Oakwood had 20 pupils"))  # 5.67 >= 5: kept, though the verifier says 0.3
    assert not pf.keep(WindowTerms.of("Oakwood had pupils"))  # 2.67 < 5
    weak = anchors("Ana and Ben met Carl at Dover in 3 days.")  # numbers weigh 1: no name can be forgiven
    assert Prefilter([weak]).free[0] == 0.0
