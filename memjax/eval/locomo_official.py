"""Protocol (b), the official LoCoMo code's QA scoring (task_eval/evaluation.py).

- normalise: delete commas, lowercase, drop punctuation, drop a/an/the/*and*, collapse spaces;
- F1: Porter-stemmed tokens, multiset overlap (Counter &);
- category 1: split prediction and gold on "," (before normalising); mean over gold parts of
  the best F1 over prediction parts;
- category 3: gold cut at the first ";";
- categories 2 and 4: F1 of the whole strings;
- category 5: 1 if the prediction contains "no information available" or "not mentioned".
The official overall is a micro-average over all items, category 5 included.
"""

from __future__ import annotations

import re
import string
from collections import Counter

from nltk.stem import PorterStemmer

_STEMMER = PorterStemmer()
_ARTICLES_AND = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = set(string.punctuation)
ADVERSARIAL_PHRASES = ("no information available", "not mentioned")


def normalize_answer(text: str) -> str:
    text = str(text).replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    return " ".join(_ARTICLES_AND.sub(" ", text).split())


def _stems(text: str) -> list[str]:
    return [_STEMMER.stem(tok) for tok in normalize_answer(text).split()]


def stemmed_f1(prediction: str, gold: str) -> float:
    pred, ref = _stems(prediction), _stems(gold)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """Category 1: mean over comma-separated gold parts of the best-matching prediction part."""
    preds = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(gold).split(",")]
    return sum(max(stemmed_f1(p, g) for p in preds) for g in golds) / len(golds)


def adversarial_score(prediction: str) -> float:
    text = str(prediction).lower()
    return float(any(phrase in text for phrase in ADVERSARIAL_PHRASES))


def official_score(prediction: str, gold: str | None, category: int) -> float:
    """The official per-question score; `gold` is unused (may be None) for category 5."""
    if category == 5:
        return adversarial_score(prediction)
    if gold is None:
        raise ValueError(f"category {category} needs a gold answer")
    gold = str(gold)
    if category == 1:
        return multi_answer_f1(prediction, gold)
    if category == 3:
        return stemmed_f1(prediction, gold.split(";")[0].strip())
    if category in (2, 4):
        return stemmed_f1(prediction, gold)
    raise ValueError(f"unknown LoCoMo category {category!r}; valid: 1..5")
