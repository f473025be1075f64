"""Memory-R1's three roles as trajectories: written by a teacher, replayed for the verdict.

Each role runs memjax's own path: the fact extractor's prompts (`fact_messages`), memory
construction (`build_banks`: related memories, prompt ids, the manager parser, the bank) and the
answer agent's retrieval and prompt (`answer_examples`, `answer_messages`). A teacher is any
ChatPolicy; None means the scripted oracle. A replay rebuilds the prompt the agent would see
from the trajectory's `source`, runs the real parser and reward on the trajectory's text, and
returns a Verdict:
  facts    one turn; JSON parses cleanly, mentions the turn's new values, nothing on small talk;
  manager  one conversation; every manager prompt of the construction matches, every output
           parses with no rejection, the bank accepts every op, and the finished bank holds
           each fact track's latest state (reward: the fraction of tracks right);
  answer   one question; **Answer:** with an exact match of the gold answer (Memory-R1's
           reward), selecting only memories it was shown and at least one evidence memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from memjax.agents.memory_r1.answer_env import answer_messages, score_completion
from memjax.agents.memory_r1.answer_parser import parse_answer
from memjax.agents.memory_r1.construction import build_banks, conversation_stream, fact_messages
from memjax.agents.memory_r1.fact_parser import parse_facts
from memjax.agents.memory_r1.policy import ChatPolicy
from memjax.data.locomo_types import Conversation
from memjax.experiments.teachers.memory_oracles import (
    answer_completion,
    evidence_memories,
    messages_key,
)
from memjax.experiments.teachers.memory_world import MemoryWorld, answerable, data_tag
from memjax.experiments.teachers.synthetic_truth import (
    bank_errors,
    fact_values,
    final_states,
    mentions,
)
from memjax.experiments.teachers.trajectory import Trajectory, message
from memjax.experiments.teachers.verdict import Verdict, verdict_from_reward


def _chat(messages: Sequence[dict]) -> list[dict]:
    return [message(m["role"], m["content"]) for m in messages]


def _prompt_and_reply(context: Sequence[dict]) -> tuple[list[dict], str] | None:
    """(prompt messages, assistant text) of a one-reply context; None for any other shape."""
    if len(context) < 2 or context[-1]["role"] != "assistant":
        return None
    if any(m["role"] == "assistant" for m in context[:-1]):
        return None
    return _chat(context[:-1]), context[-1]["content"]


class RecordingPolicy:
    """Passes calls through and keeps (messages, output) in call order."""

    def __init__(self, policy: ChatPolicy):
        self.policy = policy
        self.calls: list[tuple[list[dict], str]] = []

    def __call__(self, batch):
        outputs = self.policy(batch)
        self.calls.extend((_chat(m), o) for m, o in zip(batch, outputs))
        return outputs


# ------------------------------------------------------------------------------- facts


def fact_trajectories(
    world: MemoryWorld,
    source: dict,
    conversations: Sequence[Conversation],
    split: str,
    teacher: ChatPolicy | None = None,
) -> list[Trajectory]:
    """One trajectory per dialogue turn of the conversations (synthetic data)."""
    ctx = world.settings.construction.fact_context_turns
    where, prompts = [], []
    for conv in conversations:
        stream = conversation_stream(conv)
        for i, turn in enumerate(stream):
            where.append((conv.sample_id, turn.dia_id))
            prompts.append(fact_messages(stream, i, ctx))
    policy = teacher or world.fact_oracle(source, conversations)
    outputs = policy(prompts) if prompts else []
    return [
        Trajectory(
            id=f"facts/{data_tag(source)}/{conv_id}/{dia_id}",
            role="facts",
            split=split,
            source={
                **source,
                "conversation_id": conv_id,
                "dia_id": dia_id,
                "fact_context_turns": ctx,
            },  # fmt: skip
            contexts=[[*_chat(p), message("assistant", out)]],
        )
        for (conv_id, dia_id), p, out in zip(where, prompts, outputs)
    ]


def replay_facts(world: MemoryWorld, t: Trajectory) -> Verdict:
    source = t.source
    if source.get("fact_context_turns") != world.settings.construction.fact_context_turns:
        return Verdict(0.0, "settings_mismatch")
    stream = conversation_stream(world.conversation(source))
    index = next((i for i, s in enumerate(stream) if s.dia_id == source.get("dia_id")), None)
    shaped = _prompt_and_reply(t.contexts[0]) if len(t.contexts) == 1 else None
    if index is None or shaped is None:
        return Verdict(0.0, "unknown_turn" if index is None else "bad_shape")
    prompt, text = shaped
    if messages_key(prompt) != messages_key(
        fact_messages(stream, index, source["fact_context_turns"])
    ):
        return Verdict(0.0, "prompt_mismatch")
    parsed = parse_facts(text)
    if parsed.json_status != "ok":
        return Verdict(0.0, f"facts_json_{parsed.json_status}")
    if parsed.rejected:
        return Verdict(0.0, "facts_rejected_items")
    turn = stream[index]
    events = world.events(source)[source["conversation_id"]]
    event = next((e for e in events if e.dia_id == turn.dia_id), None)
    if event is None:
        return verdict_from_reward(float(not parsed.facts), "facts_on_small_talk")
    if not parsed.facts:
        return Verdict(0.0, "no_facts_on_news")
    found = [any(mentions(f, v) for f in parsed.facts) for v in fact_values(event)]
    return verdict_from_reward(sum(found) / len(found), "fact_misses_a_value")


# ----------------------------------------------------------------------------- manager


def manager_trajectories(
    world: MemoryWorld,
    source: dict,
    conversations: Sequence[Conversation],
    split: str,
    teacher: ChatPolicy | None = None,
) -> list[Trajectory]:
    """One trajectory per conversation: every manager call of its construction, in call
    order, over the facts of the scripted extractor."""
    out = []
    for conv in conversations:
        recorder = RecordingPolicy(teacher or world.manager_oracle(source, conv))
        build_banks(
            [conversation_stream(conv)],
            world.fact_oracle(source, [conv]),
            recorder,
            world.embedder,
            world.settings.construction,
        )
        if not recorder.calls:
            continue
        c = world.settings.construction
        out.append(
            Trajectory(
                id=f"manager/{data_tag(source)}/{conv.sample_id}",
                role="manager",
                split=split,
                source={
                    **source,
                    "conversation_id": conv.sample_id,
                    "related_k": c.related_k,
                    "fact_context_turns": c.fact_context_turns,
                },  # fmt: skip
                contexts=[[*m, message("assistant", o)] for m, o in recorder.calls],
            )
        )
    return out


def replay_manager(world: MemoryWorld, t: Trajectory) -> Verdict:
    source, c = t.source, world.settings.construction
    if (source.get("related_k"), source.get("fact_context_turns")) != (
        c.related_k,
        c.fact_context_turns,
    ):
        return Verdict(0.0, "settings_mismatch")
    table: dict[str, str] = {}
    for context in t.contexts:
        shaped = _prompt_and_reply(context)
        if shaped is None:
            return Verdict(0.0, "bad_shape")
        key = messages_key(shaped[0])
        if table.setdefault(key, shaped[1]) != shaped[1]:
            return Verdict(0.0, "ambiguous_contexts")
    used: Counter = Counter()
    unknown = []

    def replayed(batch):
        outputs = []
        for messages in batch:
            key = messages_key(messages)
            used[key] += 1
            if key not in table:
                unknown.append(key)
            outputs.append(table.get(key, '{"memory": []}'))
        return outputs

    conv = world.conversation(source)
    result = build_banks(
        [conversation_stream(conv)], world.fact_oracle(source, [conv]), replayed,
        world.embedder, c,
    )  # fmt: skip
    # A rejected output changes the bank, so later prompts differ too: the output is the cause.
    counts = result.counters
    if any(k.startswith("manager_rejected_") for k in counts) or counts["manager_json_ok"] != sum(
        used.values()
    ):
        return Verdict(0.0, "manager_output_rejected")
    if unknown:
        return Verdict(0.0, "prompt_mismatch")
    if set(table) - set(used):
        return Verdict(0.0, "context_unused")
    if any(k.startswith("bank_") and k != "bank_accepted" for k in counts):
        return Verdict(0.0, "bank_rejected_op")
    states = final_states(world.events(source)[conv.sample_id])
    errors = bank_errors(result.banks[0], states)
    reward = 1.0 - len(errors) / max(len(states), 1)
    return verdict_from_reward(reward, errors[0] if errors else "")


# ------------------------------------------------------------------------------ answer


def _shown(example) -> list[tuple[str, str, str]]:
    return [(example.speaker_a, ts, text) for ts, text in example.memories_a] + [
        (example.speaker_b, ts, text) for ts, text in example.memories_b
    ]


def answer_trajectories(
    world: MemoryWorld,
    source: dict,
    conversations: Sequence[Conversation],
    split: str,
    teacher: ChatPolicy | None = None,
) -> list[Trajectory]:
    """One trajectory per answerable question."""
    settings = world.settings
    rows, prompts, oracle = [], [], []
    for conv in conversations:
        conv_source = {**source, "conversation_id": conv.sample_id}
        bank, examples = world.answer_bank(conv_source), world.answer_examples(conv_source)
        for q in answerable(conv):
            example = examples[q.index]
            rows.append((conv_source, q))
            prompts.append(answer_messages(example, settings.answer))
            evidence = evidence_memories(bank, q.evidence)
            selected = [(ts, text) for m in _shown(example) if m in evidence for _, ts, text in [m]]
            oracle.append(answer_completion(selected, example.gold))
    outputs = teacher(prompts) if teacher is not None and prompts else oracle
    return [
        Trajectory(
            id=f"answer/{data_tag(s)}/{s['conversation_id']}/{q.index}",
            role="answer",
            split=split,
            source={**s, "qa_index": q.index, **settings.as_dict()},
            contexts=[[*_chat(p), message("assistant", out)]],
        )
        for (s, q), p, out in zip(rows, prompts, outputs)
    ]


def replay_answer(world: MemoryWorld, t: Trajectory) -> Verdict:
    source = t.source
    if any(source.get(k) != v for k, v in world.settings.as_dict().items()):
        return Verdict(0.0, "settings_mismatch")
    conv = world.conversation(source)
    q = next((q for q in answerable(conv) if q.index == source.get("qa_index")), None)
    shaped = _prompt_and_reply(t.contexts[0]) if len(t.contexts) == 1 else None
    if q is None or shaped is None:
        return Verdict(0.0, "unknown_question" if q is None else "bad_shape")
    bank, example = world.answer_bank(source), world.answer_examples(source)[q.index]
    prompt, text = shaped
    if messages_key(prompt) != messages_key(answer_messages(example, world.settings.answer)):
        return Verdict(0.0, "prompt_mismatch")
    parsed = parse_answer(text)
    if not parsed.has_marker:
        return Verdict(0.0, "no_answer_marker")
    shown = {f"{ts}: {text}" for _, ts, text in _shown(example)}
    if any(s not in shown for s in parsed.selected_memories):
        return Verdict(0.0, "selected_memory_not_shown")
    evidence = {f"{ts}: {text}" for _, ts, text in evidence_memories(bank, q.evidence)}
    if not evidence & set(parsed.selected_memories):
        return Verdict(0.0, "no_evidence_selected")
    score = score_completion(text, example.gold, world.settings.answer.metric)
    return verdict_from_reward(score["reward"], "answer_not_exact")
