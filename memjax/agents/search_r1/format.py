"""Search-R1's prompt, action parser, observation format and exact-match reward.

Tags are found in linear time (memjax.agents.tag_scan); a completion over
memjax.bounded_input's length bound is an invalid action.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memjax.agents.retrieval import Passage
from memjax.agents.tag_scan import first_block, tag_blocks
from memjax.bounded_input import MAX_TEXT_CHARS
from memjax.eval.qa_metrics import em_score

PROMPT_TEMPLATE = (
    "Answer the given question. Every time you receive new information, first reason inside "
    "<think> and </think>. After reasoning, if you find you are missing some knowledge, you can "
    "call a search engine with <search> query </search>, and it will return the top results "
    "between <information> and </information>. You may search as many times as you need. When "
    "you need no further knowledge, give the answer directly, wrapped in answer tags and "
    "without detailed explanation. For example, <answer> Beijing </answer>. Question: {question}\n"
)

INVALID_ACTION = (
    "\nMy previous action is invalid. To search, I should put the query between <search> and "
    "</search>. To give the final answer, I should wrap it in answer tags. Let me try again.\n"
)

STOP = ("</search>", "</answer>")

# `extract_answer` counts <answer> blocks in prompt + response and needs two, the prompt's
# example being the first; so the prompt holds exactly one block and the invalid-action note
# none (Search-R1's own prompt also has "<answer> and </answer>", which already counts as one).


def prompt(question: str) -> str:
    return PROMPT_TEMPLATE.format(question=question.strip())


@dataclass(frozen=True)
class Action:
    kind: str  # "search", "answer" or "invalid"
    content: str
    text: str  # the completion cut right after the action's closing tag


def parse_action(text: str) -> Action:
    """The first complete `<search>` or `<answer>` block; anything written after it is dropped,
    as if generation had stopped at the closing tag."""
    block = first_block(text, ("search", "answer")) if len(text) <= MAX_TEXT_CHARS else None
    if block is None:
        return Action("invalid", "", text)
    return Action(block.tag, block.content.strip(), text[: block.end])


def format_information(passages: Sequence[Passage]) -> str:
    """`\\n\\n<information>Doc 1(Title: "t") text\\nDoc 2...</information>\\n\\n`; the title is the
    contents' first line, quotes included, as in Search-R1."""
    docs = []
    for i, p in enumerate(passages, start=1):
        title, _, text = p["contents"].partition("\n")
        docs.append(f"Doc {i}(Title: {title}) {text}\n")
    return "\n\n<information>" + "".join(docs).strip() + "</information>\n\n"


def extract_answer(full_text: str) -> str | None:
    """The last `<answer>` of prompt + response. The prompt's own example is one match, so
    fewer than two matches means the model never answered."""
    matches = tag_blocks(full_text, "answer")
    if len(matches) <= 1:
        return None
    return matches[-1].content.strip()


def reward(full_text: str, golden_answers: Sequence[str]) -> float:
    """Outcome exact match in {0, 1}; no format credit (format_score = 0)."""
    answer = extract_answer(full_text)
    return em_score(answer, golden_answers) if answer is not None else 0.0
