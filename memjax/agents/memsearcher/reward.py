"""MemSearcher's outcome reward, computed on the final context of a trajectory.

0 when the final completion did not end with EOS or the format is invalid; otherwise the
answer's F1 against the gold answers when it is above 0, else 0.1 (a valid format earns a
little, so early policies learn the format before they learn to answer).

The format is valid when, over the final context's assistant messages (each including the
"<think>" the assistant turn was started with):
  - every message has paired <think></think> and <tool_call></tool_call> tags;
  - the first message contains <think>;
  - a tool call in the first message is JSON with "name" and "arguments";
  - the last message contains \\boxed{...} whose braces close.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memjax.agents.tool_format import extract_boxed, parse_tool_call, tags_paired
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
            if not tags_paired(message, tag):
                return FormatCheck(False, f"message {i}: unpaired <{tag}> tags", None)
    first = assistant_messages[0]
    if "<think>" not in first:
        return FormatCheck(False, "message 0: no <think>", None)
    parsed = parse_tool_call(first)
    if parsed is not None and not parsed.well_formed:
        return FormatCheck(False, f"message 0: {parsed.error}", None)
    last = assistant_messages[-1]
    if "\\boxed" not in last:
        return FormatCheck(False, "last message: no \\boxed", None)
    answer = extract_boxed(last)
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
