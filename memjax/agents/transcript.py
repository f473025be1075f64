"""A context as the model saw it: prompt, model-written and environment-written segments, and
from them token ids with the loss mask (1 on the model's own tokens, 0 on the prompt, tool
responses and retrieved passages).

A context may hold several calls (MemSearcher: the action, then the memory update after the
tool response). Each later call's prompt must extend the previous prompt plus the previous
completion; the text between is what the environment wrote (chat-template tokens included).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memjax.agents.episode import ContextRecord

PROMPT, MODEL, ENV = "prompt", "model", "env"


class TemplateMismatchError(ValueError):
    """A later call's prompt does not extend the earlier one, so masks would be misaligned."""


@dataclass(frozen=True)
class ChatFormat:
    render: Callable[[Sequence[dict]], str]  # messages -> text ending in the assistant header
    encode: Callable[[str], list[int]]
    eos_text: str  # the end-of-turn token as text ("<|im_end|>")
    eos_id: int


def chat_format(tokenizer) -> ChatFormat:
    """The ChatFormat of a `memjax.checkpoints.tokenizer.Tokenizer`; the EOS that closes an
    assistant turn is read off the chat template itself."""
    probe = tokenizer.chat_text(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "PROBE"}],
        add_generation_prompt=False,
    )
    after = probe.split("PROBE", 1)[1]
    for eos_id in tokenizer.eos_ids:
        text = tokenizer.hf.convert_ids_to_tokens(eos_id)
        if text and after.startswith(text):
            return ChatFormat(
                render=lambda messages: tokenizer.chat_text(list(messages)),
                encode=tokenizer.encode,
                eos_text=text,
                eos_id=eos_id,
            )
    raise ValueError(f"no EOS token of {tokenizer.source} closes an assistant turn: {after!r}")


@dataclass(frozen=True)
class Segment:
    kind: str  # PROMPT, MODEL or ENV
    text: str
    token_ids: tuple[int, ...] | None = None  # the sampled ids, for MODEL segments that have them


def segments(record: ContextRecord, fmt: ChatFormat) -> list[Segment]:
    """The context's text in order: the first prompt, then model and environment segments. A
    trailing call without output contributes its prompt (the environment's last response)."""
    out: list[Segment] = []
    so_far = ""
    outputs = list(record.outputs) + [None] * (len(record.calls) - len(record.outputs))
    for i, (call, output) in enumerate(zip(record.calls, outputs)):
        prompt = fmt.render(call.messages) + call.assistant_prefix
        if not prompt.startswith(so_far):
            raise TemplateMismatchError(
                f"call {i}'s prompt does not extend the context so far; "
                f"expected it to start with ...{so_far[-80:]!r}, got ...{prompt[len(so_far) - 80 : len(so_far) + 20]!r}"
            )
        out.append(Segment(PROMPT if i == 0 else ENV, prompt[len(so_far) :]))
        if output is None:  # a call not yet answered: its prompt ends the context
            break
        written = output.text + (fmt.eos_text if output.eos else "")
        out.append(Segment(MODEL, written, output.token_ids))
        so_far = prompt + written
    return out


def context_text(record: ContextRecord, fmt: ChatFormat) -> str:
    return "".join(s.text for s in segments(record, fmt))


def tokens_and_mask(record: ContextRecord, fmt: ChatFormat) -> tuple[list[int], list[int]]:
    """Token ids of the whole context and the loss mask (1 = the model wrote this token).

    Model segments use the sampled ids when the driver kept them, so the trainer scores exactly
    what was sampled; otherwise the text is re-encoded and EOS appended.
    """
    ids: list[int] = []
    mask: list[int] = []
    for seg in segments(record, fmt):
        if seg.kind == MODEL:
            if seg.token_ids is not None:
                seg_ids = list(seg.token_ids)
            else:
                has_eos = seg.text.endswith(fmt.eos_text) and fmt.eos_text
                body = seg.text[: -len(fmt.eos_text)] if has_eos else seg.text
                seg_ids = fmt.encode(body) + ([fmt.eos_id] if has_eos else [])
        else:
            seg_ids = fmt.encode(seg.text)
        ids.extend(seg_ids)
        mask.extend([1 if seg.kind == MODEL else 0] * len(seg_ids))
    return ids, mask


def prompt_length(record: ContextRecord, fmt: ChatFormat) -> int:
    """Tokens before the first model-written token (the trainer's prompt/response split)."""
    first = segments(record, fmt)[0]
    return len(fmt.encode(first.text))


def count_tokens(record: ContextRecord, fmt: ChatFormat) -> int:
    return len(tokens_and_mask(record, fmt)[0])


def turn_token_counts(turn_contexts: Sequence[ContextRecord], fmt: ChatFormat) -> list[int]:
    """Context tokens at the end of each turn (`EpisodeResult.turn_contexts`): MemSearcher's
    contexts after the memory update; a growing context after each tool response."""
    return [count_tokens(record, fmt) for record in turn_contexts]
