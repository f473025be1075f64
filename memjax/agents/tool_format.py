"""Qwen-style tool calls, `\\boxed{}` answers and tag checks, parsed defensively.

Malformed model output is a normal event during RL: every parser here returns a value that
says what went wrong instead of raising.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


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


def has_tool_call(text: str) -> bool:
    return "<tool_call>" in text


def parse_tool_call(text: str) -> ParsedToolCall | None:
    """The first tool call in `text`; None when there is no `<tool_call>` tag at all."""
    if not has_tool_call(text):
        return None
    match = _TOOL_CALL.search(text)
    if match is None:
        raw = text.split("<tool_call>", 1)[1]
        return ParsedToolCall(raw.strip(), False, None, "unclosed <tool_call> tag")
    raw = match.group(1).strip()
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as e:
        return ParsedToolCall(raw, False, None, f"tool call is not valid JSON ({e.msg})")
    if not isinstance(obj, dict) or "name" not in obj or "arguments" not in obj:
        return ParsedToolCall(raw, False, None, 'tool call needs "name" and "arguments"')
    arguments = obj["arguments"]
    if isinstance(arguments, str):  # some models double-encode the arguments
        with contextlib.suppress(json.JSONDecodeError):
            arguments = json.loads(arguments)
    if not isinstance(obj["name"], str) or not isinstance(arguments, dict):
        error = 'tool call "name" must be a string and "arguments" an object'
        return ParsedToolCall(raw, True, None, error)
    return ParsedToolCall(raw, True, ToolCall(obj["name"], arguments), None)


def extract_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (nested braces allowed); None if absent or its
    braces never close."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i = start + len("\\boxed{")
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
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
    matches = re.findall(rf"<{tag}>(.*?)</{tag}>", text, re.DOTALL)
    return matches[-1].strip() if matches else None
