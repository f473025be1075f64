"""Stop conditions: end-of-sequence ids and multi-token stop strings.

On device, a row stops when it samples an EOS id or when its last tokens equal one of the stop
strings' token sequences (the ways the tokenizer spells them). A string can also be produced
by other token splits; the host therefore checks the decoded text afterwards and cuts every row
exactly where a stop string first ends, so the result never depends on the spelling.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def stop_sequences(stop_strings: Sequence[str], tokenizer) -> np.ndarray:
    """[M, W] int32 token sequences, right-aligned and left-padded with -1 (matches nothing).

    Each string contributes its own tokenization and, when different, the tokenization of the
    string after a space with that space's token dropped (how it often appears mid-text).
    """
    seqs: list[tuple[int, ...]] = []
    for s in stop_strings:
        if not s:
            raise ValueError("stop strings must be non-empty")
        candidates = [tokenizer.encode(s)]
        spaced = tokenizer.encode(" " + s)
        if spaced and tokenizer.decode(spaced[1:], skip_special_tokens=False) == s:
            candidates.append(spaced[1:])
        for c in candidates:
            if c and tuple(c) not in seqs:
                seqs.append(tuple(c))
    if not seqs:
        return np.zeros((0, 1), np.int32)
    width = max(len(s) for s in seqs)
    out = np.full((len(seqs), width), -1, np.int32)
    for i, s in enumerate(seqs):
        out[i, width - len(s) :] = s
    return out


def first_stop_string_end(tokens: Sequence[int], stop_strings: Sequence[str], tokenizer):
    """(n, text): the fewest leading tokens whose decoded text contains a stop string, and that
    text cut right after the string's first end. None when no stop string occurs."""
    full = tokenizer.decode(list(tokens), skip_special_tokens=False)
    if not any(s in full for s in stop_strings):
        return None
    for n in range(1, len(tokens) + 1):
        text = tokenizer.decode(list(tokens[:n]), skip_special_tokens=False)
        ends = [text.find(s) + len(s) for s in stop_strings if s in text]
        if ends:
            return n, text[: min(ends)]
    return None
