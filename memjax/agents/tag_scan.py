"""`<tag>...</tag>` blocks found with `str.find`, in time linear in the text.

A lazy regex such as `<tool_call>(.*?)</tool_call>` is retried at every opening tag, and each
try scans to the end of the text when no closing tag follows: a model that repeats an opening
tag makes it quadratic. These helpers find the same blocks (the first closing tag after an
opening tag ends the block, blocks do not overlap) in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class TagBlock(NamedTuple):
    tag: str
    start: int  # index of the opening tag
    end: int  # index just after the closing tag
    content: str  # the text between the tags, unstripped


def tag_blocks(text: str, tag: str) -> list[TagBlock]:
    """Every complete `<tag>...</tag>` block, in order."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    blocks, pos = [], 0
    while (start := text.find(open_tag, pos)) != -1:
        inner = start + len(open_tag)
        close = text.find(close_tag, inner)
        if close == -1:  # no later opening tag can be closed either
            break
        pos = close + len(close_tag)
        blocks.append(TagBlock(tag, start, pos, text[inner:close]))
    return blocks


def first_block(text: str, tags: Sequence[str]) -> TagBlock | None:
    """The earliest complete block of any of `tags` (as `<(a|b)>(.*?)</\\1>` would find)."""
    found = []
    for tag in tags:
        open_tag = f"<{tag}>"
        start = text.find(open_tag)
        # When the first opening tag has no closing tag after it, no later one has either.
        close = text.find(f"</{tag}>", start + len(open_tag)) if start != -1 else -1
        if close != -1:
            found.append(
                TagBlock(tag, start, close + len(tag) + 3, text[start + len(open_tag) : close])
            )
    return min(found, key=lambda b: b.start) if found else None
