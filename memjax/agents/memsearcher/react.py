"""The ReAct-style baseline: MemSearcher's tools and answer format, but one growing context.

Every thought, tool call and tool response stays in the conversation, so the context grows
with each turn: this isolates what MemSearcher's memory buys (the comparison the paper makes
against ReAct-style agents such as ReSearch). Rewarded with MemSearcher's format + F1 reward
over the whole conversation's assistant messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memjax.agents.episode import (
    ContextRecord,
    EpisodeResult,
    ModelCall,
    ModelOutput,
    SearchRequest,
)
from memjax.agents.memsearcher.reward import reward
from memjax.agents.retrieval import Passage
from memjax.agents.search_tool import (
    TOOLS_SECTION,
    SearchSettings,
    error_result,
    format_results,
    plan_search,
    tool_response_body,
)
from memjax.agents.tool_format import extract_boxed, parse_tool_call

SYSTEM_PROMPT = (
    "You are a helpful assistant that answers questions by searching Wikipedia.\n\n"
    "In every step, reason inside <think> </think> first. Then either call the "
    "wikipedia_search function to look something up, or, once you know enough, give the final "
    "answer inside \\boxed{} without calling any function, for example \\boxed{Beijing}.\n\n"
    + TOOLS_SECTION
)
THINK_PREFIX = "<think>"


def initial_messages(question: str) -> tuple[dict, ...]:
    return (
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Question: {question}"},
    )


@dataclass(frozen=True)
class ReActSettings:
    max_turns: int = 5
    think_prefix: str = THINK_PREFIX
    search: SearchSettings = field(default_factory=SearchSettings)


class ReActEpisode:
    def __init__(self, question: str, settings: ReActSettings = ReActSettings()):
        if settings.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {settings.max_turns}")
        self.question = question
        self.settings = settings
        self.context = ContextRecord([ModelCall(initial_messages(question), settings.think_prefix)])
        self.searches: list[str] = []
        self.stop_reason = ""
        self._pending_tool = None
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    def current_call(self) -> ModelCall:
        if self._done or self._pending_tool is not None:
            raise RuntimeError("no model call pending")
        return self.context.calls[-1]

    def _finish(self, reason: str) -> None:
        self.stop_reason = reason
        self._done = True

    def observe(self, output: ModelOutput) -> SearchRequest | None:
        if self._done or self._pending_tool is not None:
            raise RuntimeError("observe() with no model call pending")
        self.context.outputs.append(output)
        if not output.eos:
            self._finish("no_eos")
            return None
        parsed = parse_tool_call(output.text)
        if parsed is None:
            self._finish("answer")
            return None
        if len(self.context.calls) >= self.settings.max_turns:
            self._finish("turn_limit")
            return None
        plan = plan_search(parsed, self.settings.search)
        if plan.query is None:
            self._respond(parsed, error_result(plan.error))
            return None
        self._pending_tool = parsed
        self.searches.append(plan.query)
        return SearchRequest(plan.query, plan.k)

    def receive(self, passages: list[Passage]) -> None:
        if self._pending_tool is None:
            raise RuntimeError("receive() with no search pending")
        parsed, self._pending_tool = self._pending_tool, None
        self._respond(parsed, format_results(passages, self.settings.search))

    def _respond(self, parsed, result: str) -> None:
        call = self.context.calls[-1]
        action = {
            "role": "assistant",
            "content": call.assistant_prefix + self.context.outputs[-1].text,
        }
        response = {"role": "user", "content": tool_response_body(parsed, result)}
        messages = (*call.messages, action, response)
        self.context.calls.append(ModelCall(messages, self.settings.think_prefix))

    def result(self, golden_answers: Sequence[str]) -> EpisodeResult:
        if not self._done:
            raise RuntimeError("result() before the episode ended")
        assistant = self.context.assistant_messages()
        outcome = reward(assistant, self.context.outputs[-1].eos, golden_answers)
        return EpisodeResult(
            question=self.question,
            answer=extract_boxed(assistant[-1]) if self.stop_reason == "answer" else None,
            reward=outcome.reward,
            stop_reason=self.stop_reason,
            contexts=[self.context],
            turn_contexts=self.context.growing_turns(),
            format_valid=outcome.format.valid,
            searches=list(self.searches),
        )
