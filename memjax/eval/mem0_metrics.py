"""Protocol (a), Mem0 / Memory-R1: set-of-tokens F1, BLEU-1, exact match (category 5 skipped).

F1 tokenises by lowercasing and turning . , ! ? into spaces (no stemming, no article removal)
and compares token *sets*. BLEU-1 is nltk `sentence_bleu` with weights (1, 0, 0, 0) and
smoothing method1 over nltk word tokens of the lowercased strings, as Mem0's
evaluation/metrics/utils.py `calculate_bleu_scores` computes it. Exact match is not defined
by either paper; memjax uses SQuAD-normalised string equality (memjax.eval.qa_metrics), the
same as its EM reward.

Tokens are nltk's own: `nltk.word_tokenize` (Punkt sentence split, then the Treebank word
tokenizer) with nltk's English Punkt model (`punkt_tab`), which memjax ships as package data in
memjax/eval/nltk_data, so nothing is downloaded (see the README there for its provenance).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import nltk
import nltk.data
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

from memjax.eval.qa_metrics import exact_match  # SQuAD-normalised string equality

__all__ = ["bleu1", "exact_match", "simple_tokenize", "token_f1", "word_tokenize"]

# Holds tokenizers/punkt_tab/english/: nltk's English Punkt parameters as nltk's own text files.
NLTK_DATA = Path(__file__).with_name("nltk_data")
_SMOOTHING = SmoothingFunction().method1


def simple_tokenize(text: str) -> list[str]:
    text = str(text).lower()
    for ch in ".,!?":
        text = text.replace(ch, " ")
    return text.split()


def token_f1(prediction: str, gold: str) -> float:
    """F1 over the *sets* of simple tokens; 0 when either side has no tokens."""
    pred, ref = set(simple_tokenize(prediction)), set(simple_tokenize(gold))
    if not pred or not ref:
        return 0.0
    common = len(pred & ref)
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


@contextlib.contextmanager
def _packaged_nltk_data():
    """Puts the packaged nltk data first on nltk.data.path for the duration of a call.

    nltk loads the Punkt model on first use and keeps it (an lru_cache in nltk.tokenize), and it
    opens data files only under nltk.data.path's roots; the entry is removed again afterwards so
    the user's own nltk settings are left as they were.
    """
    root = str(NLTK_DATA)
    added = root not in nltk.data.path
    if added:
        nltk.data.path.insert(0, root)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                nltk.data.path.remove(root)


def word_tokenize(text: str) -> list[str]:
    """`nltk.word_tokenize(text)` (English), with the Punkt model from the packaged data."""
    with _packaged_nltk_data():
        return nltk.word_tokenize(str(text))


def bleu1(prediction: str, gold: str) -> float:
    """sentence_bleu([gold tokens], pred tokens, weights=(1,0,0,0), smoothing method1)."""
    pred = word_tokenize(str(prediction).lower())
    ref = word_tokenize(str(gold).lower())
    if not pred or not ref:
        return 0.0  # nltk would warn and return 0 here too; skip the warning
    return float(sentence_bleu([ref], pred, weights=(1, 0, 0, 0), smoothing_function=_SMOOTHING))
