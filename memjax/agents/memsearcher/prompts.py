"""MemSearcher's prompts: the system prompt with the `wikipedia_search` schema, the per-turn
user message built from (question, memory), and the memory-update request after a tool call."""

from __future__ import annotations

from collections.abc import Sequence

from memjax.agents.search_tool import TOOLS_SECTION

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


def user_message(question: str, memory: str) -> str:
    return f"<question> {question} </question>\n\n<memory> {memory} </memory>"


def context_messages(question: str, memory: str) -> tuple[dict, ...]:
    """The start of every context: nothing from earlier contexts survives but the memory."""
    return (
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_message(question, memory)},
    )


def tool_response_message(bodies: str | Sequence[str]) -> dict:
    """One user message for all the action's tool responses, each followed by the update
    request, as the authors' rollout concatenates them."""
    bodies = [bodies] if isinstance(bodies, str) else list(bodies)
    return {"role": "user", "content": "".join(f"{b}\n{MEMORY_UPDATE_REQUEST}" for b in bodies)}
