"""Memory-R1's outcome rewards: exact match of the answer after **Answer:** (F1 as an option).

Both agents are rewarded this way (MR1-v5 §3.1 eq. 4, §3.2): the answer agent on its own
answer, the memory manager on the frozen answer agent's answer over the bank its operations
produced. EM is SQuAD-normalised string equality (memjax.eval.qa_metrics); the F1 option is
the Mem0/Memory-R1 set-of-tokens F1 that Table 1 reports. No marker, no answer: reward 0
(Memory-R1 describes no format reward).

`f1_short` is not the paper's: token F1 scaled down by how far the answer runs past its word
budget. A small model whose answers are rarely exact gets EM's signal from almost no sample,
and plain F1 pays a copied memory sentence that contains the gold words more than a short
wrong answer, so GRPO teaches it to copy. The budget is the answer prompt's own "less than 5-6
words", or the gold's length where that is longer (a fifth of LoCoMo's gold answers are).
"""

from __future__ import annotations

from typing import Literal, get_args

from memjax.agents.memory_r1.answer_parser import parse_answer
from memjax.eval.mem0_metrics import simple_tokenize, token_f1
from memjax.eval.qa_metrics import exact_match

RewardMetric = Literal["em", "f1", "f1_short"]
REWARD_METRICS: tuple[str, ...] = get_args(RewardMetric)
SHORT_ANSWER_WORDS = 6  # the answer prompt's "The answer should be less than 5-6 words"


def short_answer_f1(answer: str, gold: str) -> float:
    """Token F1 times min(1, budget / answer words), budget = max(6, gold words)."""
    words = len(simple_tokenize(answer))
    budget = max(SHORT_ANSWER_WORDS, len(simple_tokenize(gold)))
    return token_f1(answer, gold) * min(1.0, budget / max(words, 1))


def answer_score(answer: str | None, gold: str, metric: RewardMetric = "em") -> float:
    """Score an already-extracted answer (None scores 0)."""
    if answer is None:
        return 0.0
    if metric == "em":
        return exact_match(answer, gold)
    if metric == "f1":
        return token_f1(answer, gold)
    if metric == "f1_short":
        return short_answer_f1(answer, gold)
    raise ValueError(f"unknown reward metric {metric!r}; valid: {', '.join(REWARD_METRICS)}")


def answer_reward(completion: str, gold: str, metric: RewardMetric = "em") -> float:
    """Reward of an answer-agent completion against the gold answer."""
    return answer_score(parse_answer(completion).answer, gold, metric)
