"""MemSearcher's outcome reward, computed on the final context of a trajectory.

0 when the final completion did not end with EOS or the format is invalid; otherwise the
answer's F1 against the gold answers when it is above 0, else 0.1 (a valid format earns a
little, so early policies learn the format before they learn to answer).

The format is valid when, over the final context's assistant messages (each including the
"<think>" the assistant turn was started with), as the authors' `validate_template_format`
(icip-cas/MemSearcher @ 83a3bea, verl/utils/reward_score/re_call.py):
  - every message has as many <think> as </think> and <tool_call> as </tool_call> tags;
  - the first message contains <think>;
  - every tool call in the first message is JSON with "name" and "arguments" (memjax also
    asks for a JSON object, where the authors look for the two quoted words in any JSON);
  - the last message holds a boxed answer in a form the authors accept (`\\boxed{...}` or
    `\\boxed ...`; memjax.agents.memsearcher.protocol.boxed_answer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memjax.agents.memsearcher.protocol import boxed_answer, tool_calls
from memjax.agents.tool_format import parse_tool_call
from memjax.eval.qa_metrics import f1_score

FORMAT_REWARD = 0.1


@dataclass(frozen=True)
class FormatCheck:
    valid: bool
    reason: str  # "" when valid
    answer: str | None  # the boxed answer when the format is valid


@dataclass(frozen=True)
class RewardResult:
    reward: float
    format: FormatCheck
    f1: float
    eos: bool


def validate_format(assistant_messages: Sequence[str]) -> FormatCheck:
    if not assistant_messages:
        return FormatCheck(False, "no assistant message", None)
    for i, message in enumerate(assistant_messages):
        for tag in ("think", "tool_call"):
            if message.count(f"<{tag}>") != message.count(f"</{tag}>"):
                return FormatCheck(False, f"message {i}: unpaired <{tag}> tags", None)
    first = assistant_messages[0]
    if "<think>" not in first:
        return FormatCheck(False, "message 0: no <think>", None)
    calls = tool_calls(first)
    if not calls and "<tool_call>" in first:  # counts equal, but a block closes before it opens
        calls = [parse_tool_call(first)]
    for parsed in calls:
        if not parsed.well_formed:
            return FormatCheck(False, f"message 0: {parsed.error}", None)
    last = assistant_messages[-1]
    if "\\boxed" not in last:
        return FormatCheck(False, "last message: no \\boxed", None)
    answer = boxed_answer(last)
    if answer is None:
        return FormatCheck(False, "last message: \\boxed{} cannot be parsed", None)
    return FormatCheck(True, "", answer)


def reward(
    assistant_messages: Sequence[str], eos: bool, golden_answers: Sequence[str]
) -> RewardResult:
    check = validate_format(assistant_messages)
    if not eos or not check.valid:
        return RewardResult(0.0, check, 0.0, eos)
    f1 = f1_score(check.answer, golden_answers)
    return RewardResult(f1 if f1 > 0 else FORMAT_REWARD, check, f1, eos)
