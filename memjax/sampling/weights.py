"""The dtype the sampler reads its weight matrices in.

A decode step reads every weight once, so its floor is the weights' bytes over the memory
bandwidth: bf16 halves it. Only the matrices are cast (embedding, projections, unembedding);
norms and biases keep their dtype, and activations, logits, softmax and log-probs stay f32
(`decoder.narrow_weights`: activations are cast down to the weight for each GEMM, which
accumulates in f32).

`SamplingParams.weight_dtype="auto"` keeps the weights as stored on every backend for now.
In XLA's CPU backend (jax 0.10, AVX2 without native bf16) a bf16 x bf16 -> f32 product of two
or more rows runs as one YNNPACK GEMM over the stored bf16 weights, but a one-row product is
rewritten into a convert of the whole weight to f32 and an f32 GEMV (seen in the optimized
HLO). On such a CPU bf16 weights decode SmolLM2 no faster than f32: a step there is bound by
the small-M GEMM kernels, not by the bytes read, so halving the bytes does not help. On a CPU
with native bf16 (AVX-512 BF16 / AMX) they are faster from two rows, not at one
(`tools/bench.py sampling`; the figures are in docs/results.md). They are an option
("bfloat16"), not the default: they change greedy tokens against f32 (and `transformers`), and
differently on the two kinds of CPU. With them, one row would take the convert path, so a
compacting bf16 batch stops shrinking at two rows (`min_batch`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from memjax.sampling.sampling_params import SamplingParams

MATRICES = ("embed", "lm_head", "q", "k", "v", "o", "gate", "up", "down")
BF16_MIN_BATCH = 2


def cast_matrices(params, dtype):
    """The weight matrices in `dtype` (None: unchanged); other leaves keep their dtype."""
    if dtype is None:
        return params
    dtype = jnp.dtype(dtype)

    def cast(path, a):
        name = getattr(path[-1], "key", None)
        return a.astype(dtype) if name in MATRICES and a.dtype != dtype else a

    return jax.tree_util.tree_map_with_path(cast, params)


def resolve(sampling: SamplingParams, batch: int):
    """The weight dtype for a call of `batch` rows, or None to keep the params as stored."""
    setting = sampling.weight_dtype
    if setting == "stored":
        return None
    if setting != "auto":
        return jnp.dtype(setting)
    return None  # "auto": see the module docstring for the measurement behind it


class WeightCopies:
    """Prepared params and, once a call needs it, their copy in the weight dtype `resolve`
    picks for it: a caller that samples many times with the same weights casts once."""

    def __init__(self, params):
        self.stored = params
        self._copies: dict = {}

    def for_call(self, sampling: SamplingParams, batch: int):
        dtype = resolve(sampling, batch)
        if dtype is None or all(a.dtype == dtype for a in _matrices(self.stored)):
            return self.stored
        if dtype not in self._copies:
            self._copies[dtype] = cast_matrices(self.stored, dtype)
        return self._copies[dtype]


def _matrices(params) -> list:
    leaves = jax.tree_util.tree_leaves_with_path(params)
    return [a for path, a in leaves if getattr(path[-1], "key", None) in MATRICES]


def min_batch(params) -> int:
    """The smallest batch bucket compaction may move these params' rows into."""
    embed = params["embed"]
    narrow = embed.dtype == jnp.bfloat16 and jax.default_backend() == "cpu"
    return BF16_MIN_BATCH if narrow else 1
