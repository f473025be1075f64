"""Scripted Memory-R1 teachers that read only the data's ground truth.

- `FactOracle`: a ChatPolicy for the fact extractor's prompts; each turn's facts are those of
  its synthetic track event (`synthetic_truth.event_facts`), none for small talk.
- `ManagerOracle`: a ChatPolicy for the manager's prompts. It reads the prompt the manager
  sees (the related memories under their prompt ids, and the facts), finds the track event the
  facts come from, and writes the operation that event calls for against those memories: ADD a
  new fact, UPDATE or DELETE the memory that holds the value it changes, NONE for the rest.
- `answer_completion`: the answer agent's target, the memories whose provenance is the
  question's evidence turns (the distilled selection), then **Answer:** and the gold answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from memjax.agents.memory_r1.answer_prompt import ANSWER_MARKER
from memjax.agents.memory_r1.construction import StreamTurn, fact_messages
from memjax.agents.memory_r1.manager_prompt import MANAGER_INSTRUCTIONS, render_manager_prompt
from memjax.experiments.synthetic import TrackEvent
from memjax.experiments.teachers.synthetic_truth import (
    ADD,
    CHANGE_OP,
    DELETE,
    UPDATE,
    event_facts,
    mentions,
    new_memory,
)
from memjax.memory import ops as bank_ops
from memjax.memory.bank import MemoryBank

SELECTED_HEADER = "**Memories selected as relevant:**"


def messages_key(messages: Sequence[dict]) -> str:
    """A chat's identity: roles and contents only (a `train` flag does not change a prompt)."""
    return json.dumps([[m["role"], m["content"]] for m in messages], ensure_ascii=False)


class FactOracle:
    """Ground-truth facts for every turn of the given streams, looked up by exact prompt.
    `events[s]` are the track events of stream s (names recur across conversations, so
    events are matched within their own conversation)."""

    def __init__(
        self,
        streams: Sequence[Sequence[StreamTurn]],
        events: Sequence[Iterable[TrackEvent]],
        context_turns: int,
    ):
        self.table: dict[str, str] = {}
        for stream, stream_events in zip(streams, events, strict=True):
            by_turn = {e.dia_id: e for e in stream_events}
            for i, turn in enumerate(stream):
                event = by_turn.get(turn.dia_id)
                facts = event_facts(event) if event is not None else []
                key = messages_key(fact_messages(stream, i, context_turns))
                self.table[key] = json.dumps({"facts": facts}, ensure_ascii=False)

    def __call__(self, batch: Sequence[Sequence[dict]]) -> list[str]:
        out = []
        for messages in batch:
            key = messages_key(messages)
            if key not in self.table:
                raise KeyError("FactOracle: a fact prompt of a turn it was not built for")
            out.append(self.table[key])
        return out


def read_manager_prompt(prompt: str) -> tuple[list[dict[str, str]], list[str]]:
    """(shown memories [{"id", "text"}], facts) of a manager prompt, checked by rendering them
    again: the result is exactly what `render_manager_prompt` was given."""
    if not prompt.startswith(MANAGER_INSTRUCTIONS):
        raise ValueError("not a memory-manager prompt")
    lines = prompt[len(MANAGER_INSTRUCTIONS) :].splitlines()
    facts_at = next(i for i, line in enumerate(lines) if line.startswith("The new retrieved"))
    memories = [
        json.loads(line.rstrip(",")) for line in lines[:facts_at] if line.startswith('{"id": ')
    ]
    facts = json.loads(next(line for line in lines[facts_at:] if line.startswith("[")))
    if render_manager_prompt(memories, facts) != prompt:
        raise ValueError("manager prompt does not render back from its memories and facts")
    return memories, facts


def manager_items(event: TrackEvent, shown: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """The Mem0-schema items for one event against the shown memories."""
    op = CHANGE_OP[event.track] if event.is_change else ADD
    old = None
    if event.is_change:
        old = next((i for i, m in enumerate(shown) if mentions(m["text"], event.previous)), None)
    items = []
    for i, m in enumerate(shown):
        if i == old and op == UPDATE:
            items.append(
                {
                    "id": m["id"],
                    "text": new_memory(event),
                    "event": "UPDATE",
                    "old_memory": m["text"],
                }
            )
        elif i == old and op == DELETE:
            items.append({"id": m["id"], "text": m["text"], "event": "DELETE"})
        else:
            items.append({"id": m["id"], "text": m["text"], "event": "NONE"})
    if op in (ADD, DELETE) or old is None:  # no memory to change: the fact is new
        items.append({"id": str(len(shown)), "text": new_memory(event), "event": "ADD"})
    return items


class ManagerOracle:
    """The right operations for each manager prompt, from the track events behind its facts
    (the events of one conversation: another one's speaker may share a name)."""

    def __init__(self, events: Iterable[TrackEvent]):
        self.by_facts = {tuple(event_facts(e)): e for e in events}

    def __call__(self, batch: Sequence[Sequence[dict]]) -> list[str]:
        out = []
        for messages in batch:
            shown, facts = read_manager_prompt(messages[-1]["content"])
            event = self.by_facts.get(tuple(facts))
            if event is None:
                raise KeyError(f"ManagerOracle: facts {facts} come from no track event")
            items = manager_items(event, shown)
            out.append(json.dumps({"memory": items}, ensure_ascii=False))
        return out


def memory_turns(bank: MemoryBank) -> dict[str, set[str]]:
    """memory id -> the dialogue turns whose accepted ADD/UPDATE wrote it (the op log's
    provenance), for the memories the bank holds now."""
    turns: dict[str, set[str]] = {}
    for record in bank.log:
        if record.accepted and record.op.kind in (bank_ops.ADD, bank_ops.UPDATE):
            turns.setdefault(record.id, set()).add(str(record.provenance.source_turn))
    return {i: t for i, t in turns.items() if i in bank}


def evidence_memories(bank: MemoryBank, evidence: Iterable[str]) -> set[tuple[str, str, str]]:
    """(owner, timestamp as the answer prompt shows it, text) of every memory an evidence
    turn wrote."""
    wanted = set(evidence)
    return {
        (e.owner, e.timestamp or "unknown date", e.text)
        for memory_id, turns in memory_turns(bank).items()
        if turns & wanted and (e := bank.get(memory_id))
    }


def answer_completion(selected: Sequence[tuple[str, str]], answer: str) -> str:
    """The distilled memories as "- <timestamp>: <text>" lines, then the answer."""
    lines = [SELECTED_HEADER, *(f"- {ts}: {text}" for ts, text in selected)]
    return "\n".join([*lines, f"{ANSWER_MARKER} {answer}"])
