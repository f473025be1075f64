"""LoCoMo's annotated observations as a memory bank: the facts its authors drew from each
session (GPT-3.5-written, each citing the turns it comes from), owned by their speaker and
dated by their session.

    bank = observation_bank(conversation, embedder)

In the file they sit under `observation.session_<N>_observation.<speaker>` as
`[[fact, dia_id or [dia_id, ...]], ...]`. A bank of them is what a good extractor and manager
would keep from the dialogue (short facts, not raw turns) without a model call, so an answer
agent can be measured on whole LoCoMo conversations with memory construction taken out. Each
memory's op log names its first evidence turn, as a manager-built bank names its turn.
"""

from __future__ import annotations

import dataclasses
import re

from memjax.data.locomo_types import Conversation
from memjax.errors import DataError
from memjax.memory import ops as bank_ops
from memjax.memory.bank import MemoryBank
from memjax.memory.ops import Provenance

_SESSION_KEY = re.compile(r"session_(\d+)_observation")


@dataclasses.dataclass(frozen=True)
class Observation:
    session: int
    speaker: str
    text: str
    evidence: tuple[str, ...]  # dia_ids, as the file cites them


def observations(conversation: Conversation) -> list[Observation]:
    """Every observation in session order, checked: a malformed entry raises DataError naming
    its place in the file."""
    where = f"{conversation.sample_id}.observation"
    found = []
    for key, by_speaker in conversation.observation.items():
        match = _SESSION_KEY.fullmatch(key)
        if match is None or not isinstance(by_speaker, dict):
            raise DataError(
                f"{where}.{key}: expected session_<N>_observation -> {{speaker: [...]}}"
            )
        for speaker, entries in by_speaker.items():
            if not isinstance(entries, list):
                raise DataError(f"{where}.{key}.{speaker}: expected a list of [fact, dia_id]")
            for i, entry in enumerate(entries):
                found.append(
                    _observation(
                        entry, int(match.group(1)), speaker, f"{where}.{key}.{speaker}[{i}]"
                    )
                )
    return sorted(found, key=lambda o: o.session)  # stable: the file's order within a session


def _observation(entry, session: int, speaker: str, where: str) -> Observation:
    if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
        raise DataError(f"{where}: expected [fact, dia_id or [dia_id, ...]], got {entry!r:.80}")
    cited = entry[1] if isinstance(entry[1], list) else [entry[1]]
    if not cited or not all(isinstance(d, str) for d in cited):
        raise DataError(
            f"{where}: the evidence must be a dia_id or a list of them, got {entry[1]!r}"
        )
    return Observation(session, speaker, entry[0].strip(), tuple(d.strip() for d in cited))


def observation_bank(conversation: Conversation, embedder) -> MemoryBank:
    """One ADD per observation, timestamped with its session's date_time."""
    if not conversation.observation:
        raise DataError(f"{conversation.sample_id}: the conversation carries no observations")
    dates = {s.index: s.date_time for s in conversation.sessions}
    dates.update({i: d for i, d in conversation.orphan_session_dates.items() if i not in dates})
    found = [o for o in observations(conversation) if o.text]
    ops = [
        bank_ops.MemoryOp(
            bank_ops.ADD, text=o.text, owner=o.speaker, timestamp=dates.get(o.session, "")
        )
        for o in found
    ]
    bank = MemoryBank(embedder)
    bank.apply_many(ops, [Provenance(source_turn=o.evidence[0], model_output=None) for o in found])
    return bank
