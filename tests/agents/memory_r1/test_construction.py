"""Memory construction with scripted policies: batching, ownership, provenance, bad output."""

import json

from memjax.agents.memory_r1.construction import (
    ConstructionSettings,
    build_banks,
    conversation_stream,
)
from memjax.experiments.synthetic import SyntheticConfig, generate_conversations
from memjax.memory.bank import MemoryBank
from tests.agents.memory_r1 import helpers


def _conversations(n=3):
    return generate_conversations(SyntheticConfig(num_conversations=n, seed=3))


def test_streams_advance_together_and_banks_hold_dated_owned_memories():
    convs = _conversations()
    streams = [conversation_stream(c) for c in convs]
    calls = []

    def manager(batch):
        calls.append(len(batch))
        return helpers.add_all_manager(batch)

    result = build_banks(streams, helpers.fact_policy, manager, helpers.BagOfWords())
    # One manager call per turn index that has facts somewhere, never one per stream.
    longest = max(len(s) for s in streams)
    assert len(calls) <= longest and max(calls) > 1
    for conv, stream, bank, trace in zip(convs, streams, result.banks, result.traces):
        dates = {t.dia_id: t.date for t in stream}
        speakers = {t.dia_id: t.speaker for t in stream}
        assert len(bank) > 0 and set(bank.owners()) <= set(conv.speakers)
        for record in bank.log:
            turn = record.provenance.source_turn
            assert turn in dates and record.provenance.model_output.startswith('{"memory"')
            if record.op.kind == "ADD":
                # A memory is owned by the turn's speaker and dated by the turn's session.
                entry = bank.get(record.id)
                assert entry.owner == speakers[turn] and entry.timestamp == dates[turn]
        # The trace records what every turn did; turns without facts made no manager call.
        assert [t.dia_id for t in trace] == [t.dia_id for t in stream]
        for t in trace:
            assert (t.manager_output is None) == (not t.facts)
    assert result.counters["manager_json_ok"] == sum(calls)
    assert result.counters["manager_turns"] == result.counters["manager_turns_well_formed"]
    assert result.counters["manager_turns"] == sum(calls)


def test_well_formed_turns_count_only_outputs_that_parse_whole():
    convs = _conversations(1)
    seen = [0]

    def manager(batch):
        # Turns alternate: a clean output, prose, and JSON with one item missing its event.
        out = []
        for clean in helpers.add_all_manager(batch):
            kind = seen[0] % 3
            seen[0] += 1
            bad_item = '{"memory": [{"id": "new", "text": "x"}]}'
            out.append(clean if kind == 0 else "I will add it." if kind == 1 else bad_item)
        return out

    result = build_banks(
        [conversation_stream(convs[0])], helpers.fact_policy, manager, helpers.BagOfWords()
    )
    turns = result.counters["manager_turns"]
    assert turns == seen[0] and turns >= 3
    assert result.counters["manager_turns_well_formed"] == (turns + 2) // 3


def test_manager_sees_small_ids_and_its_update_lands_on_the_real_memory():
    convs = _conversations(1)
    stream = conversation_stream(convs[0])
    seen = []

    def manager(batch):
        out = []
        for messages in batch:
            memories = helpers.shown_memories(messages)
            seen.extend(m["id"] for m in memories)
            facts = helpers.shown_facts(messages)
            if memories:  # rewrite the closest memory with the new fact
                item = {"id": memories[0]["id"], "text": facts[0], "event": "UPDATE"}
            else:
                item = {"id": "x", "text": facts[0], "event": "ADD"}
            out.append(json.dumps({"memory": [item]}))
        return out

    settings = ConstructionSettings(related_k=2)
    bank = build_banks([stream], helpers.fact_policy, manager, helpers.BagOfWords(), settings)
    bank = bank.banks[0]
    assert seen and set(seen) <= {"0", "1"}  # prompt ids, at most related_k of them
    updates = [r for r in bank.log if r.op.kind == "UPDATE"]
    assert updates and all(r.accepted for r in updates)
    for r in updates:
        assert r.id in bank and r.before["text"] != r.op.text


def test_speaker_lanes_batch_two_turns_and_end_like_turn_by_turn():
    # The manager touches only the turn speaker's memories, so the two speakers' turns run as
    # two lanes in one batch; the bank must hold what a strictly sequential build holds.
    stream = conversation_stream(_conversations(1)[0])
    sizes = []

    def manager(batch):
        sizes.append(len(batch))
        out = []
        for messages in batch:
            memories, facts = helpers.shown_memories(messages), helpers.shown_facts(messages)
            item = {"id": "x", "text": facts[0], "event": "ADD"}
            if memories and len(memories) % 2 == 0:  # order-dependent: rewrite one
                item = {"id": memories[-1]["id"], "text": facts[0] + " (again)", "event": "UPDATE"}
            out.append(json.dumps({"memory": [item]}))
        return out

    laned = build_banks([stream], helpers.fact_policy, manager, helpers.BagOfWords()).banks[0]
    assert max(sizes) == 2
    sequential = MemoryBank(helpers.BagOfWords())
    for turn in stream:
        build_banks(
            [[turn]], helpers.fact_policy, manager, helpers.BagOfWords(), banks=[sequential]
        )
    contents = lambda bank: sorted((e.owner, e.text, e.timestamp) for e in bank.entries())
    assert len(laned) > 2 and contents(laned) == contents(sequential)


def test_garbage_manager_output_is_counted_and_never_crashes():
    streams = [conversation_stream(c) for c in _conversations(2)]
    garbage = iter(["", "not json", '{"memory": [{"id": "99", "event": "DELETE"}]}', "{{"] * 100)

    def manager(batch):
        return [next(garbage) for _ in batch]

    result = build_banks(streams, helpers.fact_policy, manager, helpers.BagOfWords())
    assert all(len(b) == 0 for b in result.banks)
    c = result.counters
    assert c["manager_json_no_json"] > 0 and c["manager_rejected_unknown_id"] > 0
    rejected = [t for trace in result.traces for t in trace if t.rejected]
    assert rejected and all(not t.ops for t in rejected)


def test_timed_policy_times_each_batched_call():
    from memjax.agents.memory_r1.policy import TimedPolicy

    sizes = []
    timed = TimedPolicy(lambda b: sizes.append(len(b)) or ["x"] * len(b), "p", batch_size=4)
    assert timed([[{"role": "user", "content": str(i)}] for i in range(10)]) == ["x"] * 10
    assert sizes == [4, 4, 2] and timed.calls == 3 and len(timed.seconds) == 10
    # Calls group prompts of similar length; answers still come back in the caller's order.
    echo = TimedPolicy(lambda b: [m[0]["content"] for m in b], "echo", batch_size=2)
    texts = ["a" * n for n in (5, 1, 4, 2, 3)]
    assert echo([[{"role": "user", "content": t}] for t in texts]) == texts


def test_a_request_of_several_calls_shows_its_progress_and_one_call_does_not(capsys):
    from memjax.agents.memory_r1.policy import TimedPolicy

    prompts = [[{"role": "user", "content": str(i)}] for i in range(5)]
    TimedPolicy(lambda b: ["x"] * len(b), "fact_extraction", batch_size=2)(prompts)
    shown = capsys.readouterr().err
    assert "fact_extraction: 100%" in shown and "3/3" in shown
    TimedPolicy(lambda b: ["x"] * len(b), "manager", batch_size=8)(prompts)
    TimedPolicy(lambda b: ["x"] * len(b), "judge", batch_size=2, progress=False)(prompts)
    assert capsys.readouterr().err == ""
