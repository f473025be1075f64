"""SamplingParams: how the next token is chosen, and how the sampler runs. Frozen and hashable:
a static jit argument (the run options are reset in `token_choice()` so that they never
cause a recompile)."""

from __future__ import annotations

import dataclasses

WEIGHT_DTYPES = ("auto", "stored", "float32", "bfloat16")
OVERFLOW_MODES = ("error", "truncate_prompt")
SHARED_PREFIX = 256  # tokens of common opening worth one prefill of their own
PREFILL_CHUNK_CPU = 256  # the prefill's column chunk by default on the CPU backend


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """temperature -> top-k -> top-p, in that order (as `transformers`, Tunix and gemma do).

    top_k=0 and top_p=1.0 disable those filters. `greedy` takes the argmax (ties to the lowest
    id); log-probs are still reported at `temperature`, so a greedy rollout's log-probs match a
    trainer that divides logits by the same temperature.

    How the sampler runs (none of these changes which distribution a token is drawn from):
    - weight_dtype: the dtype the weight matrices are read in while decoding. "auto" is the
      fastest setting measured safe for the backend (today the weights as stored everywhere:
      see weights.py); "stored" keeps the params as given; "bfloat16" halves the bytes read.
      Activations, logits, softmax and log-probs stay f32; a trainer recomputes log-probs in
      its own dtype (the gap is the `sampler_gap` metric).
    - compaction: move running rows into smaller batch buckets as rows stop (compaction.py);
      token-identical to the static batch. None ("auto") turns it on where it was measured
      faster: on the CPU backend without a mesh, where a decode step's cost grows with its
      rows, so finished rows are worth dropping (`tools/bench.py sampling`, docs/results.md).
      Elsewhere it stays off until measured: its host round trips and batch changes cost
      more on an accelerator, and a sharded batch cannot shrink below its mesh.
    - context_overflow: a prompt + max_new_tokens beyond the model's max_position_embeddings
      is an "error", or "truncate_prompt" keeps the prompt's latest tokens (context.py).
    - shared_prefix: prompts that open with the same tokens (a role's instructions) prefill
      that opening once when it is at least this many tokens (prefix.py); 0 never shares.
      Prefill is most of a batched call's time on CPU, and a role's instructions are a large
      part of its prompts (`tools/bench.py shared_prefix`, docs/results.md). Unsharded batches only (a one-row prefill cannot split over a mesh).
    - prefill_chunk: prefill prompts longer than this many tokens in column chunks of at most
      this many (chunk.py); 0 prefills each in one piece. The same attention over the same
      tokens, so the same completions (up to float rounding), with the prefill's peak memory
      bounded: its attention scores are [B, heads, chunk, cache] instead of [B, heads, T,
      cache]. None ("auto") chunks by PREFILL_CHUNK_CPU on the CPU backend, where it was
      measured to lower the peak and the time (`tools/bench.py prefill_chunks`,
      docs/results.md), and not elsewhere until measured there (the fused attention kernels
      serve a first prefill only).
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    max_new_tokens: int = 64
    greedy: bool = False
    weight_dtype: str = "auto"
    compaction: bool | None = None
    context_overflow: str = "error"
    shared_prefix: int = SHARED_PREFIX
    prefill_chunk: int | None = None

    def __post_init__(self):
        if not self.temperature > 0:
            raise ValueError(
                f"SamplingParams.temperature={self.temperature}: must be > 0 "
                "(use greedy=True for argmax decoding)"
            )
        if self.top_k < 0:
            raise ValueError(f"SamplingParams.top_k={self.top_k}: must be >= 0 (0 disables it)")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"SamplingParams.top_p={self.top_p}: must be in (0, 1]")
        if self.max_new_tokens < 1:
            raise ValueError(f"SamplingParams.max_new_tokens={self.max_new_tokens}: must be >= 1")
        if self.weight_dtype not in WEIGHT_DTYPES:
            raise ValueError(
                f"SamplingParams.weight_dtype={self.weight_dtype!r}: choose from {WEIGHT_DTYPES}"
            )
        if self.context_overflow not in OVERFLOW_MODES:
            raise ValueError(
                f"SamplingParams.context_overflow={self.context_overflow!r}: choose from "
                f"{OVERFLOW_MODES}"
            )
        if self.shared_prefix < 0:
            raise ValueError(
                f"SamplingParams.shared_prefix={self.shared_prefix}: must be >= 0 (0 never shares)"
            )
        if self.prefill_chunk is not None and self.prefill_chunk < 0:
            raise ValueError(
                f"SamplingParams.prefill_chunk={self.prefill_chunk}: must be >= 0 "
                "(0 prefills in one piece, None chooses by backend)"
            )

    def token_choice(self) -> SamplingParams:
        """The same token choice with the run options at their defaults (the jit cache key)."""
        return dataclasses.replace(
            self,
            weight_dtype="auto",
            compaction=None,
            context_overflow="error",
            shared_prefix=SHARED_PREFIX,
            prefill_chunk=None,
        )


RUN_OPTIONS = {
    "weight_dtype": str,
    "compaction": bool,
    "context_overflow": str,
    "shared_prefix": int,
    "prefill_chunk": int,
}


def compacts(sampling: SamplingParams, backend: str, sharded: bool) -> bool:
    """Whether a decode call compacts: as set, or by default on an unsharded CPU backend."""
    if sharded:
        return False
    if sampling.compaction is None:
        return backend == "cpu"
    return sampling.compaction


def prefill_chunk(sampling: SamplingParams, backend: str) -> int:
    """Tokens per prefill chunk of a call (0: one piece): as set, or by backend by default."""
    if sampling.prefill_chunk is None:
        return PREFILL_CHUNK_CPU if backend == "cpu" else 0
    return sampling.prefill_chunk


def run_options(section) -> dict:
    """The run options a config section sets (`weight_dtype`, `compaction`,
    `context_overflow`, `shared_prefix`, `prefill_chunk`), as SamplingParams keyword
    arguments; absent ones keep the defaults."""
    out = {}
    for name, kind in RUN_OPTIONS.items():
        value = section.get(name)
        if value is not None:
            out[name] = kind(value)
    return out
