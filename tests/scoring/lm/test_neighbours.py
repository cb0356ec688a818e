"""The neighbourhood attack (scoring/lm/neighbours.py, scoring/detectors/neighbour.py, scoring/lm/mlm.py), without Ray:
the score by hand on a fixed 3-neighbour example, the ranking of swaps by hand on a stub MLM, and the real path
with a tiny masked LM trained here in seconds."""
from __future__ import annotations

import numpy as np
import pytest

from scoring.detectors import parse_method, parse_methods
from scoring.lm.mlm import Slot, Substitute, match_case
from scoring.lm.neighbours import NeighbourSettings, neighbours, settings_of, swap_of
from scoring.lm.tokenstats import TokenStats
from scoring.lm.views import neighbour_view, parse_neighbour_view


def stats(*lps) -> TokenStats:
    return TokenStats.from_records([{"id": f"r{i}", "lp": lp} for i, lp in enumerate(lps)])


def test_score_is_mean_neighbour_loss_minus_passage_loss_by_hand():
    m = parse_method("neighbour@n=3")
    assert m.needs == ("nbr:0.7:0:0", "nbr:0.7:0:1", "nbr:0.7:0:2")
    # Text r0: passage lp -1,-2,-3 -> loss 2. Neighbours' losses 2, 3, 4 -> mean 3. Score 3 - 2 = 1.
    # Text r1: passage loss 0.5; neighbour 0 loss 1.5, neighbour 1 missing (no swap offered), neighbour 2 loss
    #          2.5 -> mean over the two that exist = 2.0 -> score 1.5.
    # Text r2: no neighbour at all -> NaN.
    original = stats([-1.0, -2.0, -3.0], [-0.5], [-1.0])
    views = {"nbr:0.7:0:0": stats([-2.0, -2.0, -2.0], [-1.5], []),
             "nbr:0.7:0:1": stats([-3.0, -3.0], [], []),
             "nbr:0.7:0:2": stats([-4.0], [-2.0, -3.0], [])}
    got = m(original, views)
    assert got[:2] == pytest.approx([1.0, 1.5])
    assert np.isnan(got[2])
    # loss = minus the `loss` detector's score, exactly
    assert -parse_method("loss")(original, {})[0] == pytest.approx(2.0)


def test_view_names_and_settings():
    assert neighbour_view(0.7, 0, 4) == "nbr:0.7:0:4" and parse_neighbour_view("nbr:0.7:0:4") == (0.7, 0, 4)
    assert settings_of(parse_method("neighbour").needs) == NeighbourSettings(0.7, 0, 25)
    assert settings_of(["original", "lowercase"]) is None
    with pytest.raises(ValueError, match="one neighbour setting"):
        settings_of(["nbr:0.7:0:0", "nbr:0.5:0:0"])
    assert "neighbour" in {m.name for m in parse_methods("all")}  # jobs drop it without --neighbour-model


class StubMLM:
    """Slots and candidate scores chosen by hand: which swaps win is then a fact one can check on paper."""

    def __init__(self, table):
        self.table = table  # word -> [(candidate, score)]
        self.seen_seeds = []

    def encode(self, text):
        slots, pos = [], 0
        for k, word in enumerate(text.split(" ")):
            slots.append(Slot(k + 1, pos, pos + len(word), word))
            pos += len(word) + 1
        return list(range(len(slots) + 2)), slots

    def substitutes(self, ids, slots, *, top, mode, dropout, seeds):
        assert mode == "dropout" and dropout == 0.7 and top == 10
        self.seen_seeds.append(list(seeds))
        return [[Substitute(s, match_case(w, s.word), sc, sc) for w, sc in self.table.get(s.word.lower(), [])]
                for s in slots]


def test_the_n_best_swaps_over_the_passage_win_by_hand():
    mlm = StubMLM({"cat": [("dog", 0.5), ("cow", 0.2)], "sat": [("lay", 0.4), ("stood", 0.2)],
                   "the": [("a", 0.3)]})
    got = neighbours(mlm, "x1", "The cat sat", NeighbourSettings(0.7, 0, 3))
    # scores: dog .5, lay .4, a .3 (capitalised like "The"), cow .2 / stood .2 lose
    assert [g.apply("The cat sat") for g in got] == ["The dog sat", "The cat lay", "A cat sat"]
    # ties on score: the earlier slot first ("cow" at 4 before "stood" at 8)
    got5 = neighbours(mlm, "x1", "The cat sat", NeighbourSettings(0.7, 0, 5))
    assert [g.word for g in got5] == ["dog", "lay", "A", "cow", "stood"]
    # dropout seeds depend on (seed, id, slot) only
    neighbours(mlm, "x1", "The cat sat", NeighbourSettings(0.7, 0, 3))
    assert mlm.seen_seeds[0] == mlm.seen_seeds[2] and len(set(mlm.seen_seeds[0])) == 3


def test_swap_of_finds_the_changed_word():
    assert swap_of("The cat sat on the mat.", "The dog sat on the mat.") == (4, "cat", "dog")
    assert swap_of("The cat sat.", "A cat sat.") == (0, "The", "A")
    assert swap_of("He ran fast", "He ran quickly") == (7, "fast", "quickly")
    assert swap_of("a bat", "a bag") == (2, "bat", "bag")  # a shared prefix within the word is widened to it


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory):
    from scoring.studies.known_membership import sotu_passages
    from jobs.kit.studies import train_tiny_mlm

    path = tmp_path_factory.mktemp("mlm") / "mlm"
    train_tiny_mlm([p["text"] for p in sotu_passages(64, 200)], path, seconds=4, context=64)
    return str(path)


def test_tiny_mlm_neighbours_are_one_word_away_and_reproducible(tiny_mlm):
    from scoring.lm.mlm import MaskedLM
    from scoring.lm.neighbours import NeighbourViews

    text = "The Congress of the United States shall assemble at least once in every year, and the people agree."
    mlm = MaskedLM(tiny_mlm)
    a = neighbours(mlm, "p1", text, NeighbourSettings(0.7, 0, 6))
    b = neighbours(MaskedLM(tiny_mlm), "p1", text, NeighbourSettings(0.7, 0, 6))
    assert [x.apply(text) for x in a] == [x.apply(text) for x in b] and len(a) == 6
    for s in a:
        new = s.apply(text)
        assert new != text and len(new.split()) == len(text.split())
        offset, old, rep = swap_of(text, new)
        assert old.lower() != rep.lower() and rep.isalpha() and text[offset:offset + len(old)] == old
        assert (rep[0].isupper()) == (old[0].isupper())  # the original's capitalisation is kept
    assert [x.score for x in a] == sorted((x.score for x in a), reverse=True)

    # NeighbourViews adds one row per requested view to each original row; a too-short text gets error rows
    views = [neighbour_view(0.7, 0, j) for j in range(3)]
    nv = NeighbourViews(tiny_mlm, views, mlm.tokenizer)
    cols = {"id": ["p1", "p2"], "view": ["original", "original"], "text": [text, "!!"], "token_ids": [[1], [2]],
            "offsets": [[0], [0]], "first_predicted": [1, 1], "prefix_len": [None, None], "error": [None, None]}
    out = nv(cols)
    rows = [dict(zip(out, v)) for v in zip(*out.values())]
    p1 = [r for r in rows if r["id"] == "p1" and r["view"].startswith("nbr:")]
    assert [r["text"] for r in p1] == [x.apply(text) for x in a[:3]]
    assert all(r["token_ids"] == mlm.tokenizer(r["text"])["input_ids"] for r in p1)
    p2 = [r for r in rows if r["id"] == "p2" and r["view"].startswith("nbr:")]
    assert len(p2) == 3 and all(r["error"].startswith("no_neighbour") and r["token_ids"] == [] for r in p2)


def test_jobs_leave_neighbour_out_of_all_without_a_model_and_say_why(capsys):
    import typer

    from jobs.commands.evaluate import resolve_methods

    names = {m.name for m in resolve_methods("all", None)}
    assert "neighbour" not in names and "loss" in names
    assert "needs --neighbour-model" in capsys.readouterr().err
    assert "neighbour" in {m.name for m in resolve_methods("all", None, None, "/some/mlm")}
    with pytest.raises(typer.BadParameter, match="needs --neighbour-model"):
        resolve_methods("loss,neighbour", None)
