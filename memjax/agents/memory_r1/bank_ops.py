"""Between Memory-R1's agents and the memory bank: related memories, applying ops, retrieval.

    related = related_memories(bank, facts, owner="Alice", k=10)   # the manager's M_old
    ids = IdMap.from_memories([(e.id, e.text) for e in related])
    results = apply_manager_ops(bank, parse.ops, owner="Alice", timestamp=date,
                                provenance=Provenance(source_turn="D3:5", model_output=text))
    memories = answer_memories(bank, "Alice", question, k=30)     # [(timestamp, text)]

One bank holds a conversation; each memory's owner is the speaker it is about, so the manager
sees (and may change) only that speaker's memories and the answer agent retrieves 30 per
speaker, as Mem0's evaluation and Memory-R1 (§3.2) do.
"""

from __future__ import annotations

from collections.abc import Sequence

from memjax.agents.memory_r1.manager_parser import MemoryOp as AgentOp
from memjax.memory import ops as bank_ops
from memjax.memory.bank import MemoryBank, MemoryEntry
from memjax.memory.ops import OpResult, Provenance

# The manager writes NOOP as "NONE" (Mem0's schema); the bank calls it NOOP.
_KIND = {"ADD": bank_ops.ADD, "UPDATE": bank_ops.UPDATE, "DELETE": bank_ops.DELETE}


def related_memories(
    bank: MemoryBank, facts: Sequence[str], owner: str, k: int = 10
) -> list[MemoryEntry]:
    """The owner's memories closest to any of the facts: each fact's top-k, merged by best
    score, best first, at most k (Alg. 3's TopK(f_i, M), k not given by the paper)."""
    if not facts or k < 1:
        return []
    best: dict[str, tuple[float, MemoryEntry]] = {}
    for hits in bank.search_batch(list(facts), k=k, owner=owner):
        for entry, score in hits:
            if entry.id not in best or score > best[entry.id][0]:
                best[entry.id] = (score, entry)
    ranked = sorted(best.values(), key=lambda x: -x[0])
    return [entry for _, entry in ranked[:k]]


def to_bank_op(op: AgentOp, owner: str, timestamp: str | None) -> bank_ops.MemoryOp:
    """A parsed manager op (real ids) -> the bank's op, owned by the turn's speaker."""
    if op.op == "NONE":
        return bank_ops.MemoryOp(bank_ops.NOOP, id=op.real_id, text=op.text, owner=owner)
    return bank_ops.MemoryOp(
        _KIND[op.op],
        id=op.real_id,
        text=op.text if op.op != "DELETE" else None,
        owner=owner if op.op == "ADD" else None,
        # An ADD or UPDATE is dated by the session the fact came from.
        timestamp=timestamp if op.op in ("ADD", "UPDATE") else None,
    )


def apply_manager_ops(
    bank: MemoryBank,
    ops: Sequence[AgentOp],
    owner: str,
    timestamp: str | None,
    provenance: Provenance | None = None,
) -> list[OpResult]:
    """Applies the ops in order (one embedding batch), each logged with the provenance."""
    return bank.apply_many([to_bank_op(op, owner, timestamp) for op in ops], provenance)


def answer_memories(
    bank: MemoryBank, owner: str, question: str, k: int = 30
) -> list[tuple[str, str]]:
    """The owner's top-k memories for a question as (timestamp, text), best first."""
    hits = bank.search(question, k=k, owner=owner) if k > 0 else []
    return [(entry.timestamp or "unknown date", entry.text) for entry, _ in hits]


def answer_memories_batch(
    bank: MemoryBank, owners: Sequence[str], questions: Sequence[str], k: int = 30
) -> list[list[list[tuple[str, str]]]]:
    """[question][owner] -> that owner's top-k (timestamp, text) for the question; one
    embedding batch for all questions."""
    if not questions:
        return []
    vectors = bank.embedder.encode(list(questions), kind="query")  # [Q, D]
    out: list[list[list[tuple[str, str]]]] = [[] for _ in questions]
    for owner in owners:
        rows = bank.search_batch(list(vectors), k=k, owner=owner) if k > 0 else [[]] * len(out)
        for q, hits in enumerate(rows):
            out[q].append([(e.timestamp or "unknown date", e.text) for e, _ in hits])
    return out


def memory_tokens(bank: MemoryBank, count_tokens) -> int:
    """Tokens of every memory text in the bank, by `count_tokens(text) -> int`."""
    return sum(count_tokens(e.text) for e in bank.entries())
