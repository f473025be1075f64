"""Who builds a conversation's memory bank: the policy models or the data's ground truth.

    stored = conversation_banks(run, conversations, banks_dir, embedder)   # run: MemoryR1Run

`config.construction.builder` (`run.construction.builder`):
  - "policy" (the default): the fact extractor and the manager models, greedily (the paper's
    pipeline; `job_setup.fact_and_manager_policies`).
  - "oracle": data whose source knows its ground truth only (`sources`: the laboratory's
    synthetic conversations). Each turn's true facts and the operations they call for
    replayed through the same construction code: the bank a perfect extractor and manager keep. It costs no model call, so an answer agent can
    be trained and evaluated on many conversations with the manager's errors taken out.
  - "raw_turns": every dialogue turn stored as said (LoCoMo's RAG baseline memory,
    `raw_turns.raw_turn_bank`), any data.
  - "observations": LoCoMo's annotated per-session facts (`observations.observation_bank`).
  - "empty": no memory at all, any data: the floor an answer agent reaches from the question
    alone (synthetic questions are partly guessable), which a manager's banks must beat.

The last three take no model call (the first two of them seconds of embedding): they let the
answer agent be measured on whole LoCoMo conversations, whose model-built banks cost hours on a
CPU. The first two are cached under banks_dir, keyed by who built them (bank_store); the last
three are rebuilt each run. A model-built construction keeps its extracted facts
(`construction.facts_dir`, fact_cache) and saves its progress every
`construction.checkpoint_every` manager calls (build_checkpoints).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from memjax.agents.memory_r1 import job_setup as S
from memjax.agents.memory_r1.bank_store import StoredBanks, ensure_banks
from memjax.agents.memory_r1.fact_cache import FactCache
from memjax.agents.memory_r1.policy import TimedPolicy
from memjax.agents.memory_r1.run_settings import DataSection, MemoryR1Run
from memjax.agents.memory_r1.sources import require_truth
from memjax.data.locomo_types import Conversation
from memjax.errors import ConfigError

POLICY, ORACLE, RAW_TURNS, OBSERVATIONS = "policy", "oracle", "raw_turns", "observations"
EMPTY = "empty"
BUILDERS = (POLICY, ORACLE, RAW_TURNS, OBSERVATIONS, EMPTY)
DESCRIPTIONS = {
    ORACLE: "oracle banks",
    RAW_TURNS: "raw-turn banks",
    OBSERVATIONS: "observation banks",
    EMPTY: "empty banks",
}


def builder(name: str, data_path: str) -> str:
    """config.construction.builder (`name`), checked: the oracle only over data that knows its
    ground truth (`data_path`: config.data.path)."""
    if name not in BUILDERS:
        raise ConfigError(
            f"config.construction.builder={name!r}: expected one of {', '.join(BUILDERS)}"
        )
    if name == ORACLE:
        require_truth(data_path, "construction.builder", ORACLE)
    return name


def oracle_events(data: DataSection, field: str = "construction.builder") -> dict:
    """conversation id -> its ground truth (`field` names the setting that asked)."""
    return require_truth(data.path, field, ORACLE).truth(data.source_settings)


def oracle_policies(
    run: MemoryR1Run, conversation: Conversation, events: dict, *, windows: bool = False
) -> tuple[TimedPolicy, TimedPolicy]:
    """(fact extractor, manager) that answer one conversation's prompts from its ground truth
    (another conversation's speaker may share a name, so an oracle serves one conversation).

    `windows`: also know the fact prompts of a replay that starts mid-conversation (a manager
    snapshot replays only its window, whose first turns are asked with fewer turns before)."""
    from memjax.agents.memory_r1.construction import conversation_stream

    source = require_truth(run.data.path, "construction.builder", ORACLE)
    own = events[conversation.sample_id]
    stream = conversation_stream(conversation)
    context = run.construction.fact_context_turns
    streams = [stream]
    if windows:
        streams += [stream[j : j + context] for j in range(len(stream))]
    facts, manager = source.oracles(own, streams, context)
    return TimedPolicy(facts, "fact_extraction"), TimedPolicy(manager, "manager")


def conversation_banks(
    run: MemoryR1Run,
    conversations: Sequence[Conversation],
    banks_dir: str | Path,
    embedder,
) -> StoredBanks:
    """The conversations' banks, built by `config.construction.builder` or loaded from
    banks_dir when built before from the same inputs."""
    settings = S.construction_settings(run)
    kind = builder(run.construction.builder, run.data.path)
    if kind in (RAW_TURNS, OBSERVATIONS, EMPTY):
        return annotated_banks(kind, conversations, embedder)
    if kind == POLICY:
        facts, manager = S.fact_and_manager_policies(run)
        facts_dir = run.construction.facts_dir or Path(banks_dir) / ".facts"
        return ensure_banks(
            conversations,
            facts,
            manager,
            embedder,
            settings,
            banks_dir,
            inputs=S.bank_inputs(run),
            fact_cache=FactCache(Path(facts_dir), S.fact_inputs(run)),
            checkpoint_every=run.construction.checkpoint_every,
        )
    events = oracle_events(run.data)
    inputs = {"construction.builder": ORACLE, **S.embedder_identity(run.embedder)}
    stored = StoredBanks({}, Counter(), {}, [])
    for conv in conversations:  # one oracle per conversation
        facts, manager = oracle_policies(run, conv, events)
        stored.absorb(
            ensure_banks([conv], facts, manager, embedder, settings, banks_dir, inputs=inputs)
        )
    return stored


def annotated_banks(kind: str, conversations: Sequence[Conversation], embedder) -> StoredBanks:
    """Banks of the raw turns, of LoCoMo's observations or of nothing: no model, no cache."""
    from memjax.agents.memory_r1.observations import observation_bank
    from memjax.agents.memory_r1.raw_turns import raw_turn_bank
    from memjax.memory.bank import MemoryBank

    build = {
        RAW_TURNS: raw_turn_bank,
        OBSERVATIONS: observation_bank,
        EMPTY: lambda _conversation, embedder: MemoryBank(embedder),
    }[kind]
    banks = {conv.sample_id: build(conv, embedder) for conv in conversations}
    counters = Counter({f"{kind}_memories": sum(len(b) for b in banks.values())})
    return StoredBanks(banks, counters, {}, list(banks))
