"""One MemSearcher trajectory as a state machine over text.

Each turn is one context, rebuilt from (question, memory) and holding up to two calls:
  1. the action: `<think>...</think>` then a `<tool_call>` or a `\\boxed{}` answer;
  2. after the tool response, the memory update `<memory>...</memory>`.
The trajectory ends on an answer (no tool call), a call that hit the token limit (no EOS), a
memory update without `<memory>`, a memory over the cap (not truncated: the trajectory ends, as
in the paper's code), or after `max_turns` contexts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memjax.agents.episode import (
    ContextRecord,
    EpisodeResult,
    ModelCall,
    ModelOutput,
    SearchRequest,
)
from memjax.agents.memsearcher import prompts
from memjax.agents.memsearcher.reward import reward
from memjax.agents.retrieval import Passage
from memjax.agents.search_tool import (
    SearchSettings,
    error_result,
    format_results,
    plan_search,
    tool_response_body,
)
from memjax.agents.tool_format import extract_boxed, last_tag_content, parse_tool_call

TRAIN_MAX_TURNS = 5
EVAL_MAX_TURNS = 20


@dataclass(frozen=True)
class MemSearcherSettings:
    max_turns: int = TRAIN_MAX_TURNS  # EVAL_MAX_TURNS at evaluation
    memory_cap_tokens: int = 1024
    think_prefix: str = prompts.THINK_PREFIX
    search: SearchSettings = field(default_factory=SearchSettings)


_ACT, _SEARCH, _MEMORY, _DONE = "act", "search", "memory", "done"


class MemSearcherEpisode:
    def __init__(
        self,
        question: str,
        count_tokens: Callable[[str], int],
        settings: MemSearcherSettings = MemSearcherSettings(),
    ):
        if settings.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {settings.max_turns}")
        self.question = question
        self.count_tokens = count_tokens
        self.settings = settings
        self.memory = ""
        self.memories: list[str] = []  # every accepted memory, in order
        self.contexts: list[ContextRecord] = []
        self.searches: list[str] = []
        self.stop_reason = ""
        self._state = _ACT
        self._pending_tool = None
        self._new_context()

    # -- the Episode protocol ------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._state == _DONE

    def current_call(self) -> ModelCall:
        if self._state not in (_ACT, _MEMORY):
            raise RuntimeError(f"no model call in state {self._state!r}")
        return self._context.calls[-1]

    def observe(self, output: ModelOutput) -> SearchRequest | None:
        if self._state == _ACT:
            return self._observe_action(output)
        if self._state == _MEMORY:
            self._observe_memory(output)
            return None
        raise RuntimeError(f"observe() in state {self._state!r}")

    def receive(self, passages: list[Passage]) -> None:
        if self._state != _SEARCH:
            raise RuntimeError(f"receive() in state {self._state!r}")
        self._respond(format_results(passages, self.settings.search))

    def result(self, golden_answers: Sequence[str]) -> EpisodeResult:
        if not self.done:
            raise RuntimeError("result() before the episode ended")
        final = self.contexts[-1]
        outcome = reward(final.assistant_messages(), final.outputs[-1].eos, golden_answers)
        answer = None
        if self.stop_reason == "answer":
            answer = extract_boxed(final.assistant_messages()[-1])
        return EpisodeResult(
            question=self.question,
            answer=answer,
            reward=outcome.reward,
            stop_reason=self.stop_reason,
            contexts=list(self.contexts),
            turn_contexts=list(self.contexts),
            format_valid=outcome.format.valid,
            searches=list(self.searches),
        )

    # -- transitions ----------------------------------------------------------------------

    @property
    def _context(self) -> ContextRecord:
        return self.contexts[-1]

    def _new_context(self) -> None:
        messages = prompts.context_messages(self.question, self.memory)
        self.contexts.append(ContextRecord([ModelCall(messages, self.settings.think_prefix)]))
        self._state = _ACT

    def _finish(self, reason: str) -> None:
        self.stop_reason = reason
        self._state = _DONE

    def _observe_action(self, output: ModelOutput) -> SearchRequest | None:
        self._context.outputs.append(output)
        if not output.eos:
            self._finish("no_eos")
            return None
        parsed = parse_tool_call(output.text)
        if parsed is None:
            self._finish("answer")
            return None
        self._pending_tool = parsed
        plan = plan_search(parsed, self.settings.search)
        if plan.query is None:
            # A broken call is answered with an error and the turn goes on; the format check
            # gives the trajectory 0 if this is its final context.
            self._respond(error_result(plan.error))
            return None
        self.searches.append(plan.query)
        self._state = _SEARCH
        return SearchRequest(plan.query, plan.k)

    def _respond(self, result: str) -> None:
        call = self._context.calls[-1]
        action = {
            "role": "assistant",
            "content": call.assistant_prefix + self._context.outputs[-1].text,
        }
        body = tool_response_body(self._pending_tool, result)
        messages = (*call.messages, action, prompts.tool_response_message(body))
        self._context.calls.append(ModelCall(messages, ""))
        self._state = _MEMORY

    def _observe_memory(self, output: ModelOutput) -> None:
        self._context.outputs.append(output)
        if not output.eos:
            self._finish("no_eos")
            return
        memory = last_tag_content(output.text, "memory")
        if memory is None:
            self._finish("no_memory")
            return
        if self.count_tokens(memory) > self.settings.memory_cap_tokens:
            self._finish("memory_over_cap")
            return
        self.memory = memory
        self.memories.append(memory)
        if len(self.contexts) >= self.settings.max_turns:
            self._finish("turn_limit")
            return
        self._new_context()
