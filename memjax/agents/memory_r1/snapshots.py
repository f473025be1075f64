"""Temporal memory-bank snapshots for training the memory manager, built once and cached.

For each training question and each turn in its evidence, a teacher model builds the bank
from the `window` turns before that turn (MR1-v5 App. B.2 says the preceding 24 turns, its
Alg. 1 says 50; memjax defaults to 24 and the configs say which they use), and extracts the
facts of the evidence turn itself. The manager is then trained on (snapshot, facts): its ops
are applied to the snapshot, and a frozen answer agent answers the question over the result.

    examples, stats = build_manager_examples(conversations, qa_items, teacher_facts,
                                             teacher_manager, embedder, cache_dir,
                                             window=24, teacher="gpt-4o-mini")

Cache layout: cache_dir/<teacher>-w<window>-c<fact context>/<conversation>/<dia_id>/, an
atomic snapshot directory (memjax.memory.atomic) holding the bank's files and `turn.json`
(the evidence turn, its facts, the teacher's raw output, the construction trace, and the
fingerprint of what built it: the window's turns and the evidence turn, the construction
settings and `inputs`, the teacher model and embedder; see job_setup.bank_inputs). A turn whose
snapshot exists with the same fingerprint is never rebuilt, so a killed build resumes where it
stopped; one built from other inputs is rebuilt, and the count is printed with what differed.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from memjax.agents.memory_r1.construction import (
    ConstructionSettings,
    StreamTurn,
    build_banks,
    conversation_stream,
    fact_messages,
)
from memjax.agents.memory_r1.fact_parser import parse_facts
from memjax.agents.memory_r1.policy import ChatPolicy
from memjax.data.locomo_types import Conversation
from memjax.errors import DataFileError
from memjax.fingerprint import describe, differences, text_sha256
from memjax.memory.atomic import atomic_save, latest_snapshot
from memjax.memory.bank import BankSnapshot, MemoryBank
from memjax.memory.bank_io import read_snapshot, write_snapshot

DEFAULT_WINDOW = 24  # App. B.2's text; Alg. 1 says 50


@dataclasses.dataclass(frozen=True)
class ManagerExample:
    """One manager-training episode: a question and one of its evidence turns."""

    uid: str  # "<conversation>/<qa index>@<dia_id>"
    question: str
    gold: str
    category: int
    speaker_a: str
    speaker_b: str
    turn: StreamTurn  # the evidence turn the manager processes
    facts: tuple[str, ...]  # the teacher's facts of that turn
    snapshot: str  # directory of the cached snapshot (bank before the turn)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def cache_root(cache_dir: str | Path, teacher: str, window: int, context: int) -> Path:
    return Path(cache_dir) / f"{_slug(teacher)}-w{window}-c{context}"


def snapshot_root(root: Path, conversation_id: str, dia_id: str) -> Path:
    return root / _slug(conversation_id) / _slug(dia_id)


def is_cached(root: Path) -> bool:
    try:
        latest_snapshot(root)
    except FileNotFoundError:
        return False
    return True


def snapshot_fingerprint(
    window_turns: Sequence[StreamTurn],
    turn: StreamTurn,
    teacher: str,
    window: int,
    settings: ConstructionSettings,
    inputs: dict | None,
) -> dict:
    turns = [dataclasses.asdict(t) for t in (*window_turns, turn)]
    return {
        "turns.sha256": text_sha256(turns),
        "teacher": teacher,
        "window": window,
        **{f"construction.{k}": v for k, v in settings.fingerprint().items()},
        **(inputs or {}),
    }


def stale_snapshot(root: Path, fingerprint: dict) -> list[str] | None:
    """None when the cached snapshot may be reused; else what differs ([] when absent)."""
    if not is_cached(root):
        return []
    try:
        meta = json.loads((latest_snapshot(root) / "turn.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [f"{root}: unreadable turn.json"]
    return (
        differences(meta.get("fingerprint") if isinstance(meta, dict) else None, fingerprint)
        or None
    )


def read_cached(root: str | Path) -> tuple[BankSnapshot, int, dict]:
    """(bank snapshot, embedding dim, turn.json) of a cached snapshot."""
    directory = latest_snapshot(root)
    snap, dim = read_snapshot(directory)
    meta = read_turn(directory)
    return snap, dim, meta


def read_turn(directory: Path) -> dict:
    """A snapshot's turn.json; a damaged one is a DataFileError naming it."""
    path = directory / "turn.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise DataFileError(f"{path}: unreadable snapshot description ({e})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("facts"), list):
        raise DataFileError(f'{path}: must be an object with a "facts" list')
    return meta


def _write(bank: MemoryBank, meta: dict, root: Path) -> None:
    snap = bank.snapshot()

    def writer(directory: Path) -> None:
        write_snapshot(snap, bank.dim, directory)
        (directory / "turn.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1))

    atomic_save(root, writer)


def build_manager_examples(
    conversations: Sequence[Conversation],
    items: Sequence[tuple[str, object]],
    teacher_facts: ChatPolicy,
    teacher_manager: ChatPolicy,
    embedder,
    cache_dir: str | Path,
    *,
    teacher: str,
    window: int = DEFAULT_WINDOW,
    settings: ConstructionSettings = ConstructionSettings(),
    progress: bool = False,
    inputs: dict | None = None,
) -> tuple[list[ManagerExample], Counter]:
    """`items`: (conversation id, QA item) pairs. Builds the missing snapshots (all at once,
    batched), then returns one example per (question, evidence turn) with facts, and counts
    (built, cached, evidence ids not in the conversation, turns without facts)."""
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    by_id = {c.sample_id: c for c in conversations}
    root = cache_root(cache_dir, teacher, window, settings.fact_context_turns)
    stats: Counter = Counter()
    wanted, pairs = _evidence_turns(by_id, items, stats)
    fingerprints = {
        key: snapshot_fingerprint(
            stream[max(0, i - window) : i], stream[i], teacher, window, settings, inputs
        )
        for key, (stream, i) in wanted.items()
    }
    todo = _missing(root, fingerprints)
    stats["snapshots_cached"] = len(wanted) - len(todo)
    stats["snapshots_built"] = len(todo)
    stats["snapshots_rebuilt"] = sum(1 for diffs in todo.values() if diffs)
    if todo:
        builder = _SnapshotBuilder(
            facts=teacher_facts,
            manager=teacher_manager,
            embedder=embedder,
            settings=settings,
            teacher=teacher,
            window=window,
            progress=progress,
        )
        builder.build(root, {key: wanted[key] for key in todo}, fingerprints)
    examples = _examples(root, by_id, pairs, stats)
    stats["examples"] = len(examples)
    return examples, stats


# (conversation id, dia_id) -> (the conversation's turn stream, the evidence turn's index)
Wanted = dict[tuple[str, str], tuple[list[StreamTurn], int]]


def _evidence_turns(by_id, items, stats: Counter) -> tuple[Wanted, list[tuple[str, object, str]]]:
    """The evidence turns the questions name (each once), and every (conversation, question,
    dia_id) pair; an evidence id the conversation lacks is counted, not raised."""
    wanted: Wanted = {}
    pairs: list[tuple[str, object, str]] = []
    for conv_id, qa in items:
        if conv_id not in by_id:
            raise ValueError(f"question {qa.index} names conversation {conv_id!r}, not loaded")
        stream = conversation_stream(by_id[conv_id])
        position = {t.dia_id: i for i, t in enumerate(stream)}
        for dia_id in qa.evidence:
            if dia_id not in position:
                stats["evidence_missing"] += 1
                continue
            pairs.append((conv_id, qa, dia_id))
            wanted.setdefault((conv_id, dia_id), (stream, position[dia_id]))
    return wanted, pairs


def _missing(root: Path, fingerprints: dict) -> dict[tuple[str, str], list[str]]:
    """The snapshots to build: absent ones (no differences) and those built from other
    inputs (what differed, printed once with their count)."""
    todo = {}
    for key, fingerprint in fingerprints.items():
        diffs = stale_snapshot(snapshot_root(root, *key), fingerprint)
        if diffs is not None:
            todo[key] = diffs
    stale = [diffs for diffs in todo.values() if diffs]
    if stale:
        print(
            f"snapshots: {len(stale)} in {root} built from other inputs ({describe(stale[0])}); rebuilding"
        )
    return todo


@dataclasses.dataclass(frozen=True)
class _SnapshotBuilder:
    """What builds a snapshot: the teacher's two policies over a window of preceding turns."""

    facts: ChatPolicy
    manager: ChatPolicy
    embedder: object
    settings: ConstructionSettings
    teacher: str  # its name, kept in each snapshot's turn.json
    window: int
    progress: bool

    def build(self, root: Path, todo: Wanted, fingerprints: dict) -> None:
        """Builds every snapshot in `todo` in one batched construction, with the evidence
        turn's own facts, and writes each atomically."""
        keys = list(todo)
        windows = [todo[k][0][max(0, todo[k][1] - self.window) : todo[k][1]] for k in keys]
        built = build_banks(
            windows, self.facts, self.manager, self.embedder, self.settings, progress=self.progress
        )
        # The evidence turn's own facts, with the same preceding context the extractor uses.
        context, templates = self.settings.fact_context_turns, self.settings.templates
        outputs = self.facts([fact_messages(*todo[k], context, templates) for k in keys])
        for key, turns, bank, trace, output in zip(
            keys, windows, built.banks, built.traces, outputs
        ):
            stream, i = todo[key]
            meta = {
                "conversation_id": key[0],
                "turn": dataclasses.asdict(stream[i]),
                "facts": list(parse_facts(output).facts),
                "fact_output": output,
                "teacher": self.teacher,
                "window": self.window,
                "window_turns": [t.dia_id for t in turns],
                "trace": [dataclasses.asdict(t) for t in trace],
                "fingerprint": fingerprints[key],
            }
            _write(bank, meta, snapshot_root(root, *key))


def _examples(root: Path, by_id, pairs, stats: Counter) -> list[ManagerExample]:
    """One example per (question, evidence turn) whose snapshot holds facts; a turn without
    facts gives the manager nothing to do and is counted."""
    examples = []
    for conv_id, qa, dia_id in pairs:
        conv = by_id[conv_id]
        path = snapshot_root(root, conv_id, dia_id)
        meta = read_turn(latest_snapshot(path))
        if not meta["facts"]:
            stats["turn_without_facts"] += 1
            continue
        examples.append(
            ManagerExample(
                uid=f"{conv_id}/{qa.index}@{dia_id}",
                question=qa.question,
                gold=qa.answer if qa.answer is not None else "",
                category=qa.category,
                speaker_a=conv.speaker_a,
                speaker_b=conv.speaker_b,
                turn=StreamTurn(**meta["turn"]),
                facts=tuple(meta["facts"]),
                snapshot=str(path),
            )
        )
    return examples
