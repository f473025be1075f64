"""Prompt chunks kept for reuse: a prompt that opens as an earlier one did gets that opening's
keys and values copied into its slot instead of computed again.

The engine prefills a prompt in chunks of `chunk` tokens from position 0, and a chunk's keys
and values depend only on the tokens up to its end. A stored chunk is keyed by every token up
to its end, so a prompt that starts with those tokens would compute exactly the stored values:
copying them is the same as computing them, bit for bit. Agents' prompts open with the same
instructions (MemSearcher's system prompt and tool schema, a Memory-R1 role's prompt), so
most calls skip their first chunks. Least recently used chunks go first.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence


class PrefixStore:
    def __init__(self, capacity: int, chunk: int):
        self.capacity = capacity  # chunks kept; 0 keeps none
        self.chunk = chunk
        self._blocks: collections.OrderedDict[tuple[int, ...], object] = collections.OrderedDict()
        self.hits = 0  # chunks reused

    def match(self, prompt: Sequence[int]) -> list:
        """The stored chunks that open `prompt`, in order. The prompt's last token is never
        covered: its chunk must run to give the logits of the first new token."""
        found = []
        for end in range(self.chunk, len(prompt), self.chunk):
            block = self._blocks.get(tuple(prompt[:end]))
            if block is None:
                break
            self._blocks.move_to_end(tuple(prompt[:end]))
            found.append(block)
        self.hits += len(found)
        return found

    def wants(self, opening: Sequence[int]) -> bool:
        """Whether a chunk ending after `opening` (a whole number of chunks) should be kept."""
        return self.capacity > 0 and tuple(opening) not in self._blocks

    def add(self, opening: Sequence[int], block) -> None:
        self._blocks[tuple(opening)] = block
        while len(self._blocks) > self.capacity:
            self._blocks.popitem(last=False)

    def clear(self) -> None:
        self._blocks.clear()
