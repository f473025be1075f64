"""Built memory banks on disk: one directory per conversation, built once and reused.

    banks = ensure_banks(conversations, fact_policy, manager_policy, embedder, settings, root)

root/<conversation>/bank/       the bank (memjax.memory.bank_io: atomic, newest save wins)
root/<conversation>/trace.jsonl one line per turn: facts, manager output, ops and outcomes
root/<conversation>/build.json  counters and latencies of the build (for the report), and the
                                fingerprint of what built it (memjax.fingerprint)
root/.building/<key>/           a construction in progress, saved every few manager calls
                                (build_checkpoints); gone once its banks are written
A conversation whose build.json exists is loaded, not rebuilt (build.json is written last),
provided its fingerprint matches: the conversation's turns (what the bank is made from, so an
edit elsewhere in the data file keeps it), the construction settings, and `inputs` (the
models, the embedder and the generation settings; see job_setup.bank_inputs). A bank built from
other inputs is rebuilt, with one line naming what differs. All conversations to build are
built together, advancing turn by turn in one batch, their facts read from a FactCache
(fact_cache) where an earlier build with the same extractor left them.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from memjax.agents.memory_r1.build_checkpoints import BuildCheckpoints
from memjax.agents.memory_r1.construction import (
    BuildResult,
    ConstructionSettings,
    conversation_sha256,
    conversation_stream,
    fact_outputs,
    run_manager,
    start_build,
    traces_jsonl,
)
from memjax.agents.memory_r1.fact_cache import CachedFacts, FactCache
from memjax.agents.memory_r1.policy import TimedPolicy
from memjax.data.locomo_types import Conversation
from memjax.fingerprint import describe, differences
from memjax.memory.atomic import atomic_write_text
from memjax.memory.bank import MemoryBank
from memjax.memory.bank_io import load_bank, save_bank


@dataclasses.dataclass
class StoredBanks:
    banks: dict[str, MemoryBank]  # conversation id -> bank
    counters: Counter
    latency: dict[str, list[float]]  # role -> seconds per item, over all conversations
    built: list[str]  # conversations built in this call (the rest were loaded)
    rebuilt: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # id -> what differed

    def absorb(self, other: StoredBanks) -> None:
        """Adds another call's banks, counters, latencies and rebuilds to these."""
        self.banks.update(other.banks)
        self.counters.update(other.counters)
        for role, seconds in other.latency.items():
            self.latency.setdefault(role, []).extend(seconds)
        self.built += other.built
        self.rebuilt.update(other.rebuilt)


def bank_fingerprint(
    conversation: Conversation, settings: ConstructionSettings, inputs: dict | None = None
) -> dict:
    """What a conversation's bank is built from (see the module docstring)."""
    return {
        "conversation.sha256": conversation_sha256(conversation),
        **{f"construction.{k}": v for k, v in settings.fingerprint().items()},
        **(inputs or {}),
    }


def _stale(directory: Path, fingerprint: dict) -> list[str] | None:
    """None when the saved bank may be reused; else what differs (empty: nothing saved)."""
    build_file = directory / "build.json"
    if not build_file.is_file():
        return []
    try:
        saved = json.loads(build_file.read_text(encoding="utf-8")).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return [f"{build_file} is unreadable"]
    return differences(saved, fingerprint) or None


def ensure_banks(
    conversations: Sequence[Conversation],
    fact_policy: TimedPolicy,
    manager_policy: TimedPolicy,
    embedder,
    settings: ConstructionSettings,
    root: str | Path,
    progress: bool = True,
    inputs: dict | None = None,
    *,
    fact_cache: FactCache | None = None,
    checkpoint_every: int = 10,
) -> StoredBanks:
    """The conversations' banks, loaded where built before from the same inputs, the rest
    built together (facts from `fact_cache` where saved; the construction saved every
    `checkpoint_every` manager steps and resumed from there when stopped)."""
    root = Path(root)
    out = StoredBanks({}, Counter(), {"fact_extraction": [], "manager": []}, [])
    fingerprints = {c.sample_id: bank_fingerprint(c, settings, inputs) for c in conversations}
    todo = _to_build(conversations, root, fingerprints, out.rebuilt)
    if todo:
        batch = [c.sample_id for c in todo]
        checkpoints = BuildCheckpoints(root, batch, fingerprints, checkpoint_every)
        build = _BatchBuild(todo, embedder, settings, fact_cache, checkpoints)
        build.run(fact_policy, manager_policy, progress)
        build.save(root, fingerprints)
        checkpoints.clear()
        out.built = batch
    _load(conversations, root, embedder, out)
    return out


def _to_build(conversations, root: Path, fingerprints, rebuilt: dict) -> list[Conversation]:
    """The conversations without a bank, or whose bank was built from other inputs (recorded
    in `rebuilt` with what differed, and printed)."""
    todo = []
    for conv in conversations:
        stale = _stale(root / conv.sample_id, fingerprints[conv.sample_id])
        if stale is None:
            continue
        todo.append(conv)
        if stale:
            rebuilt[conv.sample_id] = stale
            print(
                f"banks: {root / conv.sample_id} was built from other inputs "
                f"({describe(stale)}); rebuilding",
                flush=True,
            )
    return todo


@dataclasses.dataclass
class _BatchBuild:
    """One batched construction of the conversations to build (see build_checkpoints)."""

    todo: list[Conversation]
    embedder: object
    settings: ConstructionSettings
    fact_cache: FactCache | None
    checkpoints: BuildCheckpoints
    state: BuildResult | None = None
    latency: dict = dataclasses.field(default_factory=dict)  # role -> seconds per item

    def run(self, fact_policy: TimedPolicy, manager_policy: TimedPolicy, progress: bool):
        streams = [conversation_stream(c) for c in self.todo]
        state = self.checkpoints.load(streams, self.embedder)
        if state is None:
            raw, self.latency["fact_extraction"] = self._facts(streams, fact_policy)
            state = start_build(streams, raw, self.embedder)
        else:
            self.latency = dict(self.checkpoints.latency)
        earlier, n = self.latency.get("manager", []), len(manager_policy.seconds)

        def checkpoint(state: BuildResult) -> None:
            self.latency["manager"] = earlier + manager_policy.seconds[n:]
            self.checkpoints.save(state, self.latency)

        self.state = run_manager(
            streams, state, manager_policy, self.settings, on_step=checkpoint, progress=progress
        )
        self.latency["manager"] = earlier + manager_policy.seconds[n:]

    def _facts(self, streams, fact_policy: TimedPolicy) -> tuple[list[list[str]], list[float]]:
        """Every conversation's raw fact outputs (from the cache, the rest in one batched
        extraction, then cached), and the latencies of the calls that wrote them: a batched
        call served every conversation in it, so each gets all of them, counted once."""
        cache = self.fact_cache
        cached = [cache.load(c, self.settings) if cache else None for c in self.todo]
        missing = [i for i, hit in enumerate(cached) if hit is None]
        n = len(fact_policy.seconds)
        extracted = fact_outputs([streams[i] for i in missing], fact_policy, self.settings)
        seconds = fact_policy.seconds[n:]
        batch = [self.todo[i].sample_id for i in missing]
        for i, outputs in zip(missing, extracted):
            cached[i] = CachedFacts(outputs, seconds, batch)
            if cache is not None:
                cache.save(self.todo[i], self.settings, outputs, seconds, batch)
        calls = {tuple(hit.batch): hit.seconds for hit in cached}
        return [hit.outputs for hit in cached], [s for run in calls.values() for s in run]

    def save(self, root: Path, fingerprints: dict) -> None:
        """Saves each bank and its traces; its build.json, written last and atomically, is
        what marks a bank as built."""
        for conv, bank, trace in zip(self.todo, self.state.banks, self.state.traces):
            directory = root / conv.sample_id
            directory.mkdir(parents=True, exist_ok=True)
            save_bank(bank, directory / "bank")
            atomic_write_text(directory / "trace.jsonl", traces_jsonl(trace))
            build = {
                "counters": dict(self.state.counters),
                "latency": self.latency,
                "memories": len(bank),
                "batch": [c.sample_id for c in self.todo],
                "fingerprint": fingerprints[conv.sample_id],
            }
            atomic_write_text(directory / "build.json", json.dumps(build, ensure_ascii=False))


def _load(conversations, root: Path, embedder, out: StoredBanks) -> None:
    """Every conversation's bank, and the counters and latencies of the builds they came from
    (a batch built together shares its numbers: counted once)."""
    seen_batches: set[tuple[str, ...]] = set()
    for conv in conversations:
        directory = root / conv.sample_id
        out.banks[conv.sample_id] = load_bank(directory / "bank", embedder)
        build = json.loads((directory / "build.json").read_text())
        batch = tuple(build.get("batch", [conv.sample_id]))
        if batch not in seen_batches:
            seen_batches.add(batch)
            out.counters.update(build["counters"])
            for role, seconds in build["latency"].items():
                out.latency.setdefault(role, []).extend(seconds)
