from __future__ import annotations

from scoring.semantic.anchors import (Anchors, anchors, answer_anchors, code_tokens, entities, normal_number, numbers,
                                      rare_words, sentence_starts)


def test_spellings_of_one_number_are_equal():
    assert numbers("1,200 and 1200") == {"1200"}
    assert numbers("it costs $3.50, or 3.5 dollars") == {"3.5"}
    assert numbers("25% of them, 25 in all") == {"25"}
    assert numbers("-3 and \u22127 but 5-3") == {"-3", "-7", "5", "3"}  # a minus glued to a number after a blank
    assert numbers("007 and 0.0 and -0 and 1,200.50") == {"7", "0", "1200.5"}
    assert normal_number(None, "1,000", ".00") == "1000"


def test_a_decimal_comma_only_where_it_cannot_be_a_list_or_a_group():
    assert numbers("Il a 3,5 kg et 4,50 \u20ac.") == {"3.5", "4.5"}
    assert numbers("[1,2,3]") == {"1", "2", "3"}
    assert numbers("(3,5)") == {"3", "5"}
    assert numbers("12,345,67") == {"12", "345", "67"}


def test_numbers_glued_to_words_are_not_numbers():
    assert numbers("x2 v1.2 mp3") == frozenset()
    assert numbers("version 1.2.3") == {"1.2"}


def test_number_words_are_numbers():
    assert numbers("Twelve eggs and twenty-five cats, thirty one dogs, eighty ants, zero bees") == {
        "12", "25", "31", "80", "0"}
    assert numbers("someone, often, tent") == frozenset()  # words that only contain a number word


def test_entities_are_capitalised_words_not_at_a_sentence_start():
    text = "Question: Ana has 3 coins. Tom gives Ana 5 more. I think so.\nMay was warm in Berlin, said NASA."
    assert entities(text) == {"Ana", "Berlin", "NASA"}  # Question, Tom, I, May start sentences (or are one letter)
    assert entities("Then \u0414\u043c\u0438\u0442\u0440\u0438\u0439 met \u0395\u03bb\u03ad\u03bd\u03b7 in "
                    "\u041c\u043e\u0441\u043a\u0432\u0430.") == {"\u0414\u043c\u0438\u0442\u0440\u0438\u0439",
                                                                 "\u0395\u03bb\u03ad\u03bd\u03b7",
                                                                 "\u041c\u043e\u0441\u043a\u0432\u0430"}
    assert entities("She said: \"Hello.\" \"Bob left.\" (Ann stayed.)") == {"Hello"}
    assert sentence_starts("  Hi there. Bob") == {2, 12}


def test_rare_words_come_from_wordfreq():
    assert rare_words("Is the string a palindrome? Check the apples and the barrettes.") == {"palindrome", "barrettes"}
    assert rare_words("twelve palindromes", threshold=0.0) == frozenset()  # nothing is rarer than zipf 0
    assert "palindrome" not in rare_words("palindrome", threshold=2.0)  # zipf 2.17


def test_code_tokens():
    text = ("Write sort_by(key) that calls getName() on a HashMap, then print(\"hello world\") and return 'abc'; "
            "don't use it's or f(x), and iPhone is code to this rule.")
    assert code_tokens(text) == {"sort_by", "getName", "HashMap", "print", "hello world", "abc", "iPhone"}


def test_each_anchor_has_one_kind_and_the_answer_its_own():
    a = anchors("Compute max_value for Lisa. Then Lisa calls max_value(12) in Zurich with a palindrome.",
                answer="She gets 12 * 2 = 24.\n#### 24")
    assert a == Anchors(numbers=frozenset({"12"}), code=frozenset({"max_value"}),
                        entities=frozenset({"Lisa", "Zurich"}), rare_words=frozenset({"palindrome"}),
                        answer=frozenset({"24"}))
    assert anchors("Tom has two apples.").answer == frozenset()
    assert answer_anchors("Paris") == {"paris"}
    assert answer_anchors("1,200 dollars") == {"1200"}
