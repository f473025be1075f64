"""Scripted search agents on HotpotQA that use only the question's supporting facts.

Each supporting title is searched for in turn: first by its title, then (if the title's
paragraph was not among the results) by the title and its first supporting sentence. The
memory (MemSearcher) holds the supporting sentences of every paragraph found so far, as
"Title: sentence" lines; once every supporting paragraph has been found, the agent answers
with the gold answer (`\\boxed{}` for MemSearcher, `<answer>` for Search-R1). An oracle never
answers without its evidence: one that runs out of turns is rejected by the replay.

Every thought first lists the paragraphs found so far, then decides. A student trained on a
thought that opens with the decision ("I need to find..." against "The memory holds...") has to
make it in its first token, and a 135M model learned to search in every context that way; after
listing what its memory covers (titles it can copy from the memory in front of it), whether
anything is still missing is a much more local question.
"""

from __future__ import annotations

import json
from collections import Counter

from memjax.agents.episode import ModelCall, ModelOutput
from memjax.agents.retrieval import Passage
from memjax.agents.search_tool import TOOL_NAME
from memjax.data.corpus import split_contents
from memjax.data.hotpotqa import HotpotExample


def supporting_sentences(example: HotpotExample) -> dict[str, list[str]]:
    """title -> its supporting sentences (stripped), titles in supporting-fact order; a
    sentence id outside its paragraph is skipped."""
    paragraphs = {p.title: p.sentences for p in example.paragraphs}
    out: dict[str, list[str]] = {}
    for title, sent_id in example.supporting_facts:
        sentences = paragraphs.get(title, ())
        out.setdefault(title, [])
        if 0 <= sent_id < len(sentences) and sentences[sent_id].strip() not in out[title]:
            out[title].append(sentences[sent_id].strip())
    return out


class SupportTracker:
    """Which supporting paragraphs the searches have found, and what to search next."""

    def __init__(self, example: HotpotExample):
        self.example = example
        self.support = supporting_sentences(example)
        self.found: list[str] = []  # titles, in the order found
        self.attempts: Counter = Counter()

    @property
    def missing(self) -> list[str]:
        return [t for t in self.support if t not in self.found]

    def next_query(self) -> str:
        title = self.missing[0]
        sentences = self.support[title]
        first_try = self.attempts[title] == 0 or not sentences
        self.attempts[title] += 1
        return title if first_try else f"{title} {sentences[0]}"

    def saw(self, passages: list[Passage]) -> None:
        titles = {split_contents(p["contents"])[0] for p in passages}
        self.found += [t for t in self.missing if t in titles]

    def memory(self) -> str:
        return "\n".join(f"{t}: {s}" for t in self.found for s in self.support[t])

    def thought(self) -> str:
        """What has been found, then what is still needed (the next title) or that nothing is."""
        found = "; ".join(self.found) if self.found else "nothing yet"
        if self.missing:
            return f"Found so far: {found}. I still need {self.missing[0]}."
        return f"Found so far: {found}. That is all the question needs."


class MemSearcherOracle:
    """Completions for a MemSearcher episode's calls (after its "<think>" prefix)."""

    def __init__(self, example: HotpotExample):
        self.tracker = SupportTracker(example)

    def __call__(self, call: ModelCall) -> ModelOutput:
        if call.messages[-1]["content"].startswith("<tool_response>"):
            return ModelOutput(f"<memory>\n{self.tracker.memory()}\n</memory>", True)
        thought = self.tracker.thought()
        if not self.tracker.missing:
            answer = self.tracker.example.answer
            return ModelOutput(f"{thought}</think>\n\\boxed{{{answer}}}", True)
        query = self.tracker.next_query()
        call_json = json.dumps({"name": TOOL_NAME, "arguments": {"query": query}})
        text = f"{thought}</think>\n<tool_call>\n{call_json}\n</tool_call>"
        return ModelOutput(text, True)

    def saw(self, passages: list[Passage]) -> None:
        self.tracker.saw(passages)


class SearchR1Oracle:
    """Completions for a Search-R1 episode: `<search>` until the evidence is in, then
    `<answer>`."""

    def __init__(self, example: HotpotExample):
        self.tracker = SupportTracker(example)

    def __call__(self, call: ModelCall) -> ModelOutput:
        thought = f"<think> {self.tracker.thought()} </think>"
        if not self.tracker.missing:
            answer = self.tracker.example.answer
            return ModelOutput(f"{thought}\n<answer> {answer} </answer>", True)
        query = self.tracker.next_query()
        return ModelOutput(f"{thought}\n<search> {query} </search>", True)

    def saw(self, passages: list[Passage]) -> None:
        self.tracker.saw(passages)
