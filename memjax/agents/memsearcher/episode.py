"""One MemSearcher trajectory as a state machine over text.

Each turn is one context, rebuilt from (question, memory) and holding up to two calls:
  1. the action: `<think>...</think>` then `<tool_call>`s or a `\\boxed{}` answer;
  2. after the tool responses, the memory update `<memory>...</memory>`.
The completion is read as the authors' rollout reads it (memjax.agents.memsearcher.protocol):
every tool call of the action runs and their responses come back in one message; a response
with no tool call, or with unpaired `<tool_call>` tags, is the answer turn; the first
`<memory>` block is the new memory. The trajectory ends on an answer, a call that hit the token
limit (no EOS) or stopped on `<|im_start|>`, a memory update without `<memory>` or with an
empty one, a memory over the cap (not truncated: the trajectory ends, as in the paper's code),
or after `max_turns` contexts.

memjax's own choice: a call the search tool cannot run (bad JSON, unknown function, no query)
is answered with an error line in its `<tool_response>` and the turn goes on, where the authors'
client sends whatever arguments it finds to the search server (any function name; the server
answers an error). The turn structure is the same; only the error text differs. Evaluation
episodes follow the same rules as training ones, where the authors' inference script
(memsearcher/inference/memsearcher.py) goes on after an empty memory and has no
`<|im_start|>` stop: one reading of a completion for both, so a trained policy is scored by
the rules it was trained under.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from memjax.agents.episode import (
    ContextRecord,
    EpisodeResult,
    ModelCall,
    ModelOutput,
    SearchRequest,
)
from memjax.agents.memsearcher import prompts
from memjax.agents.memsearcher.protocol import (
    IM_START,
    boxed_answer,
    first_memory,
    stopped_on_im_start,
    tool_calls,
)
from memjax.agents.memsearcher.reward import reward
from memjax.agents.retrieval import Passage
from memjax.agents.search_tool import (
    SearchSettings,
    error_result,
    format_results,
    plan_search,
)
from memjax.text.prompt_templates import PromptTemplate

TRAIN_MAX_TURNS = 5
EVAL_MAX_TURNS = 20


@dataclass(frozen=True)
class MemSearcherSettings:
    max_turns: int = TRAIN_MAX_TURNS  # EVAL_MAX_TURNS at evaluation
    memory_cap_tokens: int = 1024
    think_prefix: str = prompts.THINK_PREFIX
    search: SearchSettings = field(default_factory=SearchSettings)
    stop: tuple[str, ...] = (IM_START,)  # besides EOS, as the authors' sampler
    # Prompt templates by name (memsearcher_system, memsearcher_user,
    # memsearcher_tool_response); absent: memjax's own (memjax.agents.memsearcher.prompts).
    templates: Mapping[str, PromptTemplate] = field(default_factory=dict)


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
        self.stopped_in = ""  # "action" or "memory": the call that ended the episode
        self._state = _ACT
        self._calls = []  # the action's tool calls (ParsedToolCall), run one after another
        self._results: list[str] = []  # their results so far
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

    def receive(self, passages: list[Passage]) -> SearchRequest | None:
        """Takes the pending search's passages; returns the action's next search, if any."""
        if self._state != _SEARCH:
            raise RuntimeError(f"receive() in state {self._state!r}")
        self._results.append(format_results(passages, self.settings.search))
        return self._next_search()

    def result(self, golden_answers: Sequence[str]) -> EpisodeResult:
        if not self.done:
            raise RuntimeError("result() before the episode ended")
        final = self.contexts[-1]
        outcome = reward(final.assistant_messages(), final.outputs[-1].eos, golden_answers)
        answer = None
        if self.stop_reason == "answer":
            answer = boxed_answer(final.assistant_messages()[-1])
        return EpisodeResult(
            question=self.question,
            answer=answer,
            reward=outcome.reward,
            stop_reason=self.stop_reason,
            contexts=list(self.contexts),
            turn_contexts=list(self.contexts),
            format_valid=outcome.format.valid,
            searches=list(self.searches),
            stopped_in=self.stopped_in,
        )

    # -- transitions ----------------------------------------------------------------------

    @property
    def _context(self) -> ContextRecord:
        return self.contexts[-1]

    def _new_context(self) -> None:
        messages = prompts.context_messages(self.question, self.memory, self.settings.templates)
        call = ModelCall(messages, self.settings.think_prefix, self.settings.stop)
        self.contexts.append(ContextRecord([call]))
        self._state = _ACT

    def _finish(self, reason: str) -> None:
        self.stop_reason = reason
        self.stopped_in = {_ACT: "action", _MEMORY: "memory"}.get(self._state, "")
        self._state = _DONE

    def _record(self, output: ModelOutput) -> bool:
        """Keeps the output; False when the call ended the trajectory (no EOS, or the
        `<|im_start|>` stop, which counts as no EOS for the reward)."""
        if stopped_on_im_start(output.text):
            self._context.outputs.append(ModelOutput(output.text, False, output.token_ids))
            self._finish("im_start_stop")
            return False
        self._context.outputs.append(output)
        if not output.eos:
            self._finish("no_eos")
            return False
        return True

    def _observe_action(self, output: ModelOutput) -> SearchRequest | None:
        if not self._record(output):
            return None
        self._calls = tool_calls(output.text)
        if not self._calls:
            self._finish("answer")
            return None
        self._results = []
        return self._next_search()

    def _next_search(self) -> SearchRequest | None:
        """The next runnable call's search; a call that cannot run gets an error result (the
        format check gives the trajectory 0 if this is its final context)."""
        while len(self._results) < len(self._calls):
            plan = plan_search(self._calls[len(self._results)], self.settings.search)
            if plan.query is None:
                self._results.append(error_result(plan.error))
                continue
            self.searches.append(plan.query)
            self._state = _SEARCH
            return SearchRequest(plan.query, plan.k)
        self._respond()
        return None

    def _respond(self) -> None:
        call = self._context.calls[-1]
        action = {
            "role": "assistant",
            "content": call.assistant_prefix + self._context.outputs[-1].text,
        }
        responses = [(c.raw, r) for c, r in zip(self._calls, self._results)]
        reply = prompts.tool_response_message(responses, self.settings.templates)
        messages = (*call.messages, action, reply)
        self._context.calls.append(ModelCall(messages, "", self.settings.stop))
        self._state = _MEMORY

    def _observe_memory(self, output: ModelOutput) -> None:
        if not self._record(output):
            return
        memory = first_memory(output.text)
        if memory is None:
            self._finish("no_memory")
            return
        if not memory:  # the authors' rollout keeps a trajectory only on a non-empty memory
            self._finish("empty_memory")
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
