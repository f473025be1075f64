"""The one boundary where strings from a model or a request become valid text.

    valid_text("fact \\ud83d")   # 'fact \\ufffd'

A model's output and a request's JSON can carry code points that are not text: a lone UTF-16
surrogate (half of an escaped emoji, `"\\ud83d"`, cut off at a token boundary), NUL, or a
Unicode noncharacter (U+FFFE, U+FFFF, ...). Python holds them in a `str`, every parser passes
them on, and the first Rust tokenizer or UTF-8 encoder that meets one raises. Tokenizers, the
embedder, the memory bank and the retrieval server call `valid_text` on every string they take
in, so such a string is data (U+FFFD where the bad code point was) rather than a crash.
A surrogate *pair* written as two code points is joined into the character it encodes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REPLACEMENT = "\ufffd"

# Noncharacters (U+FDD0..U+FDEF and the last two code points of every plane) and NUL. Other
# control characters are valid text and stay (tabs, newlines, escape sequences in code).
_NOT_TEXT = re.compile(
    "[\x00\ufdd0-\ufdef\ufffe\uffff"
    + "".join(f"{chr(p * 0x10000 + 0xFFFE)}{chr(p * 0x10000 + 0xFFFF)}" for p in range(1, 17))
    + "]"
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(s: str) -> str:
    """`s` with lone surrogates and noncharacters replaced by U+FFFD and NUL removed.

    Valid text comes back unchanged (the same object). Bytes are decoded as UTF-8 with
    U+FFFD for what does not decode; anything else is a TypeError (a caller's bug)."""
    if isinstance(s, bytes):
        s = s.decode("utf-8", "replace")
    if not isinstance(s, str):
        raise TypeError(f"expected text, got {type(s).__name__}")
    if s.isascii():
        return s.replace("\x00", "") if "\x00" in s else s
    if _SURROGATE.search(s):
        # UTF-16 round trip: a high+low pair becomes its character, a lone half U+FFFD.
        s = s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if _NOT_TEXT.search(s):
        s = _NOT_TEXT.sub(lambda m: "" if m.group() == "\x00" else REPLACEMENT, s)
    return s


def valid_texts(texts: Iterable[str]) -> list[str]:
    """`valid_text` of each string, as a new list."""
    return [valid_text(t) for t in texts]


__all__ = ["REPLACEMENT", "valid_text", "valid_texts"]
