"""memjax.sampling: the on-device sampler (prefill + KV-cache decode) and its text API."""

from memjax.sampling.chat import ChatOutput, continue_chat, generate_chat
from memjax.sampling.sampler import (
    SampleOutput,
    SampleState,
    continue_,
    prepare_params,
    sample,
)
from memjax.sampling.sampling_params import SamplingParams

__all__ = [
    "SamplingParams",
    "SampleOutput",
    "SampleState",
    "sample",
    "continue_",
    "prepare_params",
    "generate_chat",
    "continue_chat",
    "ChatOutput",
]
