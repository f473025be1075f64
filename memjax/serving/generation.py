"""One batched sampler call for many HTTP requests, and each request's completions cut out of it.

    engine = GenerationEngine(model, max_batch_rows=32)
    results = engine.run([Generation(prompt_ids, choice, stop=("\\n",), n=2, max_tokens=40)])

Requests join one call only when the sampler can serve them together: the same token choice
(temperature, top-k, top-p, greedy), the same stop strings (the stop set belongs to the whole
batch) and the same `max_tokens` bucket (a power of two: `max_new_tokens` is a static argument
of the compiled decode loop, so each distinct value would compile once). A row runs to its
bucket and is cut to its own `max_tokens` here; its tokens up to there are the ones a call with
that exact limit draws, since a row's draws depend only on the key, the step and its row index.

A request with a `seed` is sampled in a call of its own keyed by the seed, so its output does
not depend on which requests arrived beside it. The batch's rows are padded to a power of two
(copies of its first prompt, discarded) for the same reason as the bucket: fewer shapes to
compile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import numpy as np

from memjax.sampling.sampler import prepare_params, sample
from memjax.sampling.sampling_params import SamplingParams
from memjax.sampling.weights import WeightCopies

MIN_TOKEN_BUCKET = 16


@dataclasses.dataclass(frozen=True)
class TokenChoice:
    """How a request picks tokens: temperature 0 is greedy (log-probs then at temperature 1)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclasses.dataclass
class Generation:
    """One request as the engine sees it: a prompt in token ids and its sampling settings."""

    prompt: list[int]
    choice: TokenChoice
    max_tokens: int
    stop: tuple[str, ...] = ()
    n: int = 1
    seed: int | None = None
    keep_stop: bool = False  # the text keeps the stop string it ended on


@dataclasses.dataclass(frozen=True)
class Choice:
    """One completion: its text (cut before a stop string), ids and log-probs, and why it ended
    in OpenAI's words ("stop": EOS or a stop string, "length": max_tokens)."""

    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str


def token_bucket(max_tokens: int) -> int:
    """The decode loop's length for a request: the next power of two, at least 16."""
    return max(MIN_TOKEN_BUCKET, 1 << (int(max_tokens) - 1).bit_length())


def batch_key(g: Generation) -> tuple:
    """Requests with equal keys can share one sampler call."""
    seed = ("seed", g.seed, id(g)) if g.seed is not None and not g.choice.greedy else None
    return (g.choice, g.stop, token_bucket(g.max_tokens), seed)


class GenerationEngine:
    """The model, its weights laid out for decoding once, and the batched call (not
    thread-safe: the server calls it from one worker thread)."""

    def __init__(self, model, *, max_batch_rows: int = 32, seed: int = 0):
        self.cfg = model.cfg
        self.tokenizer = model.tokenizer
        self.weights = WeightCopies(prepare_params(model.params, model.cfg))
        self.eos_ids = tuple(self.tokenizer.eos_ids)
        self.max_batch_rows = max_batch_rows
        self.key = jax.random.key(seed)
        self.calls = 0  # sampler calls made (each unseeded call draws from a fresh key)

    def run(self, generations: Sequence[Generation]) -> list[list[Choice]]:
        """Completions for requests that share a batch_key, in one sampler call."""
        first = generations[0]
        prompts = [g.prompt for g in generations for _ in range(g.n)]
        rows = len(prompts)
        padded = 1 << (rows - 1).bit_length()
        prompts += [prompts[0]] * (padded - rows)
        sampling = sampling_params(first.choice, token_bucket(first.max_tokens))
        self.calls += 1
        if first.seed is not None and len(generations) == 1:
            rng = jax.random.key(first.seed)
        else:
            rng = jax.random.fold_in(self.key, self.calls)
        out = sample(
            self.weights.for_call(sampling, padded),
            self.cfg,
            prompts,
            sampling,
            rng,
            eos_ids=self.eos_ids,
            stop_strings=first.stop,
            tokenizer=self.tokenizer if first.stop else None,
            pad_id=self.tokenizer.pad_id,
        )
        tokens, logprobs = np.asarray(out.tokens), np.asarray(out.logprobs)
        lengths = np.asarray(out.lengths)
        results, row = [], 0
        for g in generations:
            choices = []
            for _ in range(g.n):
                n = int(lengths[row])
                reason = out.stop_reason[row]
                choices.append(
                    to_choice(tokens[row, :n], logprobs[row, :n], reason, g, self.tokenizer)
                )
                row += 1
            results.append(choices)
        return results


def sampling_params(choice: TokenChoice, max_new_tokens: int) -> SamplingParams:
    """The sampler's (and the engine's) settings for a request's token choice."""
    return SamplingParams(
        temperature=choice.temperature if not choice.greedy else 1.0,
        top_p=choice.top_p,
        top_k=choice.top_k,
        greedy=choice.greedy,
        max_new_tokens=max_new_tokens,
    )


def to_choice(tokens, logprobs, reason: str, g: Generation, tokenizer) -> Choice:
    """A completion (its ids, log-probs and stop reason: "eos", "stop_string" or "max_tokens")
    cut to the request's own max_tokens, its stop string and EOS left out of the text."""
    if len(tokens) > g.max_tokens:
        tokens, logprobs = tokens[: g.max_tokens], logprobs[: g.max_tokens]
        reason = "max_tokens"
    ids = [int(t) for t in tokens]
    text_ids = ids[:-1] if reason == "eos" else ids
    text = tokenizer.decode(text_ids, skip_special_tokens=True)
    if reason == "stop_string" and not g.keep_stop:  # the ids end right after the stop string
        text = _before_stop(text, g.stop)
    finish = "length" if reason == "max_tokens" else "stop"
    return Choice(text, tuple(ids), tuple(float(x) for x in logprobs), finish)


def _before_stop(text: str, stop: Sequence[str]) -> str:
    """`text` up to (not including) the first stop string in it (OpenAI leaves it out)."""
    cuts = [text.find(s) for s in stop if s in text]
    return text[: min(cuts)] if cuts else text
