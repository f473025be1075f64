"""From an episode's `ModelCall` to memjax's sampler and back.

    policy = SamplerPolicy(model.params, model.cfg, model.tokenizer, SamplingParams(...))
    outputs = policy([episode.current_call() for episode in live], rng)   # list[ModelOutput]

- The prompt is the chat template of the call's messages (with the assistant header) plus the
  call's `assistant_prefix` ("<think>" for MemSearcher, all of the growing turn for Search-R1).
- Stop strings are the call's own (Search-R1's `</search>`, `</answer>`) plus any the agent's
  config adds; EOS ids are the tokenizer's end-of-turn ids.
- A completion that ended on an EOS id or a stop string is `eos=True` (the turn ended as the
  format intends); one that hit the token limit is `eos=False`, which MemSearcher's reward scores
  0. Text is decoded with special tokens kept and without the EOS, so it round-trips into the
  chat template; the sampled ids (EOS included) and their log-probs are kept for training.

`make_rollout_generate` is the same adapter in the RL trainer's shape: token-id prompts in,
`memjax.rl.rollout.Completion`s out, the parameters read from `generate.params` at call time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import numpy as np

from memjax.agents.episode import ModelCall, ModelOutput
from memjax.sampling.sampler import prepare_params, sample
from memjax.sampling.sampling_params import SamplingParams, run_options
from memjax.sampling.weights import WeightCopies

EOS, STOP_STRING, MAX_TOKENS = "eos", "stop_string", "max_tokens"  # the sampler's stop reasons


def prompt_text(call: ModelCall, tokenizer) -> str:
    return tokenizer.chat_text(list(call.messages)) + call.assistant_prefix


def prompt_ids(call: ModelCall, tokenizer) -> list[int]:
    return tokenizer.encode(prompt_text(call, tokenizer))


@dataclass(frozen=True)
class Sampled:
    """One completion as the sampler gave it."""

    tokens: tuple[int, ...]  # the sampled ids, a final EOS or stop string included
    logprobs: tuple[float, ...]  # at the sampling temperature, one per token
    stop_reason: str  # EOS, STOP_STRING or MAX_TOKENS


def completion_text(tokens: Sequence[int], eos_ids: Sequence[int], tokenizer) -> str:
    """The completion's text as it goes back into the conversation: a final EOS dropped (the
    chat template writes the end of turn itself), other special tokens kept."""
    body = list(tokens)
    if body and body[-1] in set(eos_ids):
        body = body[:-1]
    return tokenizer.decode(body, skip_special_tokens=False)


def to_model_output(sampled: Sampled, eos_ids: Sequence[int], tokenizer) -> ModelOutput:
    return ModelOutput(
        text=completion_text(sampled.tokens, eos_ids, tokenizer),
        eos=sampled.stop_reason in (EOS, STOP_STRING),
        token_ids=tuple(sampled.tokens),
    )


def _rows(out) -> list[Sampled]:
    tokens, logprobs = np.asarray(out.tokens), np.asarray(out.logprobs)
    return [
        Sampled(
            tuple(int(t) for t in tokens[i, :n]),
            tuple(float(x) for x in logprobs[i, :n]),
            str(out.stop_reason[i]),
        )
        for i, n in enumerate(np.asarray(out.lengths))
    ]


class SamplerPolicy:
    """A batched policy over model calls, backed by memjax's sampler.

    Calls are grouped by their stop strings (one sampler call per distinct set, since the stop
    set is a property of the whole batch); every output keeps its sampled ids and log-probs
    in `self.last_sampled`, aligned with the calls of the last `__call__`.
    """

    def __init__(
        self,
        params,
        cfg,
        tokenizer,
        sampling: SamplingParams,
        *,
        extra_stop: Sequence[str] = (),
        max_prompt_tokens: int | None = None,
    ):
        # Once: per-layer weights for CPU decoding, and the weight dtype's copy when first used.
        self.weights = WeightCopies(prepare_params(params, cfg))
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.eos_ids = tuple(tokenizer.eos_ids)
        self.extra_stop = tuple(extra_stop)
        self.max_prompt_tokens = max_prompt_tokens
        self.last_sampled: list[Sampled | None] = []
        self.overflows = 0  # calls refused because the prompt was over max_prompt_tokens

    def stops(self, call: ModelCall) -> tuple[str, ...]:
        return tuple(dict.fromkeys(call.stop + self.extra_stop))

    def __call__(self, calls: Sequence[ModelCall], rng: jax.Array) -> list[ModelOutput]:
        prompts = [prompt_ids(call, self.tokenizer) for call in calls]
        outputs: list[ModelOutput | None] = [None] * len(calls)
        self.last_sampled = [None] * len(calls)
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, (call, prompt) in enumerate(zip(calls, prompts)):
            if self.max_prompt_tokens is not None and len(prompt) > self.max_prompt_tokens:
                # A context over the budget cannot be sampled: the call ends without EOS, which
                # every agent treats as a failed turn (no crash, and it is counted).
                self.overflows += 1
                outputs[i] = ModelOutput("", False, ())
                continue
            groups.setdefault(self.stops(call), []).append(i)
        for g, (stop, rows) in enumerate(groups.items()):
            out = sample(
                self.weights.for_call(self.sampling, len(rows)),
                self.cfg,
                [prompts[i] for i in rows],
                self.sampling,
                jax.random.fold_in(rng, g),
                eos_ids=self.eos_ids,
                stop_strings=stop,
                tokenizer=self.tokenizer if stop else None,
                pad_id=self.tokenizer.pad_id,
            )
            for i, sampled in zip(rows, _rows(out)):
                self.last_sampled[i] = sampled
                outputs[i] = to_model_output(sampled, self.eos_ids, self.tokenizer)
        return outputs


def make_rollout_generate(
    cfg, tokenizer, sampling: SamplingParams, stop: Sequence[str] = (), mesh=None
) -> Callable:
    """The rollout loop's `generate(prompts, rng) -> list[Completion]` over the model's
    tokenizer, with the agent's stop strings (`memjax.rl.roles.make_generate`). Set
    `generate.params` before calling; the trainer does so with the current policy before every
    rollout."""
    from memjax.rl.roles import make_generate

    return make_generate(
        cfg,
        sampling,
        tokenizer.eos_ids,
        tokenizer.pad_id,
        mesh,
        stop_strings=stop,
        tokenizer=tokenizer,
    )


def sampling_params(section, *, greedy: bool | None = None) -> SamplingParams:
    """SamplingParams from a config section with temperature / top_p / top_k /
    max_tokens_per_call (and optionally the sampler's run options: weight_dtype, compaction,
    context_overflow); temperature 0 means greedy, as in the papers' eval scripts."""
    temperature = float(section.get("temperature", 1.0))
    greedy = temperature == 0.0 if greedy is None else greedy
    return SamplingParams(
        temperature=temperature if temperature > 0 else 1.0,
        top_k=int(section.get("top_k", 0)),
        top_p=float(section.get("top_p", 1.0)),
        max_new_tokens=int(section["max_tokens_per_call"]),
        greedy=greedy,
        **run_options(section),
    )
