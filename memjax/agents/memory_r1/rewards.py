"""Memory-R1's outcome rewards: exact match of the answer after **Answer:** (F1 as an option).

Both agents are rewarded this way (MR1-v5 §3.1 eq. 4, §3.2): the answer agent on its own
answer, the memory manager on the frozen answer agent's answer over the bank its operations
produced. EM is SQuAD-normalised string equality (memjax.eval.qa_metrics); the F1 option is
the Mem0/Memory-R1 set-of-tokens F1 that Table 1 reports. No marker, no answer: reward 0
(Memory-R1 describes no format reward).
"""

from __future__ import annotations

from typing import Literal

from memjax.agents.memory_r1.answer_parser import parse_answer
from memjax.eval.mem0_metrics import token_f1
from memjax.eval.qa_metrics import exact_match

RewardMetric = Literal["em", "f1"]


def answer_score(answer: str | None, gold: str, metric: RewardMetric = "em") -> float:
    """Score an already-extracted answer (None scores 0)."""
    if answer is None:
        return 0.0
    if metric == "em":
        return exact_match(answer, gold)
    if metric == "f1":
        return token_f1(answer, gold)
    raise ValueError(f"unknown reward metric {metric!r}; valid: 'em', 'f1'")


def answer_reward(completion: str, gold: str, metric: RewardMetric = "em") -> float:
    """Reward of an answer-agent completion against the gold answer."""
    return answer_score(parse_answer(completion).answer, gold, metric)
