"""Memory construction for any policy: dialogue turns -> memory banks, with provenance.

    streams = [conversation_stream(c) for c in conversations]
    result = build_banks(streams, fact_policy, manager_policy, embedder)
    result.banks[i]        # MemoryBank of stream i (owners: the speakers)
    result.traces[i]       # per turn: facts, manager output, ops and their outcomes

Per turn (MR1-v5 Alg. 3): the fact extractor reads the turn (after a few preceding turns for
context) and writes {"facts": [...]}; the speaker's related memories (top 10) and the facts go
to the memory manager, whose JSON operations are applied to the bank, each op logged with the
turn's dia_id and the manager's raw output. Facts do not depend on the bank, so every turn's
facts are extracted up front in large batches. The manager sees and changes only the turn
speaker's memories, so each (stream, speaker) pair is an independent *lane*: a lane's turns
run in order, and all lanes advance together, one batched generation call per step (a
two-person conversation decodes two turns at a time; the bank ends the same as turn by turn,
up to the numbering of memory ids). A turn without facts costs no manager call (Mem0 also
skips the update then).

The pieces, for callers that keep or resume a construction (bank_store): `fact_outputs` (the
extractor's raw outputs, cacheable), `start_build` (facts traced, banks empty) and
`run_manager` (the manager steps not run yet, with a callback after each to checkpoint).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tqdm import tqdm

from memjax.agents.memory_r1.bank_ops import apply_manager_ops, related_memories
from memjax.agents.memory_r1.fact_parser import parse_facts
from memjax.agents.memory_r1.fact_prompt import (
    FACT_SYSTEM_TEMPLATE,
    FACT_USER_TEMPLATE,
    render_fact_messages,
)
from memjax.agents.memory_r1.id_map import IdMap
from memjax.agents.memory_r1.manager_parser import parse_manager_output
from memjax.agents.memory_r1.manager_prompt import (
    MANAGER_EMPTY_MEMORY_TEMPLATE,
    MANAGER_MEMORY_TEMPLATE,
    MANAGER_TEMPLATE,
    render_manager_prompt,
)
from memjax.agents.memory_r1.policy import ChatPolicy
from memjax.data.locomo_types import Conversation
from memjax.fingerprint import text_sha256
from memjax.memory.bank import MemoryBank
from memjax.memory.ops import Provenance
from memjax.text.prompt_templates import PromptTemplate

FACT_TEMPLATES = {t.name: t for t in (FACT_SYSTEM_TEMPLATE, FACT_USER_TEMPLATE)}
MANAGER_TEMPLATES = {
    t.name: t for t in (MANAGER_TEMPLATE, MANAGER_MEMORY_TEMPLATE, MANAGER_EMPTY_MEMORY_TEMPLATE)
}


@dataclasses.dataclass(frozen=True)
class StreamTurn:
    """One dialogue turn as memory construction sees it."""

    speaker: str
    dia_id: str
    text: str  # with the image caption appended when the turn shares a photo
    date: str  # the session's date_time: the timestamp of memories made from this turn


@dataclasses.dataclass(frozen=True)
class ConstructionSettings:
    related_k: int = 10  # memories of the speaker shown to the manager
    fact_context_turns: int = 1  # preceding turns the fact extractor sees for context
    # Prompt templates by name (fact_system, fact_user, manager, manager_memory,
    # manager_empty_memory); absent: memjax's own.
    templates: Mapping[str, PromptTemplate] = dataclasses.field(default_factory=dict)

    def fingerprint(self) -> dict:
        """JSON-stable fields for cache fingerprints: the prompts as the SHA-256 of the texts
        construction renders (memjax's defaults where no template replaces them)."""
        return {
            "related_k": self.related_k,
            "fact_context_turns": self.fact_context_turns,
            "prompts.sha256": self._prompts_sha256({**FACT_TEMPLATES, **MANAGER_TEMPLATES}),
        }

    def fact_fingerprint(self) -> dict:
        """The fields that decide the fact extractor's prompts alone (a fact cache's key)."""
        return {
            "fact_context_turns": self.fact_context_turns,
            "fact_prompts.sha256": self._prompts_sha256(FACT_TEMPLATES),
        }

    def _prompts_sha256(self, defaults: Mapping[str, PromptTemplate]) -> str:
        effective = {**defaults, **{k: v for k, v in self.templates.items() if k in defaults}}
        return text_sha256({k: t.text for k, t in sorted(effective.items())})


@dataclasses.dataclass
class TurnTrace:
    """What happened at one turn (JSON-able; the audit trail next to the bank's op log)."""

    dia_id: str
    speaker: str
    fact_output: str
    facts: list[str]
    manager_output: str | None = None  # None: no facts, no manager call
    ops: list[dict] = dataclasses.field(default_factory=list)  # op, id, text, accepted, reason
    rejected: dict[str, int] = dataclasses.field(default_factory=dict)  # parser rejections


@dataclasses.dataclass
class BuildResult:
    """A construction's banks and traces, finished or part-way (`steps_done` manager calls)."""

    banks: list[MemoryBank]
    traces: list[list[TurnTrace]]
    counters: Counter  # fact/manager parse outcomes and bank results, summed over streams
    steps_done: int = 0


def conversation_stream(conversation: Conversation) -> list[StreamTurn]:
    return [
        StreamTurn(t.speaker, t.dia_id, t.display_text(), s.date_time)
        for s, t in conversation.turns()
    ]


def conversation_sha256(conversation: Conversation) -> str:
    """What a bank or its facts are made from: the turns as construction reads them (an edit
    elsewhere in the data file leaves it unchanged)."""
    return text_sha256([dataclasses.asdict(t) for t in conversation_stream(conversation)])


def traces_jsonl(traces: Sequence[TurnTrace]) -> str:
    """A stream's turn traces as JSON lines (trace.jsonl, a build checkpoint's traces)."""
    return "".join(json.dumps(dataclasses.asdict(t), ensure_ascii=False) + "\n" for t in traces)


def read_traces(path: Path) -> list[TurnTrace]:
    return [TurnTrace(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]


def fact_messages(
    stream: Sequence[StreamTurn],
    i: int,
    context_turns: int,
    templates: Mapping[str, PromptTemplate] | None = None,
) -> list[dict]:
    """The fact extractor's chat for turn i of a stream (preceding turns first)."""
    window = stream[max(0, i - context_turns) : i + 1]
    t = {**FACT_TEMPLATES, **(templates or {})}
    turns = [(turn.speaker, turn.text) for turn in window]
    return render_fact_messages(turns, stream[i].date, t["fact_system"], t["fact_user"])


def manager_messages(
    bank: MemoryBank,
    facts: Sequence[str],
    owner: str,
    k: int,
    templates: Mapping[str, PromptTemplate] | None = None,
):
    """(chat messages, IdMap) of one manager call over the owner's related memories."""
    related = related_memories(bank, facts, owner, k)
    ids = IdMap.from_memories([(e.id, e.text) for e in related])
    t = {**MANAGER_TEMPLATES, **(templates or {})}
    prompt = render_manager_prompt(
        ids.prompt_entries(),
        facts,
        t["manager"],
        t["manager_memory"],
        t["manager_empty_memory"],
    )
    return [{"role": "user", "content": prompt}], ids


def fact_outputs(
    streams: Sequence[Sequence[StreamTurn]],
    fact_policy: ChatPolicy,
    settings: ConstructionSettings = ConstructionSettings(),
) -> list[list[str]]:
    """Every turn's raw fact-extractor output, [stream][turn], in one policy call."""
    where = [(s, i) for s, stream in enumerate(streams) for i in range(len(stream))]
    prompts = [
        fact_messages(streams[s], i, settings.fact_context_turns, settings.templates)
        for s, i in where
    ]
    outputs = fact_policy(prompts) if prompts else []
    raw: list[list[str]] = [[""] * len(stream) for stream in streams]
    for (s, i), text in zip(where, outputs):
        raw[s][i] = text
    return raw


def parse_fact_outputs(raw: Sequence[Sequence[str]]) -> tuple[list[list[list[str]]], Counter]:
    """Every turn's facts, [stream][turn], and the parse outcomes counted."""
    facts: list[list[list[str]]] = []
    counters: Counter = Counter()
    for outputs in raw:
        facts.append([])
        for text in outputs:
            parsed = parse_facts(text)
            facts[-1].append(list(parsed.facts))
            counters[f"facts_json_{parsed.json_status}"] += 1
            counters["facts_total"] += len(parsed.facts)
            counters["facts_rejected"] += parsed.rejected
            counters["facts_flattened"] += parsed.flattened
            counters.update(f"facts_refused_{reason}" for reason in parsed.refused)
    return facts, counters


def extract_facts(
    streams: Sequence[Sequence[StreamTurn]],
    fact_policy: ChatPolicy,
    settings: ConstructionSettings = ConstructionSettings(),
) -> tuple[list[list[str]], list[list[list[str]]], Counter]:
    """Every turn's (raw output, parsed facts), [stream][turn], in one policy call."""
    raw = fact_outputs(streams, fact_policy, settings)
    return (raw, *parse_fact_outputs(raw))


def manager_lanes(
    streams: Sequence[Sequence[StreamTurn]], facts: Sequence[Sequence[Sequence[str]]]
) -> list[list[tuple[int, int]]]:
    """(stream, turn) pairs that need a manager call, one ordered list per (stream, speaker)."""
    lanes: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for s, stream in enumerate(streams):
        for i, turn in enumerate(stream):
            if facts[s][i]:
                lanes.setdefault((s, turn.speaker), []).append((s, i))
    return list(lanes.values())


def start_build(
    streams: Sequence[Sequence[StreamTurn]],
    raw_facts: Sequence[Sequence[str]],
    embedder,
    banks: Sequence[MemoryBank] | None = None,
) -> BuildResult:
    """A construction before its first manager step: every turn's facts traced, the banks
    empty (or the given ones, to extend)."""
    banks = list(banks) if banks is not None else [MemoryBank(embedder) for _ in streams]
    if len(banks) != len(streams):
        raise ValueError(f"{len(streams)} streams but {len(banks)} banks")
    facts, counters = parse_fact_outputs(raw_facts)
    traces = [
        [TurnTrace(t.dia_id, t.speaker, raw_facts[s][i], facts[s][i]) for i, t in enumerate(stream)]
        for s, stream in enumerate(streams)
    ]
    return BuildResult(banks, traces, counters)


def run_manager(
    streams: Sequence[Sequence[StreamTurn]],
    state: BuildResult,
    manager_policy: ChatPolicy,
    settings: ConstructionSettings = ConstructionSettings(),
    *,
    on_step: Callable[[BuildResult], None] | None = None,
    progress: bool = False,
) -> BuildResult:
    """Runs the manager steps `state` has not run yet, changing it in place; `on_step(state)`
    after each (a checkpoint: a stopped construction resumes from the last state saved)."""
    facts = [[t.facts for t in trace] for trace in state.traces]
    lanes = manager_lanes(streams, facts)
    total = max((len(lane) for lane in lanes), default=0)
    steps = range(state.steps_done, total)
    for step in tqdm(steps, desc="memory construction", unit="step", disable=not progress):
        active = [lane[step] for lane in lanes if step < len(lane)]
        _manager_step(streams, state, active, manager_policy, settings)
        state.steps_done = step + 1
        if on_step is not None:
            on_step(state)
    return state


def _manager_step(streams, state: BuildResult, active, manager_policy, settings) -> None:
    """One batched manager call over the lanes' current turns, its operations applied."""
    banks, traces, counters = state.banks, state.traces, state.counters
    calls = [
        manager_messages(
            banks[s],
            traces[s][i].facts,
            streams[s][i].speaker,
            settings.related_k,
            settings.templates,
        )
        for s, i in active
    ]
    outputs = manager_policy([messages for messages, _ in calls]) if calls else []
    for (s, i), (_, ids), text in zip(active, calls, outputs):
        turn, trace = streams[s][i], traces[s][i]
        parsed = parse_manager_output(text, ids)
        counters.update(f"manager_{k}" for k in parsed.counts().elements())
        # Per call: the share of turns whose whole output parses into valid operations.
        counters["manager_turns"] += 1
        counters["manager_turns_well_formed"] += parsed.well_formed
        results = apply_manager_ops(
            banks[s],
            parsed.ops,
            owner=turn.speaker,
            timestamp=turn.date,
            provenance=Provenance(source_turn=turn.dia_id, model_output=text),
        )
        trace.manager_output = text
        trace.rejected = dict(Counter(r.reason for r in parsed.rejections))
        for op, result in zip(parsed.ops, results):
            counters["bank_accepted" if result.accepted else f"bank_{result.reason}"] += 1
            trace.ops.append(
                {
                    "op": op.op,
                    "id": result.id,
                    "text": op.text,
                    "accepted": result.accepted,
                    "reason": result.reason,
                }
            )


def build_banks(
    streams: Sequence[Sequence[StreamTurn]],
    fact_policy: ChatPolicy,
    manager_policy: ChatPolicy,
    embedder,
    settings: ConstructionSettings = ConstructionSettings(),
    *,
    banks: Sequence[MemoryBank] | None = None,
    progress: bool = False,
) -> BuildResult:
    """Builds (or extends, when `banks` are given) one bank per stream, turn by turn."""
    raw = fact_outputs(streams, fact_policy, settings)
    state = start_build(streams, raw, embedder, banks)
    return run_manager(streams, state, manager_policy, settings, progress=progress)
