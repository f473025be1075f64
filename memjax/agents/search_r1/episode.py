"""One Search-R1 trajectory: a single assistant turn that grows with every search.

Each call continues the same assistant turn (`assistant_prefix` holds all that was written and
retrieved so far). A search appends `<information>` and goes on; an answer ends the episode; a
completion with neither gets the invalid-action note, unless it ended with EOS (the model closed
its turn without answering, which ends the episode). `max_turns` calls at most.

Observations (retrieved passages, the invalid-action note) are cut to their first
`max_observation_tokens` tokens when that is set, as Search-R1's `_process_next_obs` cuts
`next_obs_ids` to `max_obs_length` (PeterGriffinJin/Search-R1 @ a14dc3a,
search_r1/llm_agent/generation.py); the cut is the longest prefix of the text that the
episode's `count_tokens` counts within the cap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memjax.agents.episode import (
    ContextRecord,
    EpisodeResult,
    ModelCall,
    ModelOutput,
    SearchRequest,
)
from memjax.agents.retrieval import Passage
from memjax.agents.search_r1 import format as fmt
from memjax.text.prompt_templates import PromptTemplate


@dataclass(frozen=True)
class SearchR1Settings:
    # Model calls at most. Search-R1's own `max_turns` counts search rounds and then makes one
    # final call, so its max_turns=4 is 5 here (see search_r1_settings).
    max_turns: int = 5
    top_k: int = 3  # Search-R1's retriever returns 3 passages
    max_observation_tokens: int = 0  # 0: observations are not cut
    instruction: PromptTemplate | None = None  # None: INSTRUCTION_TEMPLATE


# Search-R1's instruction as a template (memjax.text.prompt_templates), memjax's wording
# by default; `config.prompts.search_r1_instruction` replaces it.
INSTRUCTION_TEMPLATE = PromptTemplate(
    "search_r1_instruction",
    ("question",),
    fmt.PROMPT_TEMPLATE.replace("{question}", "{{question}}"),
)


def search_r1_settings(section, instruction: PromptTemplate | None = None) -> SearchR1Settings:
    """The episode settings of a config's `search_r1` section (Search-R1's own names)."""
    return SearchR1Settings(
        max_turns=int(section.max_turns) + 1,
        top_k=int(section.top_k),
        max_observation_tokens=int(section.max_observation_tokens),
        instruction=instruction,
    )


def cut_to_tokens(text: str, limit: int, count_tokens: Callable[[str], int]) -> str:
    """The longest prefix of `text` with at most `limit` tokens (bisection over characters)."""
    if count_tokens(text) <= limit:
        return text
    lo, hi = 0, len(text)  # count(text[:lo]) <= limit < count(text[:hi])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count_tokens(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid
    return text[:lo]


class SearchR1Episode:
    def __init__(
        self,
        question: str,
        settings: SearchR1Settings = SearchR1Settings(),
        count_tokens: Callable[[str], int] | None = None,
    ):
        if settings.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {settings.max_turns}")
        if settings.max_observation_tokens and count_tokens is None:
            raise ValueError("max_observation_tokens is set but no count_tokens was given")
        self.question = question
        self.settings = settings
        self.count_tokens = count_tokens
        instruction = settings.instruction or INSTRUCTION_TEMPLATE
        self.messages = (
            {"role": "user", "content": instruction.render(question=question.strip())},
        )
        self.context = ContextRecord([ModelCall(self.messages, "", fmt.STOP)])
        self.searches: list[str] = []
        self.stop_reason = ""
        self._pending = False
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    def current_call(self) -> ModelCall:
        if self._done or self._pending:
            raise RuntimeError("no model call pending")
        return self.context.calls[-1]

    def _written(self) -> str:
        """The assistant turn so far, including the last completion."""
        return self.context.calls[len(self.context.outputs) - 1].assistant_prefix + (
            self.context.outputs[-1].text
        )

    def _finish(self, reason: str) -> None:
        self.stop_reason = reason
        self._done = True

    def _continue(self, appended: str) -> None:
        if self.settings.max_observation_tokens:
            appended = cut_to_tokens(
                appended, self.settings.max_observation_tokens, self.count_tokens
            )
        if len(self.context.calls) >= self.settings.max_turns:
            self._finish("turn_limit")
            return
        self.context.calls.append(ModelCall(self.messages, self._written() + appended, fmt.STOP))

    def observe(self, output: ModelOutput) -> SearchRequest | None:
        if self._done or self._pending:
            raise RuntimeError("observe() with no model call pending")
        action = fmt.parse_action(output.text)
        if action.kind == "answer":
            self.context.outputs.append(output)
            self._finish("answer")
            return None
        if action.kind == "search":
            # Cut after </search>: the turn continues with <information>, not with EOS.
            ids = output.token_ids if action.text == output.text else None
            self.context.outputs.append(ModelOutput(action.text, False, ids))
            if len(self.context.calls) >= self.settings.max_turns:
                self._finish("turn_limit")
                return None
            self.searches.append(action.content)
            self._pending = True
            return SearchRequest(action.content, self.settings.top_k)
        self.context.outputs.append(output)
        if output.eos:
            self._finish("no_answer")
            return None
        self._continue(fmt.INVALID_ACTION)
        return None

    def receive(self, passages: list[Passage]) -> None:
        if not self._pending:
            raise RuntimeError("receive() with no search pending")
        self._pending = False
        self._continue(fmt.format_information(passages))

    def result(self, golden_answers: Sequence[str]) -> EpisodeResult:
        if not self._done:
            raise RuntimeError("result() before the episode ended")
        # Scored after memjax's own instruction (one <answer> example, which `extract_answer`
        # counts), so a replaced instruction template changes the prompt and not the score.
        full_text = fmt.prompt(self.question) + self._written()
        answer = fmt.extract_answer(full_text)
        return EpisodeResult(
            question=self.question,
            answer=answer,
            reward=fmt.reward(full_text, golden_answers),
            stop_reason=self.stop_reason,
            contexts=[self.context],
            turn_contexts=self.context.growing_turns(),
            format_valid=answer is not None,
            searches=list(self.searches),
        )
