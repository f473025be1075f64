"""The sampler's blocks for the opening a batch of prompts shares, prefilled once instead of
once per row (how many tokens prompts share: `memjax.models.shared_prefix`, the shared prefix's
one home; the RL update's regrouping: `memjax.rl.shared_prefix`).

A role's prompts (the answer agent's, the manager's, MemSearcher's) open with the same
instructions: on SmolLM2's tokenizer 449 of an answer prompt's ~950 tokens, 843 of a
manager prompt's ~1,210. `sample` prefills that opening as one row, copies its cache to
every row, and prefills only each row's own rest on top of it: the same attention over the
same tokens at the same positions, so the same completions (up to float rounding).

The shared length is cut to whole blocks of PREFIX_BLOCK tokens: the opening's prefill then
needs no padding (a padded slot would be read by every decode step of every row), and a
role's fixed instructions compile one program, whatever its rows' own lengths. The rows'
rests are padded to whole blocks too, not to the powers of two plain prompts use below
1,024 tokens: an answer prompt's ~570-token rest would pad to 1,024 and cost as much as the
whole prompt did; the opening is fixed per role, so the extra programs are few.
"""

from __future__ import annotations

from collections.abc import Sequence

from memjax.models.shared_prefix import common_prefix_length
from memjax.sampling.padding import bucket_length

PREFIX_BLOCK = 128


def shared_prefix_length(prompts: Sequence[Sequence[int]], minimum: int) -> int:
    """Tokens to prefill once for all of `prompts`: their common opening in whole blocks,
    leaving every row at least one token of its own (its last token's logits start decoding);
    0 when that is under `minimum`, when `minimum` is 0, or for a single prompt."""
    if minimum <= 0 or len(prompts) < 2:
        return 0
    room = min(common_prefix_length(prompts), min(len(p) for p in prompts) - 1)
    shared = room // PREFIX_BLOCK * PREFIX_BLOCK
    return shared if shared >= minimum else 0


def rest_length(n: int) -> int:
    """The padded length of rests whose longest has n tokens: the plain bucket up to one
    block, whole blocks above it."""
    if n <= PREFIX_BLOCK:
        return bucket_length(n)
    return -(-n // PREFIX_BLOCK) * PREFIX_BLOCK
