"""Built memory banks on disk: one directory per conversation, built once and reused.

    banks = ensure_banks(conversations, fact_policy, manager_policy, embedder, settings, root)

root/<conversation>/bank/       the bank (memjax.memory.bank_io: atomic, newest save wins)
root/<conversation>/trace.jsonl one line per turn: facts, manager output, ops and outcomes
root/<conversation>/build.json  counters and the latencies of the build (for the report)
A conversation whose build.json exists is loaded, not rebuilt (build.json is written last).
All missing conversations are built together, advancing turn by turn in one batch.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from memjax.agents.memory_r1.construction import (
    ConstructionSettings,
    build_banks,
    conversation_stream,
)
from memjax.agents.memory_r1.policy import TimedPolicy
from memjax.data.locomo_types import Conversation
from memjax.memory.bank import MemoryBank
from memjax.memory.bank_io import load_bank, save_bank


@dataclasses.dataclass
class StoredBanks:
    banks: dict[str, MemoryBank]  # conversation id -> bank
    counters: Counter
    latency: dict[str, list[float]]  # role -> seconds per item, over all conversations
    built: list[str]  # conversations built in this call (the rest were loaded)


def ensure_banks(
    conversations: Sequence[Conversation],
    fact_policy: TimedPolicy,
    manager_policy: TimedPolicy,
    embedder,
    settings: ConstructionSettings,
    root: str | Path,
    progress: bool = True,
) -> StoredBanks:
    root = Path(root)
    todo = [c for c in conversations if not (root / c.sample_id / "build.json").is_file()]
    out = StoredBanks({}, Counter(), {"fact_extraction": [], "manager": []}, [])
    if todo:
        n_facts, n_manager = len(fact_policy.seconds), len(manager_policy.seconds)
        result = build_banks(
            [conversation_stream(c) for c in todo],
            fact_policy,
            manager_policy,
            embedder,
            settings,
            progress=progress,
        )
        # A batched call served every conversation in it; each gets the same latencies.
        latency = {
            "fact_extraction": fact_policy.seconds[n_facts:],
            "manager": manager_policy.seconds[n_manager:],
        }
        for conv, bank, trace in zip(todo, result.banks, result.traces):
            directory = root / conv.sample_id
            directory.mkdir(parents=True, exist_ok=True)
            save_bank(bank, directory / "bank")
            with open(directory / "trace.jsonl", "w") as f:
                for t in trace:
                    f.write(json.dumps(dataclasses.asdict(t), ensure_ascii=False) + "\n")
            build = {
                "counters": dict(result.counters),
                "latency": latency,
                "memories": len(bank),
                "batch": [c.sample_id for c in todo],
            }
            tmp = directory / "build.json.tmp"
            tmp.write_text(json.dumps(build))
            tmp.replace(directory / "build.json")
        out.built = [c.sample_id for c in todo]
    seen_batches: set[tuple[str, ...]] = set()
    for conv in conversations:
        directory = root / conv.sample_id
        out.banks[conv.sample_id] = load_bank(directory / "bank", embedder)
        build = json.loads((directory / "build.json").read_text())
        batch = tuple(build.get("batch", [conv.sample_id]))
        if batch not in seen_batches:  # a batch built together shares its numbers: count once
            seen_batches.add(batch)
            out.counters.update(build["counters"])
            for role, seconds in build["latency"].items():
                out.latency.setdefault(role, []).extend(seconds)
    return out
