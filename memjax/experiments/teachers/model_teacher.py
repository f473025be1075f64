"""A model as teacher: any decoder memjax loads, sampled through memjax's sampler.

    model = load_model("/models/Qwen2.5-7B-Instruct")       # or 'packaged:smollm2', a .gguf
    sampler = teacher_sampler(model, TeacherSampling(temperature=0.7, max_new_tokens=256))
    chat = ChatTeacher(sampler)          # Memory-R1 roles: chat messages -> completion texts
    calls = BatchTeacher(sampler)        # search agents: ModelCalls -> ModelOutputs

Its trajectories go through the same replay and rejection step as the scripted oracles'.
Calls are sent `batch_size` at a time (a teacher's batch is bounded by its memory, not by the
data), and each call draws a fresh key, so a second attempt samples differently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax

from memjax.agents.episode import ModelCall, ModelOutput
from memjax.agents.sampler_adapter import SamplerPolicy
from memjax.sampling.sampling_params import SamplingParams


@dataclasses.dataclass(frozen=True)
class TeacherSampling:
    temperature: float = 0.7  # 0: greedy
    top_p: float = 1.0
    max_new_tokens: int = 256
    batch_size: int = 8
    max_prompt_tokens: int = 8192  # a longer prompt is refused (a failed call), not truncated
    seed: int = 0


def teacher_sampler(model, sampling: TeacherSampling) -> SamplerPolicy:
    params = SamplingParams(
        temperature=sampling.temperature if sampling.temperature > 0 else 1.0,
        top_p=sampling.top_p,
        max_new_tokens=sampling.max_new_tokens,
        greedy=sampling.temperature == 0,
    )
    return SamplerPolicy(
        model.params,
        model.cfg,
        model.tokenizer,
        params,
        max_prompt_tokens=sampling.max_prompt_tokens - sampling.max_new_tokens,
    )


class BatchTeacher:
    """`(calls, rng) -> outputs` in chunks of `batch_size`."""

    def __init__(self, sampler: SamplerPolicy, batch_size: int = 8):
        if batch_size < 1:
            raise ValueError(f"teacher batch_size must be >= 1, got {batch_size}")
        self.sampler = sampler
        self.batch_size = batch_size

    def __call__(self, calls: Sequence[ModelCall], rng: jax.Array) -> list[ModelOutput]:
        out: list[ModelOutput] = []
        for i, start in enumerate(range(0, len(calls), self.batch_size)):
            chunk = list(calls[start : start + self.batch_size])
            out.extend(self.sampler(chunk, jax.random.fold_in(rng, i)))
        return out


class ChatTeacher:
    """A ChatPolicy (Memory-R1's pipelines) over the sampler; a completion that hit the token
    limit comes back as the text it got to (the parser then rejects it)."""

    def __init__(self, sampler: SamplerPolicy, batch_size: int = 8, seed: int = 0):
        self.batch = BatchTeacher(sampler, batch_size)
        self.key = jax.random.key(seed)
        self.calls = 0

    def __call__(self, batch: Sequence[Sequence[dict]]) -> list[str]:
        self.calls += 1
        rng = jax.random.fold_in(self.key, self.calls)
        outputs = self.batch([ModelCall(tuple(m)) for m in batch], rng)
        return [o.text for o in outputs]
