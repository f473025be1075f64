"""How MemSearcher reads a completion, as the authors' code does (icip-cas/MemSearcher @ 83a3bea:
`vLLMRolloutWithTool` in verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py and
`compute_score_with_format` in verl/utils/reward_score/re_call.py).

- Tool calls: every `<tool_call>...</tool_call>` block of the response runs, in order. When
  the opening and closing tags do not pair up (different counts, or a block closed before it
  opens) the response has no tool calls at all, so an unclosed `<tool_call>` is an answer turn.
- Memory: the first `<memory>...</memory>` block, stripped; unpaired tags read as no memory.
- Boxed answer: `\\boxed{...}` with nested braces, taken at the last `\\boxed`; or, when the
  text holds `\\boxed ` followed by a space anywhere, the text after the last `\\boxed ` up to
  the next `$` (`last_boxed_only_string` / `remove_boxed`).
- `<|im_start|>`: the sampler also stops on it (vLLM `stop_token_ids=[151644]`); a completion
  that ends there is an illegal stop: the trajectory ends without EOS, so its reward is 0.
"""

from __future__ import annotations

import re

from memjax.agents.tool_format import ParsedToolCall, parse_tool_call

IM_START = "<|im_start|>"

_TOOL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_MEMORY_BLOCK = re.compile(r"<memory>(.*?)</memory>", re.DOTALL)


def tags_pair_up(text: str, tag: str) -> bool:
    """As many `<tag>` as `</tag>`, the k-th opening before the k-th closing (the authors'
    `validate_tool_calls` / `validate_memory`)."""
    opens = [m.start() for m in re.finditer(re.escape(f"<{tag}>"), text)]
    closes = [m.start() for m in re.finditer(re.escape(f"</{tag}>"), text)]
    return len(opens) == len(closes) and all(o < c for o, c in zip(opens, closes))


def tool_calls(text: str) -> list[ParsedToolCall]:
    """Every tool call of a response, each parsed on its own; [] when the tags do not pair."""
    if not tags_pair_up(text, "tool_call"):
        return []
    return [
        parse_tool_call(f"<tool_call>{m.group(1)}</tool_call>") for m in _TOOL_BLOCK.finditer(text)
    ]


def first_memory(text: str) -> str | None:
    """The first memory block, stripped; None when there is none or the tags do not pair."""
    if not tags_pair_up(text, "memory"):
        return None
    match = _MEMORY_BLOCK.search(text)
    return match.group(1).strip() if match else None


def boxed_answer(text: str) -> str | None:
    """The boxed answer in the forms the authors' reward accepts; None when there is none."""
    if "\\boxed " in text:
        return text.split("\\boxed ")[-1].split("$")[0].strip()
    start = text.rfind("\\boxed")
    if start < 0 or not text.startswith("\\boxed{", start):
        return None  # `\\boxed` not followed by `{` fails remove_boxed's check
    depth = 0
    for j in range(start, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[start + len("\\boxed{") : j].strip()
    return None


def stopped_on_im_start(text: str) -> bool:
    return text.endswith(IM_START)
