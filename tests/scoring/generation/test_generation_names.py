"""Name cloze's passages: which qualify (exactly one one-word name, once), and how the name is masked."""
from __future__ import annotations

import pytest

from scoring.generation.names import MASK, cloze, parse_name
from scoring.lm.ner import spacy_pipeline


@pytest.mark.parametrize("text,name,masked", [
    ("The door opened, and Gerty entered with a cup of tea.", "Gerty",
     f"The door opened, and {MASK} entered with a cup of tea."),
    ("He said that Gerty was late. It rained all day.", "Gerty", f"He said that {MASK} was late. It rained all day."),
])
def test_one_name_is_masked_by_the_rule(text, name, masked):
    c = cloze(text, "rule")
    assert (c.name, c.masked, c.reason) == (name, masked, None)


@pytest.mark.parametrize("text,why", [
    ("It rained all day and nobody came.", "no_single_name: no proper name found"),
    ("Then Anna met Vronsky at the station.", "no_single_name: 2 proper names found (Anna, Vronsky)"),
    ("Then Anna left, and later Anna came back.", "no_single_name: the name 'Anna' occurs more than once"),
    ("Anna left. Later the train came, and Anna wept.", "no_single_name: the name 'Anna' occurs more than once"),
    ("Then my Mother said no.", "no_single_name: no proper name found"),  # the stop list
])
def test_passages_without_exactly_one_name_say_why(text, why):
    c = cloze(text, "rule")
    assert c.name is None and c.reason == why


def test_a_sentence_initial_word_is_not_taken_for_a_name_by_the_rule():
    assert cloze("Yesterday it rained, and Gerty stayed in.", "rule").name == "Gerty"


def test_spacy_where_installed():
    if spacy_pipeline() is None:
        pytest.skip("spaCy or en_core_web_sm is not installed (pip install tidemark[ner] and the model): the rule "
                    "fallback is tested above")
    c = cloze("The door opened, and Gerty entered with a cup of tea.", "spacy")
    assert c.name == "Gerty" and MASK in c.masked


def test_spacy_asked_for_where_it_is_missing_is_an_error():
    if spacy_pipeline() is not None:
        pytest.skip("spaCy is installed here")
    with pytest.raises(RuntimeError, match="not installed"):
        cloze("Gerty left.", "spacy")


def test_the_answer_is_read_from_the_name_tags():
    assert parse_name("<name>Ponyboy</name>") == "Ponyboy"
    assert parse_name("Output: <name> Gerty </name> trailing") == "Gerty"
    assert parse_name("<b>Gerty</b>") == "Gerty"
    assert parse_name("") == ""
