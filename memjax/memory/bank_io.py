"""Saving and loading memory banks: atomic snapshots that load back exactly.

A saved bank is a snapshot directory (see memjax.memory.atomic) holding
    bank.json       format version, dim, step, next id, rejection counts, entries (in order)
    vectors.npy     [N, D] float32 embeddings, row i belongs to entries[i]
    oplog.jsonl     the operation log, one record per line
A crash during `save_bank` leaves the previous save loadable; `load_bank` reads the newest
complete one.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

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
        "entries": list(snap.entries),
    }
    (directory / "bank.json").write_text(json.dumps(meta, ensure_ascii=False))


def read_snapshot(directory: Path) -> tuple[BankSnapshot, int]:
    meta_file = directory / "bank.json"
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{meta_file}: unreadable bank description ({e})") from None
    if meta.get("format") != FORMAT:
        raise ValueError(f"{meta_file}: format {meta.get('format')!r}, expected {FORMAT}")
    vectors = np.load(directory / "vectors.npy")
    entries = tuple(meta["entries"])
    if vectors.shape != (len(entries), meta["dim"]):
        raise ValueError(
            f"{directory}: vectors.npy has shape {vectors.shape}, expected "
            f"({len(entries)}, {meta['dim']})"
        )
    snap = BankSnapshot(
        entries=entries,
        vectors=vectors,
        step=int(meta["step"]),
        next_id=int(meta["next_id"]),
        rejected=tuple(sorted(meta["rejected"].items())),
        log=tuple(read_log(directory / "oplog.jsonl")),
    )
    return snap, int(meta["dim"])


def save_bank(bank: MemoryBank, root: str | Path) -> Path:
    """Publishes the bank's current state as a new snapshot under `root`."""
    snap = bank.snapshot()
    return atomic_save(root, lambda d: write_snapshot(snap, bank.dim, d))


def load_bank(root: str | Path, embedder=None, **bank_kwargs) -> MemoryBank:
    """The newest complete save under `root` as a bank (with `embedder` for text search)."""
    snap, dim = read_snapshot(latest_snapshot(root))
    if embedder is not None and embedder.dim != dim:
        raise ValueError(
            f"{root}: the bank holds {dim}-d vectors, the embedder makes {embedder.dim}"
        )
    bank = MemoryBank(embedder, dim=dim, **bank_kwargs)
    bank.restore(snap)
    return bank
