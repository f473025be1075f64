"""Protocol (a), Mem0/Memory-R1 metrics, against hand-computed cases."""

import math

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


def test_word_tokenize_needs_no_nltk_data():
    assert word_tokenize("I went home. Then I slept.") == [
        "I", "went", "home", ".", "Then", "I", "slept", ".",
    ]  # fmt: skip
    assert word_tokenize("She's here, isn't she?") == [
        "She", "'s", "here", ",", "is", "n't", "she", "?",
    ]  # fmt: skip


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
