"""Any text episode (MemSearcher, Search-R1, ReAct) as an RL environment of token ids.

`memjax.rl.rollout.run_episodes` samples each live episode's context, then calls `step` with the
completion; this adapter decodes it, plays it into the episode (running a search when the
episode asks for one), and tells the rollout loop what comes next:

- the episode ended: `done`, with the episode's outcome reward (MemSearcher: format + F1,
  computed on the final context; Search-R1: exact match);
- the next call's prompt extends the context so far (a tool response and the memory-update
  request in MemSearcher's second call; `<information>` in Search-R1): `observation`, the
  appended tokens, never trained on;
- otherwise (MemSearcher rebuilt its context from question + memory): `next_context`, so the
  finished context becomes its own training row, and the trajectory's advantage reaches it
  through multi-context GRPO.

"Extends" is checked on text: the context so far is the previous prompt plus the decoded
completion (EOS included when it was sampled), exactly what the rollout loop holds as tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from memjax.agents.episode import Episode, ModelOutput
from memjax.agents.retrieval import Retriever
from memjax.agents.sampler_adapter import EOS, STOP_STRING, prompt_text
from memjax.agents.transcript import chat_format
from memjax.rl.environment import Environment, StepResult

# example (a QA row dict: "question", "golden_answers", ...) -> a fresh episode
EpisodeFactory = Callable[[dict], Episode]


@dataclass
class EpisodeState:
    episode: Episode
    golden_answers: tuple[str, ...]
    context_text: str  # the current context as text, up to the pending call's prompt
    context_tokens: int  # its length in tokens, as the rollout loop holds it
    contexts: int = 1
    info: dict[str, float] = field(default_factory=dict)


class EpisodeEnv(Environment):
    """`max_calls` bounds the model calls of one episode (the rollout loop's `max_turns`); the
    episode's own turn limit should end it first. A context that grows past
    `max_context_tokens` (the packed row length less one completion) ends the episode with
    reward 0, counted as `context_overflow`, rather than being cut mid-row by the packer.

    Per-episode counts (searches, stop reasons, format validity) are returned once, with the
    final step, because the rollout loop sums `info` over steps."""

    def __init__(
        self,
        make_episode: EpisodeFactory,
        tokenizer,
        retriever: Retriever,
        *,
        max_calls: int,
        max_context_tokens: int | None = None,
    ):
        self.make_episode = make_episode
        self.tokenizer = tokenizer
        self.retriever = retriever
        self.max_turns = int(max_calls)
        self.max_context_tokens = max_context_tokens
        # The end-of-turn id the chat template writes after an assistant message.
        self.eos_id = chat_format(tokenizer).eos_id
        self.eos_text = tokenizer.decode([self.eos_id], skip_special_tokens=False)

    def reset(self, example: dict) -> tuple[EpisodeState, list[int]]:
        episode = self.make_episode(example)
        text = prompt_text(episode.current_call(), self.tokenizer)
        ids = self.tokenizer.encode(text)
        golds = tuple(str(a) for a in example["golden_answers"])
        return EpisodeState(episode, golds, text, len(ids)), ids

    def step(
        self, state: EpisodeState, completion: list[int], stop_reason: str
    ) -> tuple[EpisodeState, StepResult]:
        # The rollout loop strips a final EOS id from `completion` but keeps it in the context.
        text = self.tokenizer.decode(list(completion), skip_special_tokens=False)
        ended_eos = stop_reason == EOS
        ids = tuple(completion) + ((self.eos_id,) if ended_eos else ())
        episode = state.episode
        request = episode.observe(ModelOutput(text, stop_reason in (EOS, STOP_STRING), ids))
        while request is not None:  # every search the response asks for
            passages = self.retriever.search([request.query], request.k)[0]
            request = episode.receive(passages)
            state.info["searches"] = state.info.get("searches", 0.0) + 1
        if episode.done:
            return state, self._finish(state)
        so_far = state.context_text + text + (self.eos_text if ended_eos else "")
        new_prompt = prompt_text(episode.current_call(), self.tokenizer)
        if new_prompt.startswith(so_far):
            appended = self.tokenizer.encode(new_prompt[len(so_far) :])
            result = StepResult(done=False, observation=appended)
            state.context_tokens += len(ids) + len(appended)
        else:
            fresh = self.tokenizer.encode(new_prompt)
            result = StepResult(done=False, next_context=fresh)
            state.contexts += 1
            state.context_tokens = len(fresh)
        state.context_text = new_prompt
        if self.max_context_tokens is not None and state.context_tokens > self.max_context_tokens:
            state.info["context_overflow"] = 1.0
            return state, StepResult(done=True, reward=0.0, info=self._info(state))
        return state, result

    def _finish(self, state: EpisodeState) -> StepResult:
        outcome = state.episode.result(state.golden_answers)
        state.info[f"stop/{outcome.stop_reason}"] = 1.0
        state.info["format_valid"] = float(outcome.format_valid)
        state.info["answered"] = float(outcome.answer is not None)
        return StepResult(done=True, reward=float(outcome.reward), info=self._info(state))

    def _info(self, state: EpisodeState) -> dict[str, float]:
        return {**state.info, "episode_contexts": float(state.contexts)}
