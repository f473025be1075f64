"""The context window: every position a row reaches must be one the model was trained on.

A row whose prompt has n tokens and which may sample `max_new_tokens` more reaches position
n + max_new_tokens - 1, so it needs n + max_new_tokens <= max_position_embeddings. Beyond it
RoPE extrapolates past the trained range and the model degrades without any error, so the
sampler refuses such a call, naming the row and the sizes. With
`SamplingParams(context_overflow="truncate_prompt")` it keeps each over-long prompt's last
max_position_embeddings - max_new_tokens tokens instead (the most recent context, as
`truncation_side="left"` tokenizers and vLLM's `truncate_prompt_tokens` keep).
A continuation cannot be truncated (its history is already in the cache): it is an error.
"""

from __future__ import annotations

from collections.abc import Sequence

TRUNCATE_PROMPT = "truncate_prompt"  # one of SamplingParams.context_overflow's modes


class ContextWindowError(ValueError):
    pass


def fit_prompts(
    prompts: Sequence[Sequence[int]], max_new_tokens: int, max_positions: int, overflow: str
) -> list[list[int]]:
    """The prompts, each within the window (left-truncated when `overflow` asks for it)."""
    room = max_positions - max_new_tokens  # prompt tokens that fit beside the new ones
    if room < 1:
        raise ContextWindowError(
            f"max_new_tokens={max_new_tokens} leaves no room for a prompt in the model's "
            f"max_position_embeddings={max_positions}"
        )
    out = []
    for i, prompt in enumerate(prompts):
        if len(prompt) > room:
            if overflow != TRUNCATE_PROMPT:
                raise ContextWindowError(
                    f"prompt {i} has {len(prompt)} tokens; with max_new_tokens={max_new_tokens} "
                    f"it needs {len(prompt) + max_new_tokens} positions, more than the model's "
                    f"max_position_embeddings={max_positions} (shorten it, lower max_new_tokens, "
                    f"or set context_overflow='{TRUNCATE_PROMPT}')"
                )
            prompt = prompt[len(prompt) - room :]
        out.append(list(prompt))
    return out


def check_continuation(
    next_positions: Sequence[int], max_new_tokens: int, max_positions: int
) -> None:
    """next_positions: per row, the position after its appended chunk (its first new token)."""
    for i, start in enumerate(next_positions):
        if int(start) + max_new_tokens > max_positions:
            raise ContextWindowError(
                f"row {i} continues at position {int(start)}; with max_new_tokens="
                f"{max_new_tokens} it needs {int(start) + max_new_tokens} positions, more than "
                f"the model's max_position_embeddings={max_positions} (a live context cannot be "
                "truncated: start a fresh sample from a shorter history)"
            )
