"""MemSearcher's prompts: the system prompt with the `wikipedia_search` schema, the per-turn
user message built from (question, memory), and the memory-update request after a tool call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memjax.agents.search_tool import TOOLS_SECTION
from memjax.text.prompt_templates import PromptTemplate

SYSTEM_PROMPT = (
    "You are a helpful assistant that answers questions by searching Wikipedia. You are given a "
    "question and your memory: a compact record of everything useful you have found so far "
    "(empty at the start).\n\n"
    "Reason step by step inside <think> </think> first. Then do exactly one of the following:\n"
    "1. If the memory already holds enough information to answer the question, give the final "
    "answer inside \\boxed{} without calling any function, for example \\boxed{Beijing}.\n"
    "2. Otherwise, call the wikipedia_search function. You will then see the results; read them "
    "carefully and update the memory with the new information that helps answer the question, "
    "while retaining all relevant details from the previous memory.\n\n" + TOOLS_SECTION
)

# The request that follows a tool response; the memory comes back within <memory> tags.
MEMORY_UPDATE_REQUEST = (
    "Please read the tool response carefully and update the memory with new information that "
    "helps to answer the question, while retaining all relevant details from the previous "
    "memory. Return the updated memory within <memory> </memory> tags."
)

THINK_PREFIX = "<think>"

# Templates (memjax.text.prompt_templates); `config.prompts.<name>` replaces any of them.
SYSTEM_TEMPLATE = PromptTemplate("memsearcher_system", (), SYSTEM_PROMPT)
USER_TEMPLATE = PromptTemplate(
    "memsearcher_user",
    ("question", "memory"),
    "<question> {{question}} </question>\n\n<memory> {{memory}} </memory>",
)
# One tool call's response and the update request after it (the authors repeat both per call).
TOOL_RESPONSE_TEMPLATE = PromptTemplate(
    "memsearcher_tool_response",
    ("call", "result"),
    "<tool_response>{{call}}\n{{result}}\n</tool_response>\n" + MEMORY_UPDATE_REQUEST,
)
TEMPLATES = {t.name: t for t in (SYSTEM_TEMPLATE, USER_TEMPLATE, TOOL_RESPONSE_TEMPLATE)}


def _template(templates: Mapping[str, PromptTemplate] | None, name: str) -> PromptTemplate:
    return (templates or {}).get(name, TEMPLATES[name])


def user_message(
    question: str, memory: str, templates: Mapping[str, PromptTemplate] | None = None
) -> str:
    return _template(templates, "memsearcher_user").render(question=question, memory=memory)


def context_messages(
    question: str, memory: str, templates: Mapping[str, PromptTemplate] | None = None
) -> tuple[dict, ...]:
    """The start of every context: nothing from earlier contexts survives but the memory."""
    return (
        {"role": "system", "content": _template(templates, "memsearcher_system").render()},
        {"role": "user", "content": user_message(question, memory, templates)},
    )


def tool_response_message(
    calls_and_results: Sequence[tuple[str, str]],
    templates: Mapping[str, PromptTemplate] | None = None,
) -> dict:
    """One user message for all the action's tool calls ((raw call, result) pairs), each
    response followed by the update request, as the authors' rollout concatenates them."""
    template = _template(templates, "memsearcher_tool_response")
    return {
        "role": "user",
        "content": "".join(template.render(call=c, result=r) for c, r in calls_and_results),
    }
