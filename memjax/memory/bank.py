"""The memory bank: entries changed only by logged ADD / UPDATE / DELETE / NOOP operations.

    bank = MemoryBank(embedder)                       # any TextEncoder (memjax.memory.embedder)
    r = bank.apply(MemoryOp(ADD, text="Caroline has a dog", owner="Caroline",
                            timestamp="7 May 2023"),
                   Provenance(source_turn="D1:3", model_output=completion))
    bank.apply(MemoryOp(UPDATE, id=r.id, text="Caroline has two dogs"))
    hits = bank.search("does Caroline have pets?", k=30, owner="Caroline")

An invalid op (unknown kind, unknown or missing id, empty text, ...) is rejected: the bank is
unchanged, `bank.rejected[reason]` counts it, and the log records it like any other op. Each op
advances `bank.step` by one, accepted or not, so step numbers order the log. An op that raises
(its embedder fails, or an explicit embedding is not a finite [D] vector) leaves the bank
exactly as it was: no step, no record, no entry. Texts (op fields, text queries) pass through
`memjax.text.valid_text` first, so a lone surrogate in model output is stored as U+FFFD, not a
crash; `bank.repaired_texts` counts the ops and queries whose text needed it.

Embeddings live in one index per owner (`AutoIndex`: exact search for small banks, ScaNN for
large ones), so a per-speaker search is exact in its candidate set and never filters a global
top-k. `snapshot()`/`restore()` copy the whole state in memory (for trying an op and rolling it
back); `memjax.memory.bank_io` saves and loads it atomically.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from memjax.memory import ops as O
from memjax.memory.index import AutoIndex, ScannParams
from memjax.memory.oplog import OpRecord
from memjax.memory.ops import MemoryOp, OpResult, Provenance
from memjax.text.valid import valid_text


@dataclasses.dataclass
class MemoryEntry:
    id: str
    text: str
    owner: str
    timestamp: str | None
    created_step: int
    updated_step: int
    history: list[dict] = dataclasses.field(default_factory=list)  # older versions, oldest first

    def to_dict(self) -> dict:
        return copy.deepcopy(dataclasses.asdict(self))


class MemoryHit(NamedTuple):
    entry: MemoryEntry
    score: float


@dataclasses.dataclass(frozen=True)
class BankSnapshot:
    """A frozen copy of a bank's whole state (entries, vectors, counters, log)."""

    entries: tuple[dict, ...]
    vectors: np.ndarray  # [N, D], rows in the order of `entries`
    step: int
    next_id: int
    rejected: tuple[tuple[str, int], ...]
    log: tuple[OpRecord, ...]
    repaired_texts: int = 0


class MemoryBank:
    def __init__(
        self,
        embedder=None,
        *,
        dim: int | None = None,
        default_owner: str = "",
        max_text_chars: int = 4000,
        index_threshold: int = 20_000,
        scann: ScannParams = ScannParams(),
        clock=time.time,
    ):
        if embedder is None and dim is None:
            raise ValueError("MemoryBank needs an embedder or, with explicit embeddings, a dim")
        self.embedder = embedder
        self.dim = int(dim if dim is not None else embedder.dim)
        self.default_owner = default_owner
        self.max_text_chars = int(max_text_chars)
        self.index_threshold = int(index_threshold)
        self.scann_params = scann
        self.clock = clock
        self._reset()

    def _reset(self) -> None:
        self._entries: dict[str, MemoryEntry] = {}
        self._indexes: dict[str, AutoIndex] = {}
        self.step = 0
        self._next_id = 0
        self.rejected: Counter[str] = Counter()
        self.log: list[OpRecord] = []
        self.repaired_texts = 0

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, memory_id: str) -> bool:
        return memory_id in self._entries

    def get(self, memory_id: str) -> MemoryEntry:
        return self._entries[memory_id]

    def entries(self, owner: str | None = None) -> list[MemoryEntry]:
        return [e for e in self._entries.values() if owner is None or e.owner == owner]

    def owners(self) -> list[str]:
        return sorted({e.owner for e in self._entries.values()})

    def embedding(self, memory_id: str) -> np.ndarray:
        """[D] float32."""
        entry = self._entries[memory_id]
        return self._indexes[entry.owner].exact.get(memory_id)

    def search(self, query, k: int = 30, owner: str | None = None) -> list[MemoryHit]:
        """Top-k memories for one query (a text, or a [D] vector), best first."""
        return self.search_batch([query], k, owner)[0]

    def search_batch(
        self, queries: Sequence, k: int = 30, owner: str | None = None
    ) -> list[list[MemoryHit]]:
        """Top-k per query; queries are all texts or all [D] vectors. owner=None searches
        every owner and merges by score."""
        if not len(queries):
            return []
        if isinstance(queries[0], str):
            if self.embedder is None:
                raise ValueError("text queries need a bank with an embedder")
            texts = [valid_text(t) for t in queries]
            self.repaired_texts += sum(a is not b for a, b in zip(texts, queries))
            q = self.embedder.encode(texts, kind="query")
        else:
            q = np.asarray(queries, np.float32).reshape(len(queries), self.dim)
        owners = [owner] if owner is not None else list(self._indexes)
        merged: list[list[tuple[float, str]]] = [[] for _ in range(len(q))]
        for o in owners:
            if o not in self._indexes:
                continue
            for row, hits in zip(merged, self._indexes[o].search(q, k)):
                row.extend((h.score, h.id) for h in hits)
        return [
            [MemoryHit(self._entries[i], s) for s, i in sorted(row, key=lambda x: -x[0])[:k]]
            for row in merged
        ]

    # ------------------------------------------------------------------ writing

    def apply(self, op: MemoryOp, provenance: Provenance | None = None, embedding=None) -> OpResult:
        """Validates and applies one op; `embedding` ([D]) skips the embedder for ADD/UPDATE."""
        vector = None
        op = self._valid_fields(op)
        if embedding is not None:
            vector = np.asarray(embedding, np.float32).reshape(self.dim)
        return self._apply(op, provenance or Provenance(), vector)

    def apply_many(
        self,
        ops: Sequence[MemoryOp],
        provenance: Provenance | Sequence[Provenance] | None = None,
        embeddings=None,
    ) -> list[OpResult]:
        """Applies ops in order (later ops see earlier ones), embedding all their texts in one
        batch. `provenance`: one for all ops, or one per op. `embeddings`: [len(ops), D] to
        skip the embedder. The texts are embedded before any op applies: when embedding
        raises, no op of the batch has changed the bank."""
        ops = [self._valid_fields(op) for op in ops]
        if embeddings is None:
            texts = [op.text for op in ops if _wants_vector(op)]
            vecs = iter(self._embed(texts)) if texts else iter(())
            vectors = [next(vecs) if _wants_vector(op) else None for op in ops]
        else:
            vectors = list(np.asarray(embeddings, np.float32).reshape(len(ops), self.dim))
        if provenance is None or isinstance(provenance, Provenance):
            provenance = [provenance or Provenance()] * len(ops)
        if len(provenance) != len(ops):
            raise ValueError(f"{len(ops)} ops but {len(provenance)} provenances")
        return [self._apply(op, p, v) for op, p, v in zip(ops, provenance, vectors)]

    def _valid_fields(self, op):
        """`op` with its text fields made valid text (memjax.text.valid), counted when changed."""
        if not isinstance(op, MemoryOp):
            return op
        fields = {
            name: valid_text(value)
            for name in ("id", "text", "owner", "timestamp")
            if isinstance(value := getattr(op, name), str)
        }
        changed = {k: v for k, v in fields.items() if v is not getattr(op, k)}
        if not changed:
            return op
        self.repaired_texts += 1
        return dataclasses.replace(op, **changed)

    def _embed(self, texts: list[str]) -> np.ndarray:
        if self.embedder is None:
            raise ValueError("this bank has no embedder; pass embeddings explicitly")
        return self.embedder.encode(texts, kind="passage")

    def _validate(self, op: MemoryOp) -> str | None:
        if not isinstance(op, MemoryOp) or op.kind not in O.KINDS:
            return O.UNKNOWN_KIND
        if op.kind == O.NOOP:
            return None
        if op.id is not None and (not isinstance(op.id, str) or not op.id.strip()):
            return O.BAD_FIELD
        if op.owner is not None and not isinstance(op.owner, str):
            return O.BAD_FIELD
        if op.timestamp is not None and not isinstance(op.timestamp, str):
            return O.BAD_FIELD
        if op.kind in (O.UPDATE, O.DELETE):
            if op.id is None:
                return O.MISSING_ID
            if op.id not in self._entries:
                return O.UNKNOWN_ID
        if op.kind == O.ADD and op.id is not None and op.id in self._entries:
            return O.DUPLICATE_ID
        if op.kind in (O.ADD, O.UPDATE):
            if not isinstance(op.text, str) or not op.text.strip():
                return O.EMPTY_TEXT
            if len(op.text) > self.max_text_chars:
                return O.TEXT_TOO_LONG
        return None

    def _apply(self, op: MemoryOp, prov: Provenance, vector) -> OpResult:
        if prov.time is None:
            prov = dataclasses.replace(prov, time=float(self.clock()))
        reason = self._validate(op)
        before = None
        memory_id = op.id if isinstance(op, MemoryOp) and isinstance(op.id, str) else None
        if reason is None and op.kind in (O.ADD, O.UPDATE):
            # Everything that can raise comes before the first change of state (step included),
            # so a failed op leaves the bank exactly as it was and it still saves and loads.
            if vector is None:
                vector = self._embed([op.text])[0]
            if vector.shape != (self.dim,) or not np.isfinite(vector).all():
                raise ValueError(f"embedding must be a finite [{self.dim}] vector")
        self.step += 1
        if reason is not None:
            self.rejected[reason] += 1
        elif op.kind == O.ADD:
            memory_id = op.id if op.id is not None else self._new_id()
            owner = op.owner if op.owner is not None else self.default_owner
            self._entries[memory_id] = MemoryEntry(
                memory_id, op.text, owner, op.timestamp, self.step, self.step
            )
            self._index(owner).upsert([memory_id], vector[None])
        elif op.kind == O.UPDATE:
            entry = self._entries[memory_id]
            before = entry.to_dict()
            entry.history.append(
                {"text": entry.text, "timestamp": entry.timestamp, "step": entry.updated_step}
            )
            entry.text = op.text
            if op.timestamp is not None:
                entry.timestamp = op.timestamp
            entry.updated_step = self.step
            self._index(entry.owner).upsert([memory_id], vector[None])
        elif op.kind == O.DELETE:
            entry = self._entries.pop(memory_id)
            before = entry.to_dict()
            self._indexes[entry.owner].delete([memory_id])
            if not len(self._indexes[entry.owner]):
                del self._indexes[entry.owner]
        accepted = reason is None
        if isinstance(op, MemoryOp) and op.kind == O.NOOP:
            memory_id = None
        record_op = op if isinstance(op, MemoryOp) else MemoryOp(kind=O.UNKNOWN_KIND)
        self.log.append(
            OpRecord(len(self.log), self.step, record_op, prov, accepted, memory_id, reason, before)
        )
        return OpResult(accepted, memory_id, reason)

    def _new_id(self) -> str:
        while str(self._next_id) in self._entries:  # caller-chosen ids may occupy numbers
            self._next_id += 1
        memory_id = str(self._next_id)
        self._next_id += 1
        return memory_id

    def _index(self, owner: str) -> AutoIndex:
        if owner not in self._indexes:
            self._indexes[owner] = AutoIndex(self.dim, self.index_threshold, self.scann_params)
        return self._indexes[owner]

    # ------------------------------------------------------------------ state

    def snapshot(self) -> BankSnapshot:
        entries = tuple(e.to_dict() for e in self._entries.values())
        vectors = np.zeros((len(entries), self.dim), np.float32)  # [N, D]
        for i, e in enumerate(entries):
            vectors[i] = self.embedding(e["id"])
        return BankSnapshot(
            entries=entries,
            vectors=vectors,
            step=self.step,
            next_id=self._next_id,
            rejected=tuple(sorted(self.rejected.items())),
            log=tuple(self.log),
            repaired_texts=self.repaired_texts,
        )

    def restore(self, snap: BankSnapshot) -> None:
        self._reset()
        by_owner: dict[str, list[int]] = {}
        for i, d in enumerate(snap.entries):
            entry = MemoryEntry(**copy.deepcopy(d))
            self._entries[entry.id] = entry
            by_owner.setdefault(entry.owner, []).append(i)
        for owner, rows in by_owner.items():
            self._index(owner).upsert([snap.entries[i]["id"] for i in rows], snap.vectors[rows])
        self.step = snap.step
        self._next_id = snap.next_id
        self.rejected = Counter(dict(snap.rejected))
        self.log = list(snap.log)
        self.repaired_texts = snap.repaired_texts


def _wants_vector(op) -> bool:
    return (
        isinstance(op, MemoryOp)
        and op.kind in (O.ADD, O.UPDATE)
        and isinstance(op.text, str)
        and bool(op.text.strip())
    )
