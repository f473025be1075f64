"""Ground truth of the synthetic conversations' fact tracks, as facts and memories.

Every `TrackEvent` (memjax.experiments.synthetic) becomes the facts a perfect extractor writes
for its turn and the memory operation a perfect manager applies. What each change calls for follows the
paper's and Mem0's cases: a second dog is merged into the dog memory (UPDATE, Memory-R1's
"Buddy and Scout" case), a refined allergy and a move rewrite the memory (UPDATE: same
subject, the information changed), a new job or hobby contradicts the old one (DELETE it, ADD
the new one). The bank check asks of the finished bank what the questions ask of it: every
current value is remembered, and no memory states a replaced value without the current one.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

from memjax.experiments.synthetic import TrackEvent
from memjax.memory.bank import MemoryBank

ADD, UPDATE, DELETE = "ADD", "UPDATE", "DELETE"
# How a change of each track lands on the memory of its first statement.
CHANGE_OP = {"dogs": UPDATE, "allergy": UPDATE, "city": UPDATE, "job": DELETE, "hobby": DELETE}


def event_facts(e: TrackEvent) -> list[str]:
    """The facts of the event's turn, third person with the speaker's name (as the fact
    prompt asks)."""
    p, v, old = e.speaker, e.value, e.previous
    if not e.is_change:
        return [
            {
                "dogs": f"{p} adopted a dog named {v}",
                "allergy": f"{p} is allergic to {v}",
                "city": f"{p} lives in {v}",
                "job": f"{p} works as a {v}",
                "hobby": f"{p} started {v}",
            }[e.track]
        ]
    return {
        "dogs": [f"{p} adopted a second dog named {v}"],
        "allergy": [f"{p} is allergic only to {v}, not all {old}"],
        "city": [f"{p} moved to {v}"],
        "job": [f"{p} quit the job as a {old}", f"{p} now works as a {v}"],
        "hobby": [f"{p} gave up {old}", f"{p} now loves {v}"],
    }[e.track]


def fact_values(e: TrackEvent) -> tuple[str, ...]:
    """Values the turn's facts must mention: the new one, and the replaced one when the
    change deletes it (the manager needs to know which memory goes)."""
    if e.is_change and CHANGE_OP[e.track] == DELETE:
        return (e.value, e.previous)
    return (e.value,)


def new_memory(e: TrackEvent) -> str:
    """The memory text after the event: the fact itself, the merged or rewritten memory
    (UPDATE), or the new memory beside the deleted one."""
    p, v, old = e.speaker, e.value, e.previous
    if not e.is_change:
        return event_facts(e)[0]
    return {
        "dogs": f"{p} has two dogs, {old} and {v}",
        "allergy": f"{p} is allergic to {v}",
        "city": f"{p} lives in {v}",
        "job": f"{p} works as a {v}",
        "hobby": f"{p} is into {v}",
    }[e.track]


def mentions(text: str, value: str) -> bool:
    """Whole-word, case-insensitive ("nuts" is not in "peanuts")."""
    return re.search(rf"\b{re.escape(value)}\b", text, re.IGNORECASE) is not None


@dataclasses.dataclass(frozen=True)
class TrackState:
    speaker: str
    track: str
    current: tuple[str, ...]  # values the bank must hold (both dogs after a second one)
    stale: tuple[str, ...]  # replaced values no memory may state alone


def final_states(events: Iterable[TrackEvent]) -> list[TrackState]:
    states: dict[tuple[str, str], TrackState] = {}
    for e in events:
        key = (e.speaker, e.track)
        if not e.is_change:
            states[key] = TrackState(e.speaker, e.track, (e.value,), ())
        elif e.track == "dogs":
            states[key] = TrackState(e.speaker, e.track, (e.previous, e.value), ())
        else:
            states[key] = TrackState(e.speaker, e.track, (e.value,), (e.previous,))
    return list(states.values())


def state_error(bank: MemoryBank, state: TrackState) -> str | None:
    """Why the bank gets a track wrong, or None when it holds the track's latest state."""
    texts = [m.text for m in bank.entries(owner=state.speaker)]
    for value in state.current:
        if not any(mentions(t, value) for t in texts):
            return f"missing_current_{state.track}"
    for value in state.stale:
        for t in texts:
            if mentions(t, value) and not any(mentions(t, v) for v in state.current):
                return f"stale_{state.track}"
    return None


def bank_errors(bank: MemoryBank, states: Sequence[TrackState]) -> list[str]:
    return [err for s in states if (err := state_error(bank, s)) is not None]
