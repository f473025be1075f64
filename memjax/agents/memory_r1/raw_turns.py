"""LoCoMo's RAG baseline memory (Table 1's "LoCoMo (RAG)" row): every dialogue turn is stored
as it was said, owned by its speaker and dated by its session. No model decides anything, so
it builds in seconds; the CPU demo trains its answer agent over these banks.
"""

from __future__ import annotations

from memjax.agents.memory_r1.construction import conversation_stream
from memjax.data.locomo_types import Conversation
from memjax.memory import ops as bank_ops
from memjax.memory.bank import MemoryBank
from memjax.memory.ops import Provenance


def raw_turn_bank(conversation: Conversation, embedder, date_only: bool = False) -> MemoryBank:
    """One ADD per turn (logged with its dia_id). `date_only` keeps "8 May, 2023" of
    "1:56 pm on 8 May, 2023" (shorter prompts)."""
    bank = MemoryBank(embedder)
    stream = conversation_stream(conversation)
    ops = [
        bank_ops.MemoryOp(
            bank_ops.ADD,
            text=t.text,
            owner=t.speaker,
            timestamp=t.date.split(" on ", 1)[-1] if date_only else t.date,
        )
        for t in stream
    ]
    bank.apply_many(ops, [Provenance(source_turn=t.dia_id, model_output=None) for t in stream])
    return bank
