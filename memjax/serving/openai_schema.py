"""The request bodies the OpenAI-compatible server accepts (pydantic models FastAPI validates).

Fields are OpenAI's. A field memjax cannot honour is refused (an unknown field, a non-zero
penalty, `top_logprobs` above 0, `echo`) rather than ignored, so a client never gets output
produced under settings other than the ones it sent. A few fields follow vLLM's extensions:
`top_k`, `include_stop_str_in_output`, and for continuing an assistant turn
`add_generation_prompt` and `continue_final_message`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_STOP_STRINGS = 4


class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class SamplingFields(BaseModel):
    """What chat and text completions share."""

    model_config = ConfigDict(extra="forbid")
    model: str
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0)  # vLLM's extension; 0 disables it
    n: int = Field(1, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    stream: bool = False
    stream_options: dict | None = None
    user: str | None = None
    include_stop_str_in_output: bool = False  # vLLM's extension: the stop string kept
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0

    @field_validator("stop")
    @classmethod
    def _stop(cls, value):
        stops = [value] if isinstance(value, str) else list(value or [])
        if len(stops) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings")
        if any(not s for s in stops):
            raise ValueError("stop strings must be non-empty")
        return stops

    @field_validator("frequency_penalty", "presence_penalty")
    @classmethod
    def _no_penalty(cls, value):
        if value != 0.0:
            raise ValueError("penalties are not supported (only 0)")
        return value

    @field_validator("stream_options")
    @classmethod
    def _stream_options(cls, value):
        if value is not None and set(value) - {"include_usage"}:
            raise ValueError("stream_options takes only include_usage")
        return value

    def stop_strings(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.stop or ()))

    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False

    @field_validator("top_logprobs")
    @classmethod
    def _top_logprobs(cls, value):
        if value not in (None, 0):
            raise ValueError("only top_logprobs=0 is supported (the sampled tokens' log-probs)")
        return value

    @model_validator(mode="after")
    def _continuation(self):
        if self.continue_final_message and self.messages[-1].role != "assistant":
            raise ValueError("continue_final_message needs an assistant message last")
        return self

    def limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class CompletionRequest(SamplingFields):
    prompt: str | list[str]
    max_tokens: int = Field(16, ge=1)  # OpenAI's default for completions
    logprobs: int | None = None
    echo: bool = False
    suffix: str | None = None

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value):
        prompts = [value] if isinstance(value, str) else value
        if not prompts or any(not p for p in prompts):
            raise ValueError("prompt must be a non-empty string or a list of them")
        return value

    @field_validator("logprobs")
    @classmethod
    def _logprobs(cls, value):
        if value not in (None, 0):
            raise ValueError("only logprobs=0 is supported (the sampled tokens' log-probs)")
        return value

    @field_validator("echo")
    @classmethod
    def _echo(cls, value):
        if value:
            raise ValueError("echo is not supported")
        return value

    @field_validator("suffix")
    @classmethod
    def _suffix(cls, value):
        if value:
            raise ValueError("suffix is not supported")
        return value

    def prompts(self) -> list[str]:
        return [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)
