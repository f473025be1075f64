"""Fact extraction (Mem0's role for FACT_RETRIEVAL_PROMPT): dialogue -> {"facts": [...]}.

Memory-R1 extracts facts from each dialogue turn (Alg. 3, `f_i <- LLMExtract(t_i)`) before the
memory manager sees them; Mem0 feeds the new messages with some preceding context. The caller
picks the window; this module renders it. memjax's wording; the output format is Mem0's.
"""

from __future__ import annotations

from collections.abc import Sequence

from memjax.text.prompt_templates import PromptTemplate

_FACT_SYSTEM_TEXT = """\
You are a personal information organizer. You read a conversation and write down the facts \
about the people in it that are worth remembering for future conversations: short, \
self-contained statements, one fact each.

Types of information to remember:
1. Personal details: names, relationships, family, pets and important dates.
2. Preferences: likes and dislikes in food, products, activities and entertainment.
3. Plans and events: trips, goals, and things that happened or will happen.
4. Health and wellbeing: allergies, diets, fitness routines.
5. Work and education: jobs, studies, career changes.
6. Places: where people live, move to and travel.
7. Anything else specific that a friend would remember.

Examples:

Input: Hi, how are you?
Output: {"facts": []}

Input: The sky is blue.
Output: {"facts": []}

Input: I adopted a dog named Max last week.
Output: {"facts": ["Adopted a dog named Max"]}

Input: My name is John and I work as a nurse in Boston.
Output: {"facts": ["Name is John", "Works as a nurse", "Lives in Boston"]}

Rules:
- Today's date is {{date}}. Turn relative dates ("last week") into dates when you can.
- Keep the names of the people facts are about when the conversation gives them.
- Do not return anything from the examples above.
- If nothing is worth remembering, return an empty list.
- Write the facts in the language of the conversation.
- Return only JSON of the form {"facts": ["fact", ...]}, and nothing else."""

# Templates (memjax.text.prompt_templates): the system prompt and the user message.
FACT_SYSTEM_TEMPLATE = PromptTemplate("fact_system", ("date",), _FACT_SYSTEM_TEXT)
FACT_USER_TEMPLATE = PromptTemplate("fact_user", ("dialogue",), "Input:\n{{dialogue}}")


def render_fact_messages(
    turns: Sequence[tuple[str, str]],
    date: str,
    system: PromptTemplate = FACT_SYSTEM_TEMPLATE,
    user: PromptTemplate = FACT_USER_TEMPLATE,
) -> list[dict[str, str]]:
    """[(speaker, text), ...] (context turns first, the new turn last) -> chat messages."""
    dialogue = "\n".join(f"{speaker}: {text}" for speaker, text in turns)
    return [
        {"role": "system", "content": system.render(date=date)},
        {"role": "user", "content": user.render(dialogue=dialogue)},
    ]
