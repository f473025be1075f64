"""Protocol (b), the official LoCoMo scoring, against hand-computed cases for every rule."""

import pytest

from memjax.eval.locomo_official import (
    adversarial_score,
    multi_answer_f1,
    normalize_answer,
    official_score,
    stemmed_f1,
)


def test_normalize_drops_commas_punctuation_articles_and_and():
    assert normalize_answer("The cat, and a dog!") == "cat dog"
    assert normalize_answer("Anne ANDERSON, an andante") == "anne anderson andante"


def test_stemmed_multiset_f1():
    assert stemmed_f1("running dogs", "the dog runs") == 1.0  # Porter stems run, dog
    assert stemmed_f1("dog dog", "dog") == pytest.approx(2 / 3)  # multiset: P = 1/2, R = 1
    assert stemmed_f1("cat", "dog") == 0.0
    assert stemmed_f1("", "dog") == 0.0


def test_category_1_splits_on_commas_before_normalising():
    # Gold parts London (best 1), Berlin (0), Paris (1) -> 2/3.
    assert official_score("Paris, London", "London, Berlin, Paris", 1) == pytest.approx(2 / 3)
    # No comma in the prediction: each gold part against "paris london" -> P 1/2, R 1 -> 2/3,
    # where the whole-string rule (category 4) would give 1.
    assert multi_answer_f1("Paris and London", "Paris, London") == pytest.approx(2 / 3)
    assert official_score("Paris and London", "Paris, London", 4) == 1.0


def test_category_3_cuts_gold_at_semicolon():
    gold = "Likely no; since this one went badly"
    assert official_score("likely no", gold, 3) == 1.0
    # Without the cut: P = 1, R = 2/7 -> 4/9 (what category 2 or 4 would give).
    assert official_score("likely no", gold, 4) == pytest.approx(4 / 9)
    assert official_score("likely no", gold, 2) == pytest.approx(4 / 9)


def test_category_5_phrase_rule():
    assert official_score("Not mentioned in the conversation", None, 5) == 1.0
    assert official_score("Sorry, NO INFORMATION AVAILABLE.", "ignored", 5) == 1.0
    assert adversarial_score("It was not mentioned.") == 1.0
    assert adversarial_score("No") == 0.0
    assert adversarial_score("not  mentioned") == 0.0  # a literal substring test


def test_bad_calls_raise():
    with pytest.raises(ValueError, match="needs a gold"):
        official_score("x", None, 2)
    with pytest.raises(ValueError, match="unknown LoCoMo category"):
        official_score("x", "y", 6)
