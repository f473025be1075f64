"""The memory manager's prompt (MR1-v5 Fig. 9-10, adapted from Mem0's update-memory prompt).

The manager sees the related memories under small prompt ids ("0", "1", ...; see id_map) and
the new facts, and answers {"memory": [{"id", "text", "event", "old_memory"}]} with event ADD,
UPDATE, DELETE or NONE (NOOP is written "NONE", as in Mem0). The opening sentence and the
output wrapper follow the paper; the rest is memjax's wording of the same rules, with few-shot
examples built on the paper's cases (cheese/chicken pizza, cricket, "Name is John").
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from memjax.text.prompt_templates import PromptTemplate

MANAGER_INSTRUCTIONS = """\
You are a smart memory manager which controls the memory of a system. You can perform four \
operations: (1) add into the memory, (2) update the memory, (3) delete from the memory, and \
(4) no change.

Based on these four operations, the memory will change. Compare each newly retrieved fact \
with the existing memory and decide, for each fact, whether to:
- ADD: add it to the memory as a new element,
- UPDATE: update an existing memory element,
- DELETE: delete an existing memory element,
- NONE: make no change (the fact is already present or irrelevant).

Guidelines for each operation:

1. **Add**: If the retrieved fact contains new information not present in the memory, add it \
and generate a new ID for it.
- Example:
  - Old Memory:
    [{"id": "0", "text": "User is a software engineer"}]
  - Retrieved facts: ["Name is John"]
  - New Memory:
    {"memory": [
      {"id": "0", "text": "User is a software engineer", "event": "NONE"},
      {"id": "1", "text": "Name is John", "event": "ADD"}]}

2. **Update**: If the retrieved fact is already present in the memory but the information is \
totally different, update it. If the fact conveys the same thing as a memory element but \
with more detail, keep the one with more information. Keep the same ID when updating, and \
give the previous text in "old_memory".
- Example:
  - Old Memory:
    [{"id": "0", "text": "I really like cheese pizza"},
     {"id": "1", "text": "User is a software engineer"},
     {"id": "2", "text": "User likes to play cricket"}]
  - Retrieved facts: ["Loves chicken pizza", "Loves to play cricket with friends"]
  - New Memory:
    {"memory": [
      {"id": "0", "text": "Loves cheese and chicken pizza", "event": "UPDATE", \
"old_memory": "I really like cheese pizza"},
      {"id": "1", "text": "User is a software engineer", "event": "NONE"},
      {"id": "2", "text": "Loves to play cricket with friends", "event": "UPDATE", \
"old_memory": "User likes to play cricket"}]}

3. **Delete**: If the retrieved fact contradicts a memory element, delete that element, \
returning its same ID.
- Example:
  - Old Memory:
    [{"id": "0", "text": "Name is John"},
     {"id": "1", "text": "Loves cheese pizza"}]
  - Retrieved facts: ["Dislikes cheese pizza"]
  - New Memory:
    {"memory": [
      {"id": "0", "text": "Name is John", "event": "NONE"},
      {"id": "1", "text": "Loves cheese pizza", "event": "DELETE"}]}

4. **No Change**: If the retrieved fact is already present in the memory, or is irrelevant, \
make no change.
- Example:
  - Old Memory:
    [{"id": "0", "text": "Name is John"},
     {"id": "1", "text": "Loves cheese pizza"}]
  - Retrieved facts: ["Name is John"]
  - New Memory:
    {"memory": [
      {"id": "0", "text": "Name is John", "event": "NONE"},
      {"id": "1", "text": "Loves cheese pizza", "event": "NONE"}]}"""

OUTPUT_SCHEMA = """\
{
    "memory": [
        {
            "id": "<ID of the memory>",
            "text": "<Content of the memory>",
            "event": "<Operation to be performed: ADD, UPDATE, DELETE or NONE>",
            "old_memory": "<Old memory content; only for UPDATE>"
        },
        ...
    ]
}"""


# Templates (memjax.text.prompt_templates): the whole user message, and the two forms of its
# current-memory part (Mem0's get_update_memory_messages has the same two).
MANAGER_TEMPLATE = PromptTemplate(
    "manager",
    ("current_memory", "facts"),
    MANAGER_INSTRUCTIONS + "\n\n{{current_memory}}\n\n"
    "The new retrieved facts are in the triple backticks. Analyse them and decide, for "
    "each, whether it should be added, updated or deleted in the memory, or cause no "
    "change.\n\n```\n{{facts}}\n```\n\n"
    "Return your response in the following JSON structure only:\n\n"
    f"{OUTPUT_SCHEMA}\n\n"
    "Follow these instructions:\n"
    "- Do not return anything from the examples above.\n"
    "- If the current memory is empty, add the new retrieved facts to the memory.\n"
    "- Keep the ID of a memory element that does not change, and list it with event NONE.\n"
    "- For an addition, generate a new ID.\n"
    "- For an update, keep the ID and change only the text.\n"
    "- For a deletion, return the element's ID with event DELETE.\n\n"
    "Do not return anything except the JSON format.",
)
MANAGER_MEMORY_TEMPLATE = PromptTemplate(
    "manager_memory",
    ("memories",),
    "Below is the current content of the memory:\n\n```\n{{memories}}\n```",
)
MANAGER_EMPTY_MEMORY_TEMPLATE = PromptTemplate(
    "manager_empty_memory", (), "Current memory is empty."
)


def render_manager_prompt(
    prompt_memories: Sequence[dict[str, str]],
    facts: Sequence[str],
    template: PromptTemplate = MANAGER_TEMPLATE,
    memory_template: PromptTemplate = MANAGER_MEMORY_TEMPLATE,
    empty_template: PromptTemplate = MANAGER_EMPTY_MEMORY_TEMPLATE,
) -> str:
    """The manager's user message. `prompt_memories` is IdMap.prompt_entries()."""
    if prompt_memories:
        # One memory per line, as in the examples: compact for small context windows.
        listed = ",\n".join(json.dumps(dict(m), ensure_ascii=False) for m in prompt_memories)
        current = memory_template.render(memories="[\n" + listed + "\n]")
    else:
        current = empty_template.render()
    return template.render(
        current_memory=current, facts=json.dumps(list(facts), ensure_ascii=False)
    )
