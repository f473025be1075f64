"""Parsing the memory manager's output: bad items rejected and counted, never a crash."""

import json

import pytest

from memjax.agents.memory_r1 import IdMap, MemoryOp, parse_manager_output

IDS = IdMap.from_memories(
    [("bank-17", "Loves cheese pizza"), ("bank-3", "Name is John"), ("bank-9", "Lives in Boston")]
)


def _out(*items, fence=False):
    text = json.dumps({"memory": list(items)})
    return f"```json\n{text}\n```" if fence else text


def test_valid_output_maps_prompt_ids_to_real_ids():
    text = _out(
        {"id": "0", "text": "Loves cheese and chicken pizza", "event": "UPDATE", "old_memory": "x"},
        {"id": "1", "text": "Name is John", "event": "NONE"},
        {"id": "2", "text": "Lives in Boston", "event": "DELETE"},
        {"id": "3", "text": "Has a dog named Max", "event": "ADD"},
    )
    parsed = parse_manager_output("Sure! Here it is:\n" + text + "\nDone.", IDS)
    assert parsed.ops == (
        # old_text is the bank's real text, not the model's "old_memory" claim.
        MemoryOp("UPDATE", "bank-17", "Loves cheese and chicken pizza", "Loves cheese pizza"),
        MemoryOp("NONE", "bank-3", "Name is John"),
        MemoryOp("DELETE", "bank-9", "Lives in Boston", "Lives in Boston"),
        MemoryOp("ADD", None, "Has a dog named Max"),
    )
    assert parsed.well_formed and parsed.json_status == "ok"
    counts = parsed.counts()
    assert counts["op_update"] == counts["op_delete"] == counts["op_add"] == counts["op_none"] == 1


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I think we should add the dog.",
        "{{{{ ]]]",
        '{"memory": "add the dog"}',
        None,
        '{"facts": ["x"]}',
    ],
)
def test_garbage_gives_no_ops_and_a_counted_reason(text):
    parsed = parse_manager_output(text, IDS)
    assert parsed.ops == () and not parsed.well_formed
    assert len(parsed.rejections) == 1
    assert parsed.rejections[0].reason in {"no_json", "memory_not_a_list"}


def test_code_fence_and_case_forgiven():
    parsed = parse_manager_output(
        _out({"id": 1, "text": "x", "event": " delete "}, fence=True), IDS
    )
    assert parsed.ops == (MemoryOp("DELETE", "bank-3", "Name is John", "Name is John"),)
    assert parsed.well_formed


def test_partial_json_keeps_complete_items():
    full = _out(
        {"id": "9", "text": "Has a dog named Max", "event": "ADD"},
        {"id": "2", "text": "Lives in Boston", "event": "DELETE"},
        {"id": "0", "text": "Loves pizza", "event": "UPDATE"},
    )
    cut = full[: full.index('{"id": "0"') + 12]  # stops inside the third item
    parsed = parse_manager_output(cut, IDS)
    assert parsed.json_status == "salvaged"
    assert [op.op for op in parsed.ops] == ["ADD", "DELETE"]
    assert [r.reason for r in parsed.rejections] == ["truncated"]


def test_unknown_missing_and_corrupted_ids_are_rejected():
    parsed = parse_manager_output(
        _out(
            {"id": "7", "text": "x", "event": "UPDATE"},  # never shown
            {"id": "bank-17", "text": "x", "event": "DELETE"},  # a real id: not shown, rejected
            {"id": "01", "text": "x", "event": "DELETE"},  # not exactly a shown id
            {"id": True, "text": "x", "event": "DELETE"},
            {"text": "x", "event": "UPDATE"},
            {"id": "", "text": "x", "event": "DELETE"},
        ),
        IDS,
    )
    assert parsed.ops == ()
    reasons = [r.reason for r in parsed.rejections]
    assert reasons == ["unknown_id"] * 4 + ["missing_id"] * 2


def test_duplicate_ids_first_wins():
    parsed = parse_manager_output(
        _out(
            {"id": "0", "text": "Loves pineapple pizza", "event": "UPDATE"},
            {"id": "0", "text": "x", "event": "DELETE"},
            {"id": 0, "text": "y", "event": "NONE"},
            {"id": "5", "text": "Has a cat", "event": "ADD"},
            {"id": "6", "text": "has a cat ", "event": "ADD"},
        ),
        IDS,
    )
    assert [(op.op, op.real_id) for op in parsed.ops] == [("UPDATE", "bank-17"), ("ADD", None)]
    assert [r.reason for r in parsed.rejections] == [
        "duplicate_id",
        "duplicate_id",
        "duplicate_add",
    ]


def test_wrong_event_names_and_bad_items():
    parsed = parse_manager_output(
        _out(
            {"id": "0", "text": "x", "event": "NOOP"},
            {"id": "0", "text": "x", "event": "MODIFY"},
            {"id": "0", "text": "x"},
            {"id": "0", "text": "x", "event": 3},
            "ADD a dog",
            {"id": "0", "text": "  ", "event": "UPDATE"},
            {"text": "", "event": "ADD"},
            {"id": "0", "text": "Loves pizza", "event": "UPDATE"},  # still valid after all that
        ),
        IDS,
    )
    assert parsed.ops == (MemoryOp("UPDATE", "bank-17", "Loves pizza", "Loves cheese pizza"),)
    counts = parsed.counts()
    assert counts["rejected_unknown_event"] == 4
    assert counts["rejected_not_an_object"] == 1
    assert counts["rejected_empty_text"] == 2
    assert counts["json_ok"] == 1


def test_none_without_a_known_id_is_accepted_and_add_ignores_ids():
    parsed = parse_manager_output(
        _out({"text": "irrelevant", "event": "NONE"}, {"id": "0", "text": "New", "event": "ADD"}),
        IDS,
    )
    assert parsed.ops == (MemoryOp("NONE", None, "irrelevant"), MemoryOp("ADD", None, "New"))
    assert parsed.well_formed


def test_empty_memory_map():
    empty = IdMap.from_memories([])
    parsed = parse_manager_output(_out({"id": "0", "text": "x", "event": "DELETE"}), empty)
    assert parsed.ops == () and parsed.rejections[0].reason == "unknown_id"


def test_id_map():
    assert IDS.prompt_entries()[2] == {"id": "2", "text": "Lives in Boston"}
    assert IDS.real_id(" 2 ") == "bank-9" and IDS.real_id(2) == "bank-9"
    assert IDS.real_id("3") is None and IDS.real_id("-1") is None and IDS.real_id(2.0) is None
    assert IDS.text("0") == "Loves cheese pizza"
    with pytest.raises(ValueError, match="duplicate real memory ids"):
        IdMap.from_memories([("a", "x"), ("a", "y")])
