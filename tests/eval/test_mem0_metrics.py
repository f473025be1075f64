"""Protocol (a), Mem0/Memory-R1 metrics, against hand-computed cases."""

import math

import nltk.data
import pytest

from memjax.eval.mem0_metrics import bleu1, exact_match, simple_tokenize, token_f1, word_tokenize


def test_simple_tokenize_only_drops_four_marks():
    assert simple_tokenize("Paris, France! Yes? No.") == ["paris", "france", "yes", "no"]
    assert simple_tokenize("rock'n'roll; jazz") == ["rock'n'roll;", "jazz"]


def test_token_f1_hand_computed():
    # {the, cat, sat} vs {the, cat, is, here}: P = 2/3, R = 2/4, F1 = 4/7.
    assert token_f1("The cat sat.", "the cat is here") == pytest.approx(4 / 7)
    # Sets, not multisets: {dog} vs {dog, cat} -> P = 1, R = 1/2 (a multiset F1 would be 0.4).
    assert token_f1("dog dog dog", "dog cat") == pytest.approx(2 / 3)
    assert token_f1("Paris, France!", "paris france") == 1.0
    assert token_f1("Paris;", "paris") == 0.0  # ";" is not one of . , ! ?
    assert token_f1("runs", "run") == 0.0  # no stemming
    assert token_f1("a beach", "beach") == pytest.approx(2 / 3)  # no article removal
    assert token_f1("", "beach") == 0.0 and token_f1("beach", "") == 0.0


def test_word_tokenize_is_nltks_with_the_packaged_punkt_model():
    paths_before = list(nltk.data.path)
    assert word_tokenize("I went home. Then I slept.") == [
        "I", "went", "home", ".", "Then", "I", "slept", ".",
    ]  # fmt: skip
    assert word_tokenize("She's here, isn't she?") == [
        "She", "'s", "here", ",", "is", "n't", "she", "?",
    ]  # fmt: skip
    # Punkt keeps abbreviations and initials whole (a split on ". " would give "dr", ".").
    assert word_tokenize("tupac and dr. dre") == ["tupac", "and", "dr.", "dre"]
    assert word_tokenize("c. s.lewis") == ["c.", "s.lewis"]
    assert nltk.data.path == paths_before  # the packaged folder is on the path only while used


# Real LoCoMo gold answers (categories 1-4) whose tokens depend on the Punkt model, and
# predictions with abbreviations, initials, quotes and several sentences. Each value is Mem0's
# evaluation/metrics/utils.py calculate_bleu_scores()["bleu1"]: sentence_bleu over
# nltk.word_tokenize (nltk 3.10.4, English punkt_tab) of the lowercased strings, weights
# (1, 0, 0, 0), SmoothingFunction().method1.
LOCOMO_GOLDS = [
    "No, he has goals specifically in the U.S. like joining the military and running for office.",
    "C. S.Lewis",
    "J.K. Rowling, R.R. Martin, Patrick Rothfuss, Paulo Coelho, and J. R. R. Tolkien.",
    "J.K. Rowling",
    "Tupac and Dr. Dre",
]
BLEU1_CASES = [
    ("J.K. Rowling", LOCOMO_GOLDS[3], 1.0),
    ("Rowling", LOCOMO_GOLDS[3], 0.36787944117144233),
    ("C. S. Lewis", LOCOMO_GOLDS[1], 0.3333333333333333),
    ("Tupac and Dr. Dre", LOCOMO_GOLDS[4], 1.0),
    ("Dr. Dre and Tupac.", LOCOMO_GOLDS[4], 0.8),
    ("Tolkien, Rowling and Martin.", LOCOMO_GOLDS[2], 0.11455884399268773),
    (
        "He wants to join the military in the U.S. and run for office.",
        LOCOMO_GOLDS[0],
        0.5367694950537757,
    ),
    (
        "She met Mr. Smith at 5 p.m. on Friday. They talked about St. Louis.",
        "She met Mr. Smith on Friday at 5 p.m.",
        0.5625,
    ),
    ('He said "I love it." Then he left.', 'He said "I love it."', 0.6666666666666666),
    ("She read 'The Hobbit' (by J. R. R. Tolkien.) twice.", "The Hobbit", 0.11764705882352941),
    (
        "It was in Jan. 2023. She moved to Washington D.C. afterwards! Why? Work.",
        "She moved to Washington D.C. in January 2023",
        0.375,
    ),
    ("The U.S. Army. Then college.", "the u.s. army", 0.42857142857142855),
]


@pytest.mark.parametrize("prediction,gold,expected", BLEU1_CASES)
def test_bleu1_matches_mem0_with_nltk_tokens(prediction, gold, expected):
    assert bleu1(prediction, gold) == pytest.approx(expected, abs=1e-12)


def test_bleu1_hand_computed():
    # Clipped unigram precision 2/3, candidate 3 < reference 4 -> BP = exp(1 - 4/3).
    assert bleu1("the cat sat", "The cat is here") == pytest.approx(2 / 3 * math.exp(-1 / 3))
    assert bleu1("the cat is here now", "the cat is here") == pytest.approx(4 / 5)  # BP = 1
    assert bleu1("the the the", "the cat") == pytest.approx(1 / 3)  # clipping
    # Tokens ["she", "'s", "here", "."] vs ["she", "is", "here"]: 2/4, BP = 1.
    assert bleu1("She's here.", "she is here") == pytest.approx(0.5)
    # One matching word: the zero bigram..4-gram counts would zero BLEU without smoothing
    # method1; with it (and weight 0 on them) only the brevity penalty exp(1 - 2/1) remains.
    assert bleu1("cat", "the cat") == pytest.approx(math.exp(-1))
    assert bleu1("dog", "cat") == 0.0  # no unigram match at all
    assert bleu1("", "cat") == 0.0


def test_exact_match_is_squad_normalised():
    assert exact_match("The Beach!", "beach") == 1.0
    assert exact_match("  an   apple ", "Apple.") == 1.0
    assert exact_match("beaches", "beach") == 0.0
    assert exact_match("beach and sea", "beach sea") == 0.0  # "and" is kept (SQuAD rule)
