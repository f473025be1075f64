"""A chat context as one training row: token ids and the mask of tokens that carry loss.

The row is exactly what the agent sees at inference: the context is rendered with the
tokenizer's own chat template, and the tokens of a trained message are those the model would
generate after the template's generation prompt, i.e. the message's content and the token that
closes the turn (`<|im_end|>`, `<|eot_id|>`), not the role header before it and not the
newline the template writes after it.

How: the template is rendered for growing prefixes of the conversation. Message i's text is
`render(messages[: i + 1])` minus `render(messages[:i], add_generation_prompt=True)` for an
assistant message (the generation prompt belongs to the prompt) and minus `render(messages[:i])`
otherwise; each piece is tokenised on its own and the pieces are concatenated. Templates whose
prefix renderings are not prefixes of each other cannot be split this way: that is an error.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from memjax.errors import DataError
from memjax.sft.trajectories import Message


@dataclasses.dataclass(frozen=True)
class Row:
    tokens: np.ndarray  # [T] int32
    loss_mask: np.ndarray  # [T] bool: tokens that carry loss
    trajectory: int  # index of the trajectory it came from


def _render(tokenizer, messages, generation_prompt: bool) -> str:
    if not messages:
        return ""
    dicts = [{"role": m.role, "content": m.content} for m in messages]
    return tokenizer.chat_text(dicts, add_generation_prompt=generation_prompt)


def _pieces(tokenizer, messages: tuple[Message, ...]) -> list[tuple[str, bool]]:
    """(text, trained) pieces whose concatenation is the rendered context."""
    pieces: list[tuple[str, bool]] = []
    done = ""
    for i, m in enumerate(messages):
        full = _render(tokenizer, messages[: i + 1], False)
        if m.role == "assistant":
            prompt = _render(tokenizer, messages[:i], True)
            if not prompt.startswith(done) or not full.startswith(prompt):
                raise DataError(f"chat template of {tokenizer.source} is not prefix-stable")
            pieces.append((prompt[len(done) :], False))
            done = prompt
        if not full.startswith(done):
            raise DataError(f"chat template of {tokenizer.source} is not prefix-stable")
        pieces.append((full[len(done) :], m.train))
        done = full
    return pieces


def _trained_span(ids: list[int], end_ids: frozenset[int]) -> int:
    """How many leading ids of a trained piece carry loss: up to and including the last
    end-of-turn token (the template's trailing newline after it is not the model's to write)."""
    for j in range(len(ids) - 1, -1, -1):
        if ids[j] in end_ids:
            return j + 1
    return len(ids)


def context_row(tokenizer, messages: tuple[Message, ...], trajectory: int = 0) -> Row:
    end_ids = frozenset(tokenizer.eos_ids)
    tokens: list[int] = []
    mask: list[bool] = []
    for text, trained in _pieces(tokenizer, messages):
        ids = tokenizer.encode(text)
        n = _trained_span(ids, end_ids) if trained else 0
        tokens += ids
        mask += [True] * n + [False] * (len(ids) - n)
    return Row(np.asarray(tokens, np.int32), np.asarray(mask, bool), trajectory)


def trajectory_rows(tokenizer, trajectories, max_len: int) -> tuple[list[Row], dict[str, int]]:
    """Every context of every trajectory as a row; rows longer than `max_len` are cut at the
    end (counted) and rows left with no trained token are dropped (counted)."""
    rows, counts = [], {"rows": 0, "truncated_rows": 0, "dropped_rows": 0, "trained_tokens": 0}
    for t, traj in enumerate(trajectories):
        for messages in traj.contexts:
            row = context_row(tokenizer, messages, t)
            if len(row.tokens) > max_len:
                counts["truncated_rows"] += 1
                row = Row(row.tokens[:max_len], row.loss_mask[:max_len], t)
            if not row.loss_mask.any():
                counts["dropped_rows"] += 1
                continue
            rows.append(row)
            counts["rows"] += 1
            counts["trained_tokens"] += int(row.loss_mask.sum())
    return rows, counts


__all__ = ["Row", "context_row", "trajectory_rows"]
