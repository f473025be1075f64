"""memjax.Memory's Python API: Mem0's shapes, persistence, input checks, malformed model output
counted and never raised, and the packaged SmolLM2 driving it end to end (heavy)."""

import json

import pytest

from memjax.errors import ConfigError, DataFileError
from memjax.memory_layer import (
    Memory,
    MemoryConfig,
    MemoryInputError,
    MemoryNotFound,
    RoleSpec,
    ScriptedAnswer,
    ScriptedFacts,
    ScriptedManager,
    role_policy,
)
from memjax.memory_layer.scripted import manager_decisions
from memjax.memory_layer.store import RECORDS_FILE


def scripted(root, embedder, **kw):
    return Memory(
        root,
        facts=ScriptedFacts(),
        manager=ScriptedManager(),
        answer=ScriptedAnswer(),
        embedder=embedder,
        **kw,
    )


def test_scripted_manager_decisions():
    shown = [{"id": "0", "text": "Alice lives in Paris"}, {"id": "1", "text": "Has a cat"}]
    facts = ["Alice lives in Berlin", "Has a cat", "Likes chess"]
    assert manager_decisions(shown, facts) == [
        {
            "id": "0",
            "text": "Alice lives in Berlin",
            "event": "UPDATE",
            "old_memory": "Alice lives in Paris",
        },
        {"id": "1", "text": "Has a cat", "event": "NONE"},
        {"id": "2", "text": "Likes chess", "event": "ADD"},
    ]


def test_scripted_facts_skip_questions_greetings_and_the_assistant():
    chat = [
        {
            "role": "user",
            "content": "Input:\nbob: Hi! How are you? I moved to Rome.\nassistant: I love Rome too.",
        }
    ]
    assert json.loads(ScriptedFacts()([chat])[0]) == {"facts": ["I moved to Rome"]}


def test_api_round_trip_and_restart(tmp_path, minilm):
    memory = scripted(tmp_path, minilm)
    out = memory.add(
        [{"role": "user", "content": "I play the cello."}],
        user_id="ann",
        metadata={"channel": "sms"},
        timestamp="3 March 2024",
    )
    (item,) = out["results"]
    assert item["event"] == "ADD"
    got = memory.get(item["id"])
    assert got["memory"] == "I play the cello" and got["metadata"] == {"channel": "sms"}
    assert memory.search("music", user_id="ann", top_k=1)["results"][0]["id"] == item["id"]
    memory.update(item["id"], "Plays the cello and the piano")
    answer = memory.answer("What instruments does Ann play?", user_id="ann")
    assert answer["answer"] == "Plays the cello and the piano"
    assert answer["memories"] == ["Plays the cello and the piano"]

    again = scripted(tmp_path, minilm)  # a restart: everything read back from disk
    assert again.get(item["id"]) == memory.get(item["id"])
    assert [h["event"] for h in again.history(item["id"])] == ["ADD", "UPDATE"]
    assert again.history(item["id"])[1]["provenance"]["source"] == "api:update"
    again.delete_all("ann")
    assert again.get(item["id"]) is None and again.get_all("ann") == {"results": []}
    assert [h["event"] for h in again.history(item["id"])] == ["ADD", "UPDATE", "DELETE"]
    again.reset()
    with pytest.raises(MemoryNotFound):
        again.history(item["id"])
    assert scripted(tmp_path, minilm).get_all("ann") == {"results": []}


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda m: m.add([], user_id="u"), "messages"),
        (lambda m: m.add([{"role": "user"}], user_id="u"), "messages[0].content"),
        (lambda m: m.add("hi there friend", user_id=""), "user_id"),
        (lambda m: m.add("hi there friend", user_id="u", metadata={"x": float("nan")}), "metadata"),
        (lambda m: m.add("hi there friend", user_id="u", infer="no"), "infer"),
        (lambda m: m.add("x" * 5000, user_id="u", infer=False), "messages[0].content"),
        (lambda m: m.search("q", user_id="u", top_k=0), "top_k"),
        (lambda m: m.update("nope", ""), "text"),
        (lambda m: m.answer("q?", user_id=["a", "b", "c"]), "user_id"),
    ],
)
def test_bad_input_names_the_field(tmp_path, minilm, call, field):
    with pytest.raises(MemoryInputError, match=field.replace("[", r"\[").replace("]", r"\]")):
        call(scripted(tmp_path, minilm))


def test_malformed_model_output_is_counted_not_raised(tmp_path, minilm):
    garbage = lambda batch: (
        ['{"memory": [{"event": "MODIFY", "id": "9"}, {"event": "ADD"}'] * len(batch)
    )
    memory = Memory(tmp_path, facts=ScriptedFacts(), manager=garbage, embedder=minilm)
    assert memory.add("I bake bread on Sundays.", user_id="u") == {"results": []}
    stats = memory.stats()
    assert stats["manager_calls"] == 1 and stats["manager_well_formed"] == 0
    assert stats["manager_rejected_unknown_event"] == 1
    assert stats["manager_rejected_empty_text"] == 1


def test_corrupt_records_name_the_file(tmp_path, minilm):
    memory = scripted(tmp_path, minilm)
    memory.add("I keep bees in the garden.", user_id="u")
    (records,) = tmp_path.glob(f"users/*/snapshot-*/{RECORDS_FILE}")
    records.write_text('{"format": 1, "user_id": "u", "records": {}}')
    with pytest.raises(DataFileError, match=RECORDS_FILE):
        scripted(tmp_path, minilm)


def test_config_names_bad_fields():
    with pytest.raises(ConfigError, match="config.memory.manager"):
        MemoryConfig.from_dict({"manager": {"source": "scripted", "colour": 1}})
    with pytest.raises(ConfigError, match="related_k"):
        MemoryConfig.from_dict({"related_k": 0})
    assert MemoryConfig.from_dict({"manager": {"source": "/runs/x"}}).manager.source == "/runs/x"


@pytest.mark.heavy
def test_packaged_smollm2_drives_the_memory(tmp_path, minilm):
    """The base SmolLM2 as fact extractor, manager and answer agent: whatever it writes is
    parsed, applied or counted; every applied operation carries its raw output."""
    model = lambda role, n: role_policy(RoleSpec("packaged:smollm2", max_new_tokens=n), role)
    memory = Memory(
        tmp_path,
        facts=model("facts", 32),
        manager=model("manager", 64),
        answer=model("answer", 16),
        embedder=minilm,
    )
    out = memory.add("My name is John and I work as a nurse in Boston.", user_id="john")
    stats = memory.stats()
    assert sum(v for k, v in stats.items() if k.startswith("facts_json_")) == 1
    for result in out["results"]:
        assert set(result) >= {"id", "memory", "event"}
        assert result["event"] in ("ADD", "UPDATE", "DELETE")
        (first, *_) = memory.history(result["id"])
        assert first["provenance"]["model_output"]
    if stats["facts_total"]:
        assert stats["manager_calls"] == 1
    answer = memory.answer("Where does John work?", user_id="john")
    assert isinstance(answer["output"], str) and answer["output"]
    assert memory.stats()["answers_total"] == 1
