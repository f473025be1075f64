"""The OpenAI-compatible HTTP API over a memjax model: /v1/chat/completions, /v1/completions,
/v1/models.

    app = make_app(model, ServerSettings(model_name="smollm2"))
    uvicorn.run(app, host="127.0.0.1", port=8000)

Chat messages are rendered with the model's own chat template (the assistant header added);
the request's sampling settings go to memjax's continuous-batching engine (EngineBatcher: a
request joins the engine's slots as it arrives), or with `engine=False` to the lock-step
sampler through the Batcher, which gathers concurrent requests into shared calls. Log-probs
are the sampled tokens' log-probabilities at the sampling temperature (at temperature 0,
greedy, of the model's own distribution). A stream sends the completion token by token as
server-sent events once it has decoded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid

from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from memjax.http_bounds import BodyLimit
from memjax.serving import errors
from memjax.serving.batcher import Batcher
from memjax.serving.engine_batcher import EngineBatcher
from memjax.serving.errors import ApiError
from memjax.serving.generation import Choice, Generation, GenerationEngine, TokenChoice
from memjax.serving.openai_schema import ChatCompletionRequest, CompletionRequest, SamplingFields


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    model_name: str
    max_body_bytes: int = 1 << 20
    max_prompt_tokens: int = 4096
    max_tokens: int = 1024  # the most a request may ask for
    default_max_tokens: int = 256  # chat requests that name no max_tokens
    max_n: int = 8
    batch_window_ms: float = 5.0  # the lock-step batcher's
    max_batch_rows: int = 32
    seed: int = 0
    engine: bool = True  # the continuous-batching engine; False: the lock-step batcher
    slots: int = 8  # the engine's: requests decoding at once
    max_len: int = 0  # the engine's: prompt + max_tokens per slot; 0: the most a request asks

    def engine_max_len(self) -> int:
        return self.max_len or self.max_prompt_tokens + self.max_tokens


def make_app(model, settings: ServerSettings) -> FastAPI:
    if settings.engine:
        batcher = EngineBatcher(
            model, slots=settings.slots, max_len=settings.engine_max_len(), seed=settings.seed
        )
        room = batcher.max_len
    else:
        engine = GenerationEngine(model, max_batch_rows=settings.max_batch_rows, seed=settings.seed)
        batcher = Batcher(engine, settings.batch_window_ms / 1000, settings.max_batch_rows)
        room = model.cfg.max_position_embeddings
    app = FastAPI(title="memjax OpenAI-compatible server", docs_url=None, redoc_url=None)
    app.state.batcher = batcher
    errors.install(app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes, refusal=errors.too_large)
    api = _Api(model, batcher, settings, room)
    app.add_api_route("/v1/models", api.models, methods=["GET"])
    app.add_api_route("/v1/chat/completions", api.chat, methods=["POST"])
    app.add_api_route("/v1/completions", api.completions, methods=["POST"])
    app.router.on_shutdown.append(batcher.close)
    return app


class _Api:
    def __init__(self, model, batcher: Batcher | EngineBatcher, settings: ServerSettings, room):
        self.batcher, self.settings = batcher, settings
        self.tokenizer = model.tokenizer
        self.eos_ids = frozenset(int(e) for e in self.tokenizer.eos_ids)
        # The most tokens a request's prompt + max_tokens may hold, and what sets that limit.
        self.room = room
        self.room_name = (
            "model's context" if room == model.cfg.max_position_embeddings else "server's max_len"
        )
        self.created = int(time.time())

    async def models(self):
        card = {"id": self.settings.model_name, "object": "model", "created": self.created}
        return {"object": "list", "data": [card | {"owned_by": "memjax"}]}

    async def chat(self, request: ChatCompletionRequest):
        self._check_model(request)
        prompt = self._chat_prompt(request)
        generation = self._generation(request, prompt, request.limit())
        choices = await self.batcher.submit(generation)
        meta = _meta("chatcmpl", self.settings.model_name, "chat.completion")
        if request.stream:
            events = self._chat_events(meta, choices, request, len(prompt))
            return StreamingResponse(events, media_type="text/event-stream")
        body = [
            {
                "index": i,
                "message": {"role": "assistant", "content": c.text},
                "logprobs": {"content": self._token_logprobs(c)} if request.logprobs else None,
                "finish_reason": c.finish_reason,
            }
            for i, c in enumerate(choices)
        ]
        return meta | {"choices": body, "usage": _usage(len(prompt), choices)}

    async def completions(self, request: CompletionRequest):
        self._check_model(request)
        if request.stream:
            raise ApiError(400, "stream is supported on /v1/chat/completions only", param="stream")
        prompts = [self.tokenizer.encode(p) for p in request.prompts()]
        if len(prompts) * request.n > self.settings.max_batch_rows:
            raise ApiError(400, f"prompts x n over {self.settings.max_batch_rows}", param="prompt")
        for ids in prompts:
            self._check_prompt(ids, "prompt")
        generations = [self._generation(request, ids, request.max_tokens) for ids in prompts]
        results = await asyncio.gather(*(self.batcher.submit(g) for g in generations))
        choices, body = [], []
        for group in results:
            for c in group:
                logprobs = None
                if request.logprobs is not None:
                    entries = self._token_logprobs(c)
                    logprobs = {
                        "tokens": [e["token"] for e in entries],
                        "token_logprobs": [e["logprob"] for e in entries],
                        "top_logprobs": None,
                        "text_offset": None,
                    }
                body.append(
                    {
                        "index": len(body),
                        "text": c.text,
                        "logprobs": logprobs,
                        "finish_reason": c.finish_reason,
                    }
                )
                choices.append(c)
        meta = _meta("cmpl", self.settings.model_name, "text_completion")
        usage = _usage(sum(len(p) for p in prompts) * request.n, choices)
        return meta | {"choices": body, "usage": usage}

    def _check_model(self, request: SamplingFields) -> None:
        if request.model != self.settings.model_name:
            raise ApiError(
                404,
                f"model {request.model!r} is not served here; this server has "
                f"{self.settings.model_name!r}",
                param="model",
                code="model_not_found",
            )

    def _chat_prompt(self, request: ChatCompletionRequest) -> list[int]:
        messages = [{"role": m.role, "content": m.text()} for m in request.messages]
        if request.continue_final_message:  # the assistant turn goes on from its text
            text = self.tokenizer.chat_text(messages[:-1]) + messages[-1]["content"]
        else:
            text = self.tokenizer.chat_text(messages, request.add_generation_prompt)
        ids = self.tokenizer.encode(text)
        self._check_prompt(ids, "messages")
        return ids

    def _check_prompt(self, ids: list[int], param: str) -> None:
        if not ids:
            raise ApiError(400, "the prompt has no tokens", param=param)
        if len(ids) > self.settings.max_prompt_tokens:
            raise ApiError(
                400,
                f"the prompt has {len(ids)} tokens; this server takes at most "
                f"{self.settings.max_prompt_tokens}",
                param=param,
                code="context_length_exceeded",
            )

    def _generation(self, request: SamplingFields, prompt: list[int], limit: int | None):
        s = self.settings
        max_tokens = limit or s.default_max_tokens
        if max_tokens > s.max_tokens:
            raise ApiError(
                400, f"max_tokens={max_tokens}: at most {s.max_tokens}", param="max_tokens"
            )
        if request.n > s.max_n:
            raise ApiError(400, f"n={request.n}: at most {s.max_n}", param="n")
        room = self.room
        if len(prompt) + max_tokens > room:
            raise ApiError(
                400,
                f"prompt ({len(prompt)} tokens) + max_tokens ({max_tokens}) is over the "
                f"{self.room_name} of {room}",
                param="max_tokens",
                code="context_length_exceeded",
            )
        choice = TokenChoice(request.temperature, request.top_p, request.top_k)
        stop = request.stop_strings()
        keep_stop = request.include_stop_str_in_output
        return Generation(prompt, choice, max_tokens, stop, request.n, request.seed, keep_stop)

    def _token_logprobs(self, c: Choice) -> list[dict]:
        """One entry per sampled token (a final end-of-turn token left out)."""
        ids, logprobs = c.token_ids, c.logprobs
        if ids and ids[-1] in self.eos_ids:
            ids, logprobs = ids[:-1], logprobs[:-1]
        entries = []
        for token, logprob in zip(ids, logprobs):
            text = self.tokenizer.decode([token], skip_special_tokens=False)
            entries.append(
                {
                    "token": text,
                    "logprob": logprob,
                    "bytes": list(text.encode()),
                    "top_logprobs": [],
                }
            )
        return entries

    async def _chat_events(self, meta, choices, request, prompt_tokens: int):
        meta = meta | {"object": "chat.completion.chunk"}

        def event(choice_index: int, delta: dict, finish=None, logprobs=None) -> str:
            part = {"index": choice_index, "delta": delta, "logprobs": logprobs}
            chunk = meta | {"choices": [part | {"finish_reason": finish}]}
            return f"data: {json.dumps(chunk)}\n\n"

        for i, c in enumerate(choices):
            yield event(i, {"role": "assistant", "content": ""})
            entries = self._token_logprobs(c) if request.logprobs else None
            for k, piece in enumerate(self._pieces(c)):
                logprobs = {"content": [entries[k]]} if entries and k < len(entries) else None
                yield event(i, {"content": piece}, logprobs=logprobs)
            yield event(i, {}, finish=c.finish_reason)
        if request.include_usage():
            usage = meta | {"choices": [], "usage": _usage(prompt_tokens, choices)}
            yield f"data: {json.dumps(usage)}\n\n"
        yield "data: [DONE]\n\n"

    def _pieces(self, c: Choice) -> list[str]:
        """The completion's text in per-token pieces that join to exactly `c.text`."""
        pieces, done = [], ""
        for k in range(1, len(c.token_ids) + 1):
            prefix = self.tokenizer.decode(list(c.token_ids[:k]), skip_special_tokens=True)
            prefix = prefix[: len(c.text)]
            if len(prefix) > len(done) and c.text.startswith(prefix):
                pieces.append(prefix[len(done) :])
                done = prefix
        if done != c.text:
            pieces.append(c.text[len(done) :])
        return pieces


def _meta(prefix: str, model: str, kind: str) -> dict:
    return {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
    }


def _usage(prompt_tokens: int, choices: list[Choice]) -> dict:
    completion = sum(len(c.token_ids) for c in choices)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
    }
