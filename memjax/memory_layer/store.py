"""Each user's memories on disk: a bank snapshot plus the memory layer's own records, atomically.

    root/users/<sha256(user_id)[:32]>/LATEST, snapshot-N/   (memjax.memory.atomic)
        bank.json, vectors.npy, oplog.jsonl      the bank (memjax.memory.bank_io)
        memory_layer.json                        user id; per memory: metadata, created/updated

Both parts are written into one snapshot directory, so a crash leaves the previous save whole
and bank and records always agree. A user's directory name is a hash of the id, so any id is
a safe path and no id can reach another user's directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from memjax.errors import DataFileError
from memjax.memory.atomic import LATEST, atomic_save, latest_snapshot
from memjax.memory.bank import MemoryBank
from memjax.memory.bank_io import read_snapshot, write_snapshot

FORMAT = 1
RECORDS_FILE = "memory_layer.json"


@dataclasses.dataclass
class MemoryRecord:
    """What Mem0 keeps beside a memory's text: its metadata and times (ISO 8601, UTC)."""

    metadata: dict
    created_at: str
    updated_at: str


@dataclasses.dataclass
class UserMemories:
    user_id: str
    bank: MemoryBank
    records: dict[str, MemoryRecord]  # memory id -> record, for every entry in the bank


def user_dir(root: Path, user_id: str) -> Path:
    return Path(root) / "users" / hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:32]


def save_user(root: Path, user: UserMemories) -> Path:
    """Publishes the user's bank and records as one new snapshot."""
    snap = user.bank.snapshot()
    sidecar = {
        "format": FORMAT,
        "user_id": user.user_id,
        "records": {k: dataclasses.asdict(r) for k, r in user.records.items()},
    }

    def write(directory: Path) -> None:
        write_snapshot(snap, user.bank.dim, directory)
        text = json.dumps(sidecar, ensure_ascii=False)
        (directory / RECORDS_FILE).write_text(text, encoding="utf-8")

    return atomic_save(user_dir(root, user.user_id), write)


def _read_records(path: Path, ids: set[str]) -> tuple[str, dict[str, MemoryRecord]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataFileError(f"{path}: the memory records are missing") from None
    except (OSError, ValueError, RecursionError) as e:
        raise DataFileError(f"{path}: unreadable memory records ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DataFileError(f"{path}: expected an object with format {FORMAT}")
    user_id, raw = data.get("user_id"), data.get("records")
    if not isinstance(user_id, str) or not isinstance(raw, dict):
        raise DataFileError(f'{path}: "user_id" must be a string and "records" an object')
    if set(raw) != ids:
        raise DataFileError(f"{path}: its records do not name the bank's memories one to one")
    records = {}
    for memory_id, r in raw.items():
        ok = isinstance(r, dict) and isinstance(r.get("metadata"), dict)
        ok = ok and all(isinstance(r.get(k), str) for k in ("created_at", "updated_at"))
        if not ok or set(r) != {"metadata", "created_at", "updated_at"}:
            raise DataFileError(f"{path}: record {memory_id!r} is malformed")
        records[memory_id] = MemoryRecord(**r)
    return user_id, records


def load_user(directory: Path, embedder) -> UserMemories:
    """One user's newest complete save (a DataFileError naming the file when corrupt)."""
    snapshot = latest_snapshot(directory)
    snap, dim = read_snapshot(snapshot)
    if embedder.dim != dim:
        raise DataFileError(f"{snapshot}: {dim}-d vectors, the embedder makes {embedder.dim}")
    bank = MemoryBank(embedder, dim=dim)
    bank.restore(snap)
    ids = {e.id for e in bank.entries()}
    user_id, records = _read_records(snapshot / RECORDS_FILE, ids)
    if user_dir(directory.parent.parent, user_id) != directory:
        raise DataFileError(f"{snapshot / RECORDS_FILE}: user {user_id!r} is not this directory's")
    return UserMemories(user_id, bank, records)


def load_all(root: Path, embedder) -> dict[str, UserMemories]:
    """Every saved user under root, by user id."""
    users: dict[str, UserMemories] = {}
    base = Path(root) / "users"
    for directory in sorted(base.iterdir()) if base.is_dir() else []:
        if (directory / LATEST).is_file():
            user = load_user(directory, embedder)
            users[user.user_id] = user
    return users
