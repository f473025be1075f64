"""The answer agent's prompt with Memory Distillation (MR1-v5 Fig. 11).

Mem0's answer prompt (context; instructions 1-8; an eight-step approach) plus Memory-R1's two
rules: 9, select the useful memories and output them first, and 10, give the final answer
after **Answer:**. Retrieved memories come 30 per speaker, each with its timestamp. With
distillation off (the ablation) rule 9 and the approach's last step go; rule 10 stays, so the
answer is read the same way in both settings.
"""

from __future__ import annotations

from collections.abc import Sequence

from memjax.text.prompt_templates import PromptTemplate

ANSWER_MARKER = "**Answer:**"
MEMORIES_PER_SPEAKER = 30

_OPENING = (
    "You are an intelligent memory assistant tasked with retrieving accurate information "
    "from conversation memories."
)
_CONTEXT = (
    "# CONTEXT:\n"
    "You have access to memories from two speakers in a conversation. These memories contain "
    "timestamped information that may be relevant to answering the question."
)
_INSTRUCTIONS = (
    "Carefully analyze all provided memories from both speakers.",
    "Pay special attention to the timestamps to determine the answer.",
    "If the question asks about a specific event or fact, look for direct evidence in the "
    "memories.",
    "If the memories contain contradictory information, prioritize the most recent memory.",
    'If the question involves a time reference (like "last year" or "two months ago"), '
    "calculate the actual date from the memory's timestamp.",
    "Always convert relative time references into specific dates, months or years in your answer.",
    "Focus only on the content of the memories from both speakers. Do not confuse people "
    "mentioned in a memory with the speakers whose memories they are.",
    "The answer should be less than 5-6 words.",
)
_DISTILL_RULE = (
    "Select memories you found that are useful for answering the questions, and output it "
    "before you answer questions."
)
_ANSWER_RULE = f"Output the final answer after {ANSWER_MARKER}"
_APPROACH = (
    "First, examine all memories that contain information related to the question.",
    "Examine the timestamps and content of these memories carefully.",
    "Look for explicit mentions of dates, times, locations or events that answer the question.",
    "If the answer requires calculation (e.g. converting a relative time reference), show "
    "your work.",
    "Formulate a precise, concise answer based only on the evidence in the memories.",
    "Double-check that your answer directly addresses the question asked.",
    "Make sure your final answer is specific and avoids vague time references.",
)
_DISTILL_STEP = (
    "First output the memories that you found are important before you answer questions."
)


def _numbered(items: Sequence[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, start=1))


def format_memories(memories: Sequence[tuple[str, str]]) -> str:
    """[(timestamp, text), ...] -> "- <timestamp>: <text>" lines."""
    if not memories:
        return "(no memories)"
    return "\n".join(f"- {ts}: {text}" for ts, text in memories)


ANSWER_PLACEHOLDERS = ("speaker_a", "memories_a", "speaker_b", "memories_b", "question")


def _answer_text(distill: bool) -> str:
    instructions = list(_INSTRUCTIONS) + ([_DISTILL_RULE] if distill else []) + [_ANSWER_RULE]
    approach = list(_APPROACH) + ([_DISTILL_STEP] if distill else [])
    return (
        f"{_OPENING}\n\n{_CONTEXT}\n\n"
        f"# INSTRUCTIONS:\n{_numbered(instructions)}\n\n"
        f"# APPROACH (Think step by step):\n{_numbered(approach)}\n\n"
        "Memories for user {{speaker_a}}:\n\n{{memories_a}}\n\n"
        "Memories for user {{speaker_b}}:\n\n{{memories_b}}\n\n"
        "Question: {{question}}"
    )


# Templates (memjax.text.prompt_templates): with Memory Distillation, and the ablation's.
ANSWER_TEMPLATE = PromptTemplate("answer", ANSWER_PLACEHOLDERS, _answer_text(True))
ANSWER_NO_DISTILL_TEMPLATE = PromptTemplate(
    "answer_no_distill", ANSWER_PLACEHOLDERS, _answer_text(False)
)


def render_answer_prompt(
    speaker_a: str,
    memories_a: Sequence[tuple[str, str]],
    speaker_b: str,
    memories_b: Sequence[tuple[str, str]],
    question: str,
    *,
    distill: bool = True,
    max_per_speaker: int = MEMORIES_PER_SPEAKER,
    template: PromptTemplate | None = None,
) -> str:
    """The answer agent's prompt over each speaker's retrieved (timestamp, memory) pairs;
    `template` defaults to the distillation setting's."""
    for name, memories in ((speaker_a, memories_a), (speaker_b, memories_b)):
        if len(memories) > max_per_speaker:
            raise ValueError(
                f"{len(memories)} memories for {name}; the prompt takes at most "
                f"{max_per_speaker} per speaker (retrieve top-{max_per_speaker})"
            )
    if template is None:
        template = ANSWER_TEMPLATE if distill else ANSWER_NO_DISTILL_TEMPLATE
    return template.render(
        speaker_a=speaker_a,
        memories_a=format_memories(memories_a),
        speaker_b=speaker_b,
        memories_b=format_memories(memories_b),
        question=question,
    )
