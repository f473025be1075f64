"""The memory layer's inputs checked, and its outputs in Mem0's shapes.

Inputs: messages as Mem0 takes them (a string, one {"role", "content"} dict, or a list of
them; "name" optional), user ids, metadata, texts. Anything else is a MemoryInputError naming
the field, raised before a model runs. Outputs: memory items ({"id", "memory", "hash",
"metadata", "created_at", "updated_at", "user_id"}, plus "score" from search) and history
entries (Mem0's fields, plus the operation's provenance from the bank's op log).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json

from memjax.errors import UserError
from memjax.memory.bank import MemoryEntry
from memjax.memory.oplog import OpRecord

ROLES = ("user", "assistant", "system")


class MemoryInputError(UserError, ValueError):
    """A request the memory layer refuses: the message names the field and what is wrong."""


class MemoryNotFound(UserError, KeyError):
    """No memory has this id."""

    def __str__(self) -> str:  # KeyError's str() quotes its argument
        return str(self.args[0]) if self.args else "memory not found"


@dataclasses.dataclass(frozen=True)
class InputLimits:
    max_messages: int = 256
    max_message_chars: int = 16_000
    max_user_id_chars: int = 256
    max_metadata_bytes: int = 16_384
    max_query_chars: int = 4_000
    max_top_k: int = 1_000


def check_user_id(user_id, limits: InputLimits) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise MemoryInputError(f"user_id: a non-empty string is required, got {user_id!r:.80}")
    if len(user_id) > limits.max_user_id_chars or not user_id.isprintable():
        raise MemoryInputError(f"user_id: at most {limits.max_user_id_chars} printable characters")
    return user_id


def check_text(value, field: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise MemoryInputError(f"{field}: a non-empty string is required")
    if len(value) > limit:
        raise MemoryInputError(f"{field}: {len(value)} characters, at most {limit}")
    return value


def check_top_k(value, limits: InputLimits) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limits.max_top_k:
        raise MemoryInputError(f"top_k: an integer from 1 to {limits.max_top_k}, got {value!r}")
    return value


def check_metadata(metadata, limits: InputLimits) -> dict:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or not all(isinstance(k, str) for k in metadata):
        raise MemoryInputError("metadata: an object with string keys is required")
    try:
        size = len(json.dumps(metadata, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except (TypeError, ValueError) as e:
        raise MemoryInputError(f"metadata: not JSON ({e})") from None
    if size > limits.max_metadata_bytes:
        raise MemoryInputError(f"metadata: {size} bytes, at most {limits.max_metadata_bytes}")
    return json.loads(json.dumps(metadata))  # a copy the caller cannot change later


def normalise_messages(messages, limits: InputLimits) -> list[dict]:
    """Mem0's accepted forms -> [{"role", "content", "name"?}, ...]."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    elif isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list) or not messages:
        raise MemoryInputError("messages: a string, a message, or a non-empty list of messages")
    if len(messages) > limits.max_messages:
        raise MemoryInputError(f"messages: {len(messages)}, at most {limits.max_messages}")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise MemoryInputError(f"messages[{i}]: an object with role and content is required")
        if m.get("role") not in ROLES:
            raise MemoryInputError(f"messages[{i}].role: one of {', '.join(ROLES)}")
        content = check_text(m.get("content"), f"messages[{i}].content", limits.max_message_chars)
        item = {"role": m["role"], "content": content}
        name = m.get("name")
        if name is not None:
            item["name"] = check_text(name, f"messages[{i}].name", limits.max_user_id_chars)
        out.append(item)
    return out


def iso_time(unix: float) -> str:
    return datetime.datetime.fromtimestamp(unix, datetime.UTC).isoformat()


def memory_item(entry: MemoryEntry, record, user_id: str, score: float | None = None) -> dict:
    item = {
        "id": entry.id,
        "memory": entry.text,
        "hash": hashlib.md5(entry.text.encode("utf-8")).hexdigest(),
        "metadata": dict(record.metadata),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "user_id": user_id,
    }
    if score is not None:
        item["score"] = float(score)
    return item


def history_entry(record: OpRecord, user_id: str) -> dict:
    """One accepted operation on a memory, Mem0's history fields plus where it came from."""
    before = record.before or {}
    time = iso_time(record.provenance.time or 0.0)
    return {
        "id": f"{record.id}:{record.seq}",
        "memory_id": record.id,
        "old_memory": before.get("text"),
        "new_memory": record.op.text if record.op.kind != "DELETE" else None,
        "event": record.op.kind,
        "created_at": time,
        "updated_at": time if record.op.kind != "ADD" else None,
        "is_deleted": record.op.kind == "DELETE",
        "actor_id": None,
        "role": None,
        "user_id": user_id,
        "step": record.step,
        "provenance": {
            "source": record.provenance.source_turn,
            "model_output": record.provenance.model_output,
        },
    }
