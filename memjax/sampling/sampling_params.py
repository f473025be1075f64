"""SamplingParams: how the next token is chosen. Frozen and hashable: a static jit argument."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """temperature -> top-k -> top-p, in that order (as `transformers`, Tunix and gemma do).

    top_k=0 and top_p=1.0 disable those filters. `greedy` takes the argmax (ties to the lowest
    id); log-probs are still reported at `temperature`, so a greedy rollout's log-probs match a
    trainer that divides logits by the same temperature.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    max_new_tokens: int = 64
    greedy: bool = False

    def __post_init__(self):
        if not self.temperature > 0:
            raise ValueError(
                f"SamplingParams.temperature={self.temperature}: must be > 0 "
                "(use greedy=True for argmax decoding)"
            )
        if self.top_k < 0:
            raise ValueError(f"SamplingParams.top_k={self.top_k}: must be >= 0 (0 disables it)")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"SamplingParams.top_p={self.top_p}: must be in (0, 1]")
        if self.max_new_tokens < 1:
            raise ValueError(f"SamplingParams.max_new_tokens={self.max_new_tokens}: must be >= 1")
