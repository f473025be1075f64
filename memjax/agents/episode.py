"""What every agent episode exchanges with the rollout driver.

An episode is a pure state machine over text. The driver asks it for the current `ModelCall`
(chat messages plus the start of the assistant turn), samples a completion, and hands the text
back with `observe`. If the model called the search tool, `observe` returns a `SearchRequest`;
the driver batches the requests of many episodes into one `Retriever.search` and gives each
episode its passages with `receive`. `advance` does that round for a batch of episodes.

Every context an episode builds is kept as a `ContextRecord` (its calls and the model's outputs)
so the trainer can render token ids and loss masks (`memjax.agents.transcript`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memjax.agents.retrieval import Passage, Retriever


@dataclass(frozen=True)
class ModelCall:
    """One generation request. The prompt is `render(messages) + assistant_prefix`: the model
    continues an assistant turn that already starts with `assistant_prefix` ("<think>" for
    MemSearcher, everything written so far for Search-R1's single growing turn)."""

    messages: tuple[dict, ...]
    assistant_prefix: str = ""
    stop: tuple[str, ...] = ()  # stop strings besides EOS (Search-R1 stops after </search>)


@dataclass(frozen=True)
class ModelOutput:
    text: str  # the completion, without the EOS token's text
    eos: bool  # it ended with EOS (or a stop string), not at the token limit
    token_ids: tuple[int, ...] | None = None  # sampled ids incl. EOS, when the driver has them


@dataclass
class ContextRecord:
    """One context (one training sample in multi-context GRPO): its calls and the outputs."""

    calls: list[ModelCall] = field(default_factory=list)
    outputs: list[ModelOutput] = field(default_factory=list)

    def final_messages(self) -> list[dict]:
        """The conversation as it stands after the last output (for rewards and accounting)."""
        if not self.outputs:
            return list(self.calls[-1].messages) if self.calls else []
        last_call, last_out = self.calls[len(self.outputs) - 1], self.outputs[-1]
        return [
            *last_call.messages,
            {"role": "assistant", "content": last_call.assistant_prefix + last_out.text},
        ]

    def assistant_messages(self) -> list[str]:
        return [m["content"] for m in self.final_messages() if m["role"] == "assistant"]

    def through_turn(self, n: int) -> ContextRecord:
        """A growing context as it stood after its n-th completion and the environment's reply
        to it (the next call's prompt, when there is one)."""
        return ContextRecord(list(self.calls[: n + 1]), list(self.outputs[:n]))

    def growing_turns(self) -> list[ContextRecord]:
        return [self.through_turn(n) for n in range(1, len(self.outputs) + 1)]


@dataclass(frozen=True)
class SearchRequest:
    query: str
    k: int


@dataclass
class EpisodeResult:
    question: str
    answer: str | None  # the parsed final answer; None when there is none
    reward: float
    stop_reason: str  # "answer", "no_eos", "no_memory", "memory_over_cap", "turn_limit", ...
    contexts: list[ContextRecord]  # every training sample of the trajectory, in order
    turn_contexts: list[ContextRecord]  # the context as it stood at the end of each turn
    format_valid: bool = True
    searches: list[str] = field(default_factory=list)
    # The kind of model call whose output ended the episode, where an agent has several
    # (MemSearcher: "action" or "memory"); "" for agents with one kind.
    stopped_in: str = ""


class Episode(Protocol):
    @property
    def done(self) -> bool: ...

    def current_call(self) -> ModelCall:
        """The next generation request; only valid while not `done` and no search is pending."""
        ...

    def observe(self, output: ModelOutput) -> SearchRequest | None:
        """Takes the model's completion for `current_call()`; returns a search to run, if any."""
        ...

    def receive(self, passages: list[Passage]) -> SearchRequest | None:
        """Takes the passages for the pending `SearchRequest`; returns a further search to run
        before the next model call (MemSearcher runs every tool call of a response), if any."""
        ...

    def result(self, golden_answers: Sequence[str]) -> EpisodeResult: ...


def advance(
    episodes: Sequence[Episode], outputs: Sequence[ModelOutput | None], retriever: Retriever
) -> None:
    """Feeds each live episode its output, then answers all searches with one batched call per
    distinct k. `outputs[i]` is ignored (may be None) for episodes that are already done."""
    if len(episodes) != len(outputs):
        raise ValueError(f"{len(episodes)} episodes but {len(outputs)} outputs")
    requests: list[tuple[Episode, SearchRequest]] = []
    for episode, output in zip(episodes, outputs):
        if episode.done:
            continue
        if output is None:
            raise ValueError("a live episode got no output")
        request = episode.observe(output)
        if request is not None:
            requests.append((episode, request))
    while requests:  # an episode may ask for further searches before its next call
        pending: dict[int, list[tuple[Episode, str]]] = {}
        for episode, request in requests:
            pending.setdefault(request.k, []).append((episode, request.query))
        requests = []
        for k, items in pending.items():
            results = retriever.search([query for _, query in items], k)
            if len(results) != len(items):
                raise ValueError(f"retriever returned {len(results)} result lists for {len(items)}")
            for (episode, _), passages in zip(items, results):
                request = episode.receive(passages)
                if request is not None:
                    requests.append((episode, request))


Policy = Callable[[ModelCall], ModelOutput]


def run_episodes(
    episodes: Sequence[Episode], policy: Policy, retriever: Retriever, max_calls: int = 1000
) -> None:
    """Drives episodes to the end with a per-call policy (scripted policies, simple evals).
    A batched sampler would instead collect `current_call()` of all live episodes per step."""
    for _ in range(max_calls):
        live = [e for e in episodes if not e.done]
        if not live:
            return
        advance(live, [policy(e.current_call()) for e in live], retriever)
    raise RuntimeError(f"episodes still running after {max_calls} calls")
