"""A chat context as one training row: token ids and the mask of tokens that carry loss.

The row is exactly what the agent sees at inference: the context is rendered with the
tokenizer's own chat template, and the tokens of a trained message are those the model would
generate after the template's generation prompt, i.e. the message's content and the token that
closes the turn (`<|im_end|>`, `<|eot_id|>`), not the role header before it and not the
newline the template writes after it.

How: the template is rendered for growing prefixes of the conversation. Message i's text is
`render(messages[: i + 1])` minus `render(messages[:i], add_generation_prompt=True)` for an
assistant message (the generation prompt belongs to the prompt) and minus `render(messages[:i])`
otherwise; each piece is tokenised on its own and the pieces are concatenated. Consecutive
assistant messages are one turn (Search-R1 writes retrieved `<information>` inside its own
growing turn): they render as one message, and each part keeps its own train flag. Templates
whose prefix renderings are not prefixes of each other cannot be split this way: an error.
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


def _turns(messages: tuple[Message, ...]) -> list[list[Message]]:
    """Messages grouped into template turns: consecutive assistant messages are one turn (a
    Search-R1-style agent writes one growing assistant turn with retrieved text inside it)."""
    turns: list[list[Message]] = []
    for m in messages:
        if turns and m.role == "assistant" and turns[-1][-1].role == "assistant":
            turns[-1].append(m)
        else:
            turns.append([m])
    return turns


def _merged(parts: list[Message]) -> Message:
    return Message(parts[0].role, "".join(p.content for p in parts), parts[-1].train)


def _pieces(tokenizer, messages: tuple[Message, ...]) -> list[tuple[str, bool]]:
    """(text, trained) pieces whose concatenation is the rendered context."""
    turns = _turns(messages)
    merged = [_merged(parts) for parts in turns]
    stable = f"chat template of {tokenizer.source} is not prefix-stable"
    pieces: list[tuple[str, bool]] = []
    done = ""
    for i, parts in enumerate(turns):
        full = _render(tokenizer, merged[: i + 1], False)
        if parts[0].role == "assistant":
            prompt = _render(tokenizer, merged[:i], True)
            if not prompt.startswith(done) or not full.startswith(prompt):
                raise DataError(stable)
            pieces.append((prompt[len(done) :], False))
            done = prompt
        if not full.startswith(done):
            raise DataError(stable)
        body = full[len(done) :]
        if len(parts) > 1:  # one turn, several parts: each keeps its own train flag
            if not body.startswith(merged[i].content):
                raise DataError(f"chat template of {tokenizer.source} rewrites message text")
            pieces += [(p.content, p.train) for p in parts]
            body = body[len(merged[i].content) :]  # the end of the turn, after the last part
        pieces.append((body, merged[i].train))
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


def role_rows(tokenizer, trajectories, role: str, limit: int) -> list[Row]:
    """The first `limit` context rows of `role`'s trajectories, in file order, uncut: a fixed
    sample for the diagnostic and benchmark tools."""
    rows = []
    for t, traj in enumerate(trajectories):
        if traj.role == role:
            rows += [context_row(tokenizer, messages, t) for messages in traj.contexts]
        if len(rows) >= limit:
            break
    return rows[:limit]


__all__ = ["Row", "context_row", "role_rows", "trajectory_rows"]
