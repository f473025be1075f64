"""Qwen-style tool calls, `\\boxed{}` answers and tag checks, parsed defensively.

Malformed model output is a normal event during RL: every parser here returns a value that
says what went wrong instead of raising. Texts pass memjax.bounded_input (length, nesting
depth, integer size) before any JSON is read, and tags are found in linear time
(memjax.agents.tag_scan).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memjax.agents.tag_scan import tag_blocks
from memjax.bounded_input import (
    HUGE_NUMBER,
    MAX_INT_DIGITS,
    MAX_JSON_DEPTH,
    MAX_TEXT_CHARS,
    TOO_DEEP,
    TOO_LONG,
    loads,
)

_REFUSED = {
    TOO_LONG: f"over {MAX_TEXT_CHARS} characters",
    TOO_DEEP: f"nested deeper than {MAX_JSON_DEPTH} levels",
    HUGE_NUMBER: f"an integer of more than {MAX_INT_DIGITS} digits",
}


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict


@dataclass(frozen=True)
class ParsedToolCall:
    raw: str  # the text between <tool_call> and </tool_call> (or after an unclosed one)
    # The JSON parses and has "name" and "arguments": all MemSearcher's format check asks.
    well_formed: bool
    call: ToolCall | None  # None when the call cannot be run (also: non-object arguments)
    error: str | None
    refused: str | None = None  # the memjax.bounded_input reason, when it refused the text


def has_tool_call(text: str) -> bool:
    return isinstance(text, str) and "<tool_call>" in text


def parse_tool_call(text: str) -> ParsedToolCall | None:
    """The first tool call in `text`; None when there is no `<tool_call>` tag at all."""
    if not has_tool_call(text):
        return None
    if len(text) > MAX_TEXT_CHARS:
        error = f"tool call is not valid JSON ({_REFUSED[TOO_LONG]})"
        return ParsedToolCall("", False, None, error, TOO_LONG)
    blocks = tag_blocks(text, "tool_call")
    if not blocks:
        raw = text.split("<tool_call>", 1)[1]
        return ParsedToolCall(raw.strip(), False, None, "unclosed <tool_call> tag")
    raw = blocks[0].content.strip()
    obj, reason = loads(raw)
    if reason is not None:
        detail = _REFUSED.get(reason)
        error = "tool call is not valid JSON" + (f" ({detail})" if detail else "")
        return ParsedToolCall(raw, False, None, error, reason if detail else None)
    if not isinstance(obj, dict) or "name" not in obj or "arguments" not in obj:
        return ParsedToolCall(raw, False, None, 'tool call needs "name" and "arguments"')
    arguments = obj["arguments"]
    if isinstance(arguments, str):  # some models double-encode the arguments
        decoded, reason = loads(arguments)
        arguments = decoded if reason is None else arguments
    if not isinstance(obj["name"], str) or not isinstance(arguments, dict):
        error = 'tool call "name" must be a string and "arguments" an object'
        return ParsedToolCall(raw, True, None, error)
    return ParsedToolCall(raw, True, ToolCall(obj["name"], arguments), None)


_BRACE = re.compile(r"[{}]")


def extract_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (nested braces allowed); None if absent, if its
    braces never close, or if the text is over bounded_input's length bound."""
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
        return None
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i = start + len("\\boxed{")
    depth = 1
    for brace in _BRACE.finditer(text, i):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return text[i : brace.start()].strip()
    return None


def tags_paired(text: str, tag: str) -> bool:
    """Every `<tag>` is closed by a `</tag>` before the next one opens (no nesting, no strays)."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    tokens = re.findall(re.escape(open_tag) + "|" + re.escape(close_tag), text)
    is_open = False
    for token in tokens:
        if token == open_tag:
            if is_open:
                return False
            is_open = True
        else:
            if not is_open:
                return False
            is_open = False
    return not is_open


def last_tag_content(text: str, tag: str) -> str | None:
    """The stripped content of the last complete `<tag>...</tag>` block."""
    blocks = tag_blocks(text, tag) if isinstance(text, str) else []
    return blocks[-1].content.strip() if blocks else None
