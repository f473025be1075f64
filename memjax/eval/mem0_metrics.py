"""Protocol (a), Mem0 / Memory-R1: set-of-tokens F1, BLEU-1, exact match (category 5 skipped).

F1 tokenises by lowercasing and turning . , ! ? into spaces (no stemming, no article removal)
and compares token *sets*. BLEU-1 is nltk `sentence_bleu` with weights (1, 0, 0, 0) and
smoothing method1 over nltk word tokens of the lowercased strings. Exact match is not defined
by either paper; memjax uses SQuAD-normalised string equality (memjax.eval.qa_metrics), the
same as its EM reward.

nltk's `word_tokenize` first splits sentences with the Punkt model, which is a data download;
memjax downloads nothing, so sentences are split on end punctuation followed by whitespace and
each sentence goes through nltk's own word tokenizer (the Treebank one `word_tokenize` uses).
On one-sentence answers (nearly all) this is token-for-token the same; it can differ only where
Punkt would refuse a split (an abbreviation such as "Dr." mid-answer).
"""

from __future__ import annotations

import re

from nltk.tokenize import NLTKWordTokenizer
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

from memjax.eval.qa_metrics import exact_match  # SQuAD-normalised string equality

__all__ = ["bleu1", "exact_match", "simple_tokenize", "token_f1", "word_tokenize"]

_WORD_TOKENIZER = NLTKWordTokenizer()
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
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


def word_tokenize(text: str) -> list[str]:
    """nltk word tokens without the Punkt download (see the module docstring)."""
    return [
        tok
        for sent in _SENTENCE_END.split(str(text).strip())
        for tok in _WORD_TOKENIZER.tokenize(sent)
    ]


def bleu1(prediction: str, gold: str) -> float:
    """sentence_bleu([gold tokens], pred tokens, weights=(1,0,0,0), smoothing method1)."""
    pred = word_tokenize(str(prediction).lower())
    ref = word_tokenize(str(gold).lower())
    if not pred or not ref:
        return 0.0  # nltk would warn and return 0 here too; skip the warning
    return float(sentence_bleu([ref], pred, weights=(1, 0, 0, 0), smoothing_function=_SMOOTHING))
