"""SFT trajectories from jsonl: one trajectory per line, each one or more chat contexts.

    {"id": "conv-26/q3", "role": "answer", "split": "train", "source": {...}, "reward": 1.0,
     "contexts": [[{"role": "system", "content": "..."}, {"role": "user", "content": "..."},
                   {"role": "assistant", "content": "...", "train": true}], ...]}
    {"messages": [...]}          # shorthand for one context

One context is one training row. A multi-turn context (assistant, tool, assistant, ...) trains
every assistant message in it; MemSearcher's trajectories have one context per turn, each
rebuilt from (question, memory) as the agent sees it. By default only assistant messages carry
loss; a message's `"train"` overrides that (a user message can never be trained by accident:
`train` must be given explicitly).

A malformed line is a `DataError` naming the file, the line and the field.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from memjax.errors import DataError

ROLES = ("system", "user", "assistant", "tool")


@dataclasses.dataclass(frozen=True)
class Message:
    role: str
    content: str
    train: bool  # whether this message's tokens carry loss


@dataclasses.dataclass(frozen=True)
class Trajectory:
    id: str
    contexts: tuple[tuple[Message, ...], ...]
    role: str = ""  # the agent role that produced it ("manager", "memsearcher", ...)
    split: str = ""


def _message(raw, where: str) -> Message:
    if not isinstance(raw, dict):
        raise DataError(f"{where}: expected an object with role and content")
    role, content = raw.get("role"), raw.get("content")
    if role not in ROLES:
        raise DataError(f"{where}.role={role!r}: choose from {ROLES}")
    if not isinstance(content, str):
        raise DataError(f"{where}.content: expected a string")
    train = raw.get("train", role == "assistant")
    if not isinstance(train, bool):
        raise DataError(f"{where}.train={train!r}: expected true or false")
    return Message(role, content, train)


def parse_trajectory(raw, where: str, default_id: str) -> Trajectory:
    """One decoded jsonl object; `where` ("file:line") prefixes every error."""
    if not isinstance(raw, dict):
        raise DataError(f"{where}: expected a JSON object")
    if "contexts" in raw:
        contexts = raw["contexts"]
        if not isinstance(contexts, list) or not contexts:
            raise DataError(f"{where}: contexts must be a non-empty list of message lists")
    elif "messages" in raw:
        contexts = [raw["messages"]]
    else:
        raise DataError(f"{where}: needs 'contexts' or 'messages'")
    parsed = []
    for c, context in enumerate(contexts):
        if not isinstance(context, list) or not context:
            raise DataError(f"{where}: contexts[{c}] must be a non-empty list of messages")
        messages = tuple(_message(m, f"{where}: contexts[{c}][{i}]") for i, m in enumerate(context))
        if not any(m.train for m in messages):
            raise DataError(f"{where}: contexts[{c}] has no trained (assistant) message")
        parsed.append(messages)
    return Trajectory(
        id=str(raw.get("id", default_id)),
        contexts=tuple(parsed),
        role=str(raw.get("role", "")),
        split=str(raw.get("split", "")),
    )


def read_trajectories(path: str | Path) -> list[Trajectory]:
    """Every trajectory of a jsonl file (blank lines skipped); an empty file is an error."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such trajectory file")
    out = []
    with path.open("rb") as f:
        for n, line in enumerate(f, 1):
            where = f"{path}:{n}"
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{where}: not UTF-8 (byte {e.start})") from None
            if not text.strip():
                continue
            try:
                raw = json.loads(text)
            except (json.JSONDecodeError, RecursionError) as e:
                raise DataError(f"{where}: not valid JSON ({str(e)[:80]})") from None
            out.append(parse_trajectory(raw, where, default_id=f"{path.name}:{n}"))
    if not out:
        raise DataError(f"{path}: no trajectories (the file is empty)")
    return out


__all__ = ["Message", "Trajectory", "ROLES", "parse_trajectory", "read_trajectories"]
