"""Saving and loading memory banks: atomic snapshots that load back exactly.

A saved bank is a snapshot directory (see memjax.memory.atomic) holding
    bank.json       format version, dim, step, next id, rejection counts, entries (in order)
    vectors.npy     [N, D] float32 embeddings, row i belongs to entries[i]
    oplog.jsonl     the operation log, one record per line
A crash during `save_bank` leaves the previous save loadable; `load_bank` reads the newest
complete one. Loading checks every file's types and that they agree with each other (one row
of vectors per entry, one log record per step); any corruption is one DataFileError
(memjax.errors) naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from memjax.errors import DataFileError
from memjax.memory.atomic import atomic_save, latest_snapshot
from memjax.memory.bank import BankSnapshot, MemoryBank
from memjax.memory.oplog import read_log, write_log

FORMAT = 1


def write_snapshot(snap: BankSnapshot, dim: int, directory: Path) -> None:
    np.save(directory / "vectors.npy", snap.vectors)
    write_log(snap.log, directory / "oplog.jsonl")
    meta = {
        "format": FORMAT,
        "dim": dim,
        "step": snap.step,
        "next_id": snap.next_id,
        "rejected": dict(snap.rejected),
        "repaired_texts": snap.repaired_texts,
        "entries": list(snap.entries),
    }
    (directory / "bank.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")


def read_snapshot(directory: Path) -> tuple[BankSnapshot, int]:
    """A saved snapshot, checked whole: every corruption is one DataFileError naming its file."""
    meta_file = directory / "bank.json"
    meta = _read_meta(meta_file)
    entries = tuple(meta["entries"])
    vectors = _read_vectors(directory / "vectors.npy", len(entries), meta["dim"])
    log = read_log(directory / "oplog.jsonl")
    step = meta["step"]
    if len(log) != step or (log and log[-1].step != step):
        last = log[-1].step if log else 0
        raise DataFileError(
            f"{directory / 'oplog.jsonl'}: {len(log)} records ending at step {last}, but "
            f"{meta_file} is at step {step} and every operation logs one record: the log was "
            "cut or records were lost"
        )
    repaired = meta.get("repaired_texts", 0)  # banks saved before the count existed have none
    if not _count(repaired):
        raise DataFileError(f'{meta_file}: "repaired_texts" must be a count, got {repaired!r}')
    snap = BankSnapshot(
        entries=entries,
        vectors=vectors,
        step=step,
        next_id=meta["next_id"],
        rejected=tuple(sorted(meta["rejected"].items())),
        log=tuple(log),
        repaired_texts=repaired,
    )
    return snap, meta["dim"]


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


_ENTRY_TYPES = {
    "id": (str,),
    "text": (str,),
    "owner": (str,),
    "timestamp": (str, type(None)),
    "created_step": (int,),
    "updated_step": (int,),
    "history": (list,),
}


def _read_meta(meta_file: Path) -> dict:
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataFileError(f"{meta_file}: the bank description is missing") from None
    except (OSError, ValueError, RecursionError) as e:  # JSON and UTF-8 errors are ValueErrors
        raise DataFileError(f"{meta_file}: unreadable bank description ({e})") from None
    if not isinstance(meta, dict):
        raise DataFileError(f"{meta_file}: must hold a JSON object, got {type(meta).__name__}")
    if meta.get("format") != FORMAT:
        raise DataFileError(f"{meta_file}: format {meta.get('format')!r}, expected {FORMAT}")
    for key in ("dim", "step", "next_id"):
        if not _count(meta.get(key)) or (key == "dim" and meta[key] == 0):
            kind = "a positive" if key == "dim" else "a non-negative"
            raise DataFileError(
                f'{meta_file}: "{key}" must be {kind} integer, got {meta.get(key)!r}'
            )
    rejected = meta.get("rejected")
    if not isinstance(rejected, dict) or not all(_count(n) for n in rejected.values()):
        raise DataFileError(f'{meta_file}: "rejected" must map reasons to counts')
    entries = meta.get("entries")
    if not isinstance(entries, list):
        raise DataFileError(f'{meta_file}: "entries" must be a list')
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) != set(_ENTRY_TYPES):
            raise DataFileError(
                f"{meta_file}: entries[{i}] must be an object with fields {sorted(_ENTRY_TYPES)}"
            )
        for key, types in _ENTRY_TYPES.items():
            value = entry[key]
            if not isinstance(value, types) or isinstance(value, bool):
                raise DataFileError(f'{meta_file}: entries[{i}]["{key}"] has the wrong type')
        if entry["id"] in seen:
            raise DataFileError(f"{meta_file}: entries[{i}] repeats id {entry['id']!r}")
        seen.add(entry["id"])
    return meta


def _read_vectors(path: Path, rows: int, dim: int) -> np.ndarray:
    try:
        vectors = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise DataFileError(f"{path}: the embeddings file is missing") from None
    except (OSError, ValueError, EOFError) as e:  # truncated, not .npy, or pickled objects
        raise DataFileError(f"{path}: unreadable embeddings ({e})") from None
    if not isinstance(vectors, np.ndarray) or vectors.dtype != np.float32:
        raise DataFileError(f"{path}: embeddings must be float32, got {vectors.dtype}")
    if vectors.shape != (rows, dim):
        raise DataFileError(
            f"{path}: shape {vectors.shape}, but bank.json holds {rows} entries of dim {dim}"
        )
    if not np.isfinite(vectors).all():
        raise DataFileError(f"{path}: embeddings contain NaN or infinity")
    return vectors


def save_bank(bank: MemoryBank, root: str | Path) -> Path:
    """Publishes the bank's current state as a new snapshot under `root`."""
    snap = bank.snapshot()
    return atomic_save(root, lambda d: write_snapshot(snap, bank.dim, d))


def load_bank(root: str | Path, embedder=None, **bank_kwargs) -> MemoryBank:
    """The newest complete save under `root` as a bank (with `embedder` for text search)."""
    return read_bank(latest_snapshot(root), embedder, **bank_kwargs)


def read_bank(directory: str | Path, embedder=None, **bank_kwargs) -> MemoryBank:
    """The bank in one snapshot directory (as `write_snapshot` fills it)."""
    snap, dim = read_snapshot(Path(directory))
    if embedder is not None and embedder.dim != dim:
        raise DataFileError(
            f"{directory}: the bank holds {dim}-d vectors, the embedder makes {embedder.dim}"
        )
    bank = MemoryBank(embedder, dim=dim, **bank_kwargs)
    bank.restore(snap)
    return bank
