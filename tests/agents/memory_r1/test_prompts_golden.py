"""Prompt rendering checked against golden files (tests/agents/golden/memory_r1_*.txt).

The golden files were generated once from this code and reviewed against papers.md §1.6 by
hand; regenerate deliberately with MEMJAX_UPDATE_GOLDEN=1 and review the diff.
"""

import os
from pathlib import Path

import pytest

from memjax.agents.memory_r1 import (
    IdMap,
    render_answer_prompt,
    render_fact_messages,
    render_manager_prompt,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden"

MEM_A = [
    ("1:56 pm on 8 May, 2023", "Adopted a dog named Max"),
    ("10:37 am on 27 June, 2023", "Adopted a second dog, Bella"),
]
MEM_B = [("1:56 pm on 8 May, 2023", "Allergic to nuts; it is only peanuts")]


def _renderings() -> dict[str, str]:
    ids = IdMap.from_memories([("bank-17", "Loves cheese pizza"), ("bank-3", "Name is John")])
    facts = render_fact_messages(
        [("Ann", "Hi Bo!"), ("Bo", "I adopted a dog named Max last week.")],
        date="8 May, 2023",
    )
    return {
        "memory_r1_facts.txt": "\n----\n".join(f"[{m['role']}]\n{m['content']}" for m in facts),
        "memory_r1_manager.txt": render_manager_prompt(
            ids.prompt_entries(), ["Dislikes cheese pizza", "Has a dog named Max"]
        ),
        "memory_r1_manager_empty.txt": render_manager_prompt([], ["Name is John"]),
        "memory_r1_answer_distill.txt": render_answer_prompt(
            "Ann", MEM_A, "Bo", MEM_B, "How many dogs does Ann have?"
        ),
        "memory_r1_answer_no_distill.txt": render_answer_prompt(
            "Ann", MEM_A, "Bo", MEM_B, "How many dogs does Ann have?", distill=False
        ),
    }


@pytest.mark.parametrize("name", sorted(_renderings()))
def test_rendering_matches_golden(name):
    text = _renderings()[name]
    path = GOLDEN / name
    if os.environ.get("MEMJAX_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing; run with MEMJAX_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8")


def test_answer_prompt_rules_from_the_paper():
    on = render_answer_prompt("Ann", MEM_A, "Bo", MEM_B, "Q?")
    off = render_answer_prompt("Ann", MEM_A, "Bo", MEM_B, "Q?", distill=False)
    rule9 = (
        "9. Select memories you found that are useful for answering the questions, and "
        "output it before you answer questions."
    )
    assert rule9 in on and "10. Output the final answer after **Answer:**" in on
    assert "8. The answer should be less than 5-6 words." in on
    assert "First output the memories that you found are important" in on
    # Distillation off: rule 9 and the last approach step go, the answer marker stays.
    assert "Select memories" not in off and "First output the memories" not in off
    assert "9. Output the final answer after **Answer:**" in off
    assert "Memories for user Ann:\n\n- 1:56 pm on 8 May, 2023: Adopted a dog named Max\n" in on
    assert on.endswith("Question: Q?")


def test_answer_prompt_takes_at_most_30_per_speaker():
    thirty = [("ts", f"m{i}") for i in range(30)]
    prompt = render_answer_prompt("Ann", thirty, "Bo", thirty, "Q?")
    assert prompt.count("\n- ts: m") == 60
    with pytest.raises(ValueError, match="at most 30 per speaker"):
        render_answer_prompt("Ann", thirty + [("ts", "x")], "Bo", [], "Q?")


def test_manager_prompt_shows_only_prompt_ids():
    ids = IdMap.from_memories([("bank-17", "Loves cheese pizza")])
    prompt = render_manager_prompt(ids.prompt_entries(), ["Dislikes cheese pizza"])
    assert prompt.startswith(
        "You are a smart memory manager which controls the memory of a system. You can perform "
        "four operations: (1) add into the memory, (2) update the memory, (3) delete from the "
        "memory, and (4) no change."
    )
    assert '{"id": "0", "text": "Loves cheese pizza"}' in prompt and "bank-17" not in prompt
    assert prompt.endswith("Do not return anything except the JSON format.")
    assert "Current memory is empty." in render_manager_prompt([], ["x"])
