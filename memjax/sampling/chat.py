"""The text API for agents: chat messages in, completion strings out, batched.

out = generate_chat(model, None, [[{"role": "user", "content": "Hi"}], ...],
                    SamplingParams(max_new_tokens=128), rng, stop_strings=("</tool_call>",))
out.texts          # one string per row, cut right after a stop string when one occurs
out.output         # the token-level SampleOutput (tokens, logprobs, lengths, state)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from memjax.sampling.sampler import SampleOutput, SamplingParams, continue_, sample


@dataclasses.dataclass
class ChatOutput:
    texts: list[str]
    output: SampleOutput


def completion_texts(output: SampleOutput, tokenizer, stop_strings: Sequence[str] = ()):
    """Each row's completion as text (special tokens dropped), cut right after the first stop
    string when the row stopped on one."""
    texts = []
    for row, reason in zip(output.completions(), output.stop_reason):
        text = tokenizer.decode(row, skip_special_tokens=True)
        if reason == "stop_string":
            ends = [text.find(s) + len(s) for s in stop_strings if s in text]
            if ends:
                text = text[: min(ends)]
        texts.append(text)
    return texts


def _model_parts(model_or_params, tokenizer, cfg):
    """Accepts a LoadedModel (params, cfg, tokenizer) or bare params with cfg= and tokenizer."""
    if hasattr(model_or_params, "params") and hasattr(model_or_params, "cfg"):
        params, cfg = model_or_params.params, cfg or model_or_params.cfg
        tokenizer = tokenizer or model_or_params.tokenizer
    else:
        params = model_or_params
    if cfg is None or tokenizer is None:
        raise ValueError("generate_chat needs a LoadedModel, or params with cfg= and a tokenizer")
    return params, cfg, tokenizer


def generate_chat(
    model_or_params,
    tokenizer,
    conversations: Sequence[Sequence[dict]],
    sampling: SamplingParams,
    rng,
    *,
    cfg=None,
    stop_strings: Sequence[str] = (),
    group_size: int = 1,
    eos_ids: Sequence[int] | None = None,
    mesh=None,
    rules=None,
    chat_kwargs: dict | None = None,
) -> ChatOutput:
    """Renders each conversation with the tokenizer's chat template (adding the assistant
    prompt), samples `group_size` completions per conversation, and returns their texts."""
    params, cfg, tokenizer = _model_parts(model_or_params, tokenizer, cfg)
    prompts = [tokenizer.chat(list(c), **(chat_kwargs or {})) for c in conversations]
    output = sample(
        params,
        cfg,
        prompts,
        sampling,
        rng,
        eos_ids=tokenizer.eos_ids if eos_ids is None else eos_ids,
        stop_strings=tuple(stop_strings),
        tokenizer=tokenizer,
        group_size=group_size,
        pad_id=tokenizer.pad_id,
        mesh=mesh,
        rules=rules,
    )
    return ChatOutput(completion_texts(output, tokenizer, stop_strings), output)


def continue_chat(
    output: SampleOutput, texts: Sequence[str], sampling: SamplingParams, rng
) -> ChatOutput:
    """Appends raw text (already in chat-template form, e.g. a tool turn and the assistant
    header) to each row's live context and samples on."""
    state = output.state
    tokenizer = state.tokenizer
    chunks = [tokenizer.encode(t) for t in texts]
    new = continue_(state, chunks, sampling, rng)
    return ChatOutput(completion_texts(new, tokenizer, state.stop_strings), new)
