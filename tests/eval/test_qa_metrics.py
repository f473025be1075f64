"""SQuAD-style normalisation, EM and F1 (with the yes/no rule) on hand-computed cases."""

import pytest

from memjax.eval.qa_metrics import (
    Prediction,
    em_score,
    exact_match,
    f1_score,
    normalize_answer,
    score_by_dataset,
    token_f1,
)


def test_normalize():
    assert normalize_answer("  The Eiffel-Tower, in PARIS! ") == "eiffeltower in paris"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("theatre") == "theatre"  # articles only as whole words


def test_exact_match_any_gold():
    assert exact_match("the Beatles", "Beatles") == 1.0
    assert em_score("Paris.", ["London", "paris"]) == 1.0
    assert em_score("Paris, France", ["Paris"]) == 0.0
    assert em_score(None, ["Paris"]) == 0.0


def test_token_f1_hand_computed():
    # pred {denise}, gold {denise, levertov}: P = 1, R = 1/2, F1 = 2/3.
    assert token_f1("Denise", "Denise Levertov") == pytest.approx(2 / 3)
    # pred {a b c d} vs gold {c d e}: overlap 2, P = 1/2, R = 2/3, F1 = 4/7.
    assert token_f1("a1 b1 c1 d1", "c1 d1 e1") == pytest.approx(4 / 7)
    assert token_f1("nothing shared", "else") == 0.0
    assert f1_score("Denise", ["x", "Denise Levertov"]) == pytest.approx(2 / 3)


def test_yes_no_special_case():
    assert token_f1("yes", "yes") == 1.0
    assert token_f1("yes", "no") == 0.0
    # Plain token overlap would give "no" partial credit against "no way"; the rule gives 0.
    assert token_f1("no", "no way") == 0.0
    assert token_f1("no way", "no") == 0.0
    assert token_f1("noanswer", "no answer") == 0.0


def test_scores_by_dataset_with_macro_average():
    rows = score_by_dataset(
        [
            Prediction("nq", "Paris", ("Paris",)),
            Prediction("nq", None, ("Rome",)),
            Prediction("hotpotqa", "Denise", ("Denise Levertov",)),
        ]
    )
    nq, hotpot, avg = rows
    assert (nq.dataset, nq.count, nq.em, nq.f1, nq.answered) == ("nq", 2, 0.5, 0.5, 0.5)
    assert hotpot.em == 0.0 and hotpot.f1 == pytest.approx(2 / 3)
    assert avg.dataset == "average" and avg.count == 3
    assert avg.em == pytest.approx(0.25) and avg.f1 == pytest.approx((0.5 + 2 / 3) / 2)
