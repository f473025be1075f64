"""SFT trajectories: what a teacher writes and the SFT loader reads (one JSON object a line).

    {"id": str, "role": "manager"|"facts"|"answer"|"memsearcher"|"search_r1", "split": str,
     "source": {...}, "contexts": [[{"role", "content", "train"?}, ...], ...], "reward": float}

One context is one training row: a chat rendered through the tokenizer's chat template. By
default only assistant messages carry loss; `"train": false` turns one off (an environment's
text inside a growing assistant turn). Consecutive assistant messages are ONE assistant turn,
their contents concatenated: Search-R1 writes its searches and the retrieved `<information>`
into a single growing turn, so its passages are an assistant message with `"train": false`
between the model's own segments. `source` says where the trajectory comes from (data file,
conversation/question ids, seed, settings) so it can be replayed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROLES = ("facts", "manager", "answer", "memsearcher", "search_r1")
MESSAGE_ROLES = ("system", "user", "assistant", "tool")


class TrajectoryFormatError(ValueError):
    """A trajectory file or object without the expected layout; the message says where."""


@dataclasses.dataclass
class Trajectory:
    id: str
    role: str
    split: str
    source: dict[str, Any]
    contexts: list[list[dict[str, Any]]]
    reward: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, obj: Any, where: str = "trajectory") -> Trajectory:
        if not isinstance(obj, dict):
            raise TrajectoryFormatError(f"{where}: expected an object, got {type(obj).__name__}")
        for key, kind in (("id", str), ("role", str), ("split", str), ("source", dict)):
            if not isinstance(obj.get(key), kind):
                raise TrajectoryFormatError(f"{where}: field {key!r} should be {kind.__name__}")
        if obj["role"] not in ROLES:
            raise TrajectoryFormatError(f"{where}: role {obj['role']!r}; valid: {ROLES}")
        contexts = obj.get("contexts")
        if not isinstance(contexts, list) or not contexts:
            raise TrajectoryFormatError(f"{where}: field 'contexts' should be a non-empty list")
        for c, context in enumerate(contexts):
            _check_context(context, f"{where}: contexts[{c}]")
        reward = obj.get("reward", 0.0)
        if not isinstance(reward, (int, float)) or isinstance(reward, bool):
            raise TrajectoryFormatError(f"{where}: field 'reward' should be a number")
        return cls(obj["id"], obj["role"], obj["split"], obj["source"], contexts, float(reward))


def _check_context(context: Any, where: str) -> None:
    if not isinstance(context, list) or not context:
        raise TrajectoryFormatError(f"{where}: a context should be a non-empty list of messages")
    for m, message in enumerate(context):
        if not isinstance(message, dict):
            raise TrajectoryFormatError(f"{where}[{m}]: a message should be an object")
        if message.get("role") not in MESSAGE_ROLES:
            raise TrajectoryFormatError(
                f"{where}[{m}]: role {message.get('role')!r}; valid: {MESSAGE_ROLES}"
            )
        if not isinstance(message.get("content"), str):
            raise TrajectoryFormatError(f"{where}[{m}]: field 'content' should be a string")
        if "train" in message and not isinstance(message["train"], bool):
            raise TrajectoryFormatError(f"{where}[{m}]: field 'train' should be true or false")


def message(role: str, content: str, train: bool | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"role": role, "content": content}
    if train is not None:
        out["train"] = train
    return out


def trained(msg: dict[str, Any]) -> bool:
    """Whether a message carries loss: assistant messages unless `train` says otherwise."""
    return bool(msg.get("train", msg["role"] == "assistant"))


def write_trajectories(path: str | Path, trajectories: Iterable[Trajectory]) -> int:
    """Writes jsonl atomically (temp file, then rename); returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for t in trajectories:
            f.write(json.dumps(t.to_json(), ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(path)
    return n


def read_trajectories(path: str | Path) -> list[Trajectory]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"trajectory file {path} does not exist")
    out = []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise TrajectoryFormatError(f"{path}:{line_no}: invalid JSON ({e.msg})") from None
            out.append(Trajectory.from_json(obj, f"{path}:{line_no}"))
    return out


def assistant_texts(context: Sequence[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in context if m["role"] == "assistant"]
