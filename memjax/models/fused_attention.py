"""Fused causal attention kernels: Pallas splash attention (TPU) and cuDNN flash attention (GPU).

Both take the decoder's layouts (q [B, T, N, Hd], k and v [B, S, K, Hd], grouped-query) and a
token mask [B, T] (False = padding, left or right), attend causally within the T tokens, and
never materialise the [B, N, T, S] scores: their working set is the tiles in flight plus, for
the backward pass, the output and one log-sum-exp per query (what FlashAttention keeps).

Padding rows and columns: splash attention follows MaxText's use of segment ids (real tokens
segment 1, padding segment 0), so a real query sees only real keys and a padding query sees
only padding keys (its output is garbage that callers mask out, and it never turns NaN, as in
the XLA path); for cuDNN each row is rotated so that its padding follows its real tokens,
where its own causal mask keeps real queries from it (`cudnn_attention`).

Which implementation runs is `DecoderConfig.attention` ("xla", "splash", "cudnn"; "" picks by
the platform of the mesh's devices: splash on TPU, cuDNN on GPU, XLA elsewhere).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec

from memjax.parallel import logical_to_spec, normalize_rules

IMPLEMENTATIONS = ("xla", "splash", "cudnn")
_DEFAULT_BY_PLATFORM = {"tpu": "splash", "gpu": "cudnn", "cuda": "cudnn", "rocm": "xla"}
SPLASH_BLOCK = 128  # splash's tiles (and its lane width): sequences are padded to a multiple
CUDNN_BLOCK = 128  # cuDNN flash attention's query and key tiles: sequences padded likewise


def platform(mesh: Mesh | None) -> str:
    """The platform the attention will run on: the mesh's devices (an ahead-of-time TPU
    compile from a CPU host has TPU devices in its mesh), else JAX's default backend."""
    if mesh is not None:
        return mesh.devices.flat[0].platform
    return jax.default_backend()


def resolve(choice: str, mesh: Mesh | None) -> str:
    """The implementation to run for a config's `attention` field."""
    if choice == "":
        return _DEFAULT_BY_PLATFORM.get(platform(mesh), "xla")
    if choice not in IMPLEMENTATIONS:
        raise ValueError(f"model.attention={choice!r}; choose from {IMPLEMENTATIONS} or ''")
    return choice


# ------------------------------------------------------------------------------ splash


def _splash_kernel(num_heads: int, length: int, interpret: bool):
    """Built inside the traced function each time: the kernel holds its block masks as arrays,
    and a kernel kept across traces would leak them from the trace that made them."""
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_kernel as splash,
    )
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_mask as masks,
    )

    mask = masks.MultiHeadMask([masks.CausalMask((length, length))] * num_heads)
    block = min(SPLASH_BLOCK * 4, length)  # 512-wide tiles where the sequence allows
    while length % block:
        block //= 2
    sizes = splash.BlockSizes(
        block_q=block,
        block_kv=block,
        block_kv_compute=block,
        block_q_dkv=block,
        block_kv_dkv=block,
        block_kv_dkv_compute=block,
        block_q_dq=block,
        block_kv_dq=block,
    )
    kernel = splash.make_splash_mha(
        mask, block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret
    )
    return kernel, splash.SegmentIds


def _head_axes(mesh, rules, num_heads: int, num_kv_heads: int):
    """Mesh axes the heads are split over inside the kernel: the rules' `heads` axes when they
    divide both the query and the kv heads (each device then holds whole groups)."""
    spec_q = logical_to_spec(("heads",), rules, (num_heads,), mesh)[0]
    spec_k = logical_to_spec(("kv_heads",), rules, (num_kv_heads,), mesh)[0]
    return spec_q if spec_q == spec_k else None


def splash_attention(q, k, v, token_mask, *, mesh=None, rules=None, interpret=None):
    """q: [B, T, N, Hd]; k, v: [B, T, K, Hd]; token_mask: [B, T] bool -> [B, T, N, Hd].

    Causal within the T tokens. With a mesh, runs under `shard_map` (a Pallas kernel cannot be
    partitioned by XLA): batch over the rules' `batch` axes, heads over `heads` when both head
    counts divide. `interpret` (default: not on TPU) runs the kernel in Pallas' interpreter.
    """
    B, T, N, H = q.shape
    K = k.shape[2]
    if interpret is None:
        interpret = platform(mesh) != "tpu"
    padded = -(-T // SPLASH_BLOCK) * SPLASH_BLOCK
    segments = token_mask.astype(jnp.int32)  # 1 = real token, 0 = padding
    qh = (q * jnp.asarray(H**-0.5, q.dtype)).transpose(0, 2, 1, 3)  # [B, N, T, Hd]
    kh, vh = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # [B, K, T, Hd]
    if padded != T:  # padded tail tokens are padding (segment 0)
        pad4 = ((0, 0), (0, 0), (0, padded - T), (0, 0))
        qh, kh, vh = (jnp.pad(a, pad4) for a in (qh, kh, vh))
        segments = jnp.pad(segments, ((0, 0), (0, padded - T)))

    def run(qh, kh, vh, segments):  # one device's rows and heads
        kernel, segment_ids = _splash_kernel(qh.shape[1], padded, bool(interpret))
        one = lambda q1, k1, v1, s1: kernel(q1, k1, v1, segment_ids(s1, s1))
        return jax.vmap(one)(qh, kh, vh, segments)

    if mesh is None:
        out = run(qh, kh, vh, segments)
    else:
        rules = normalize_rules(rules)
        batch = logical_to_spec(("batch",), rules, (B,), mesh)[0]
        heads = _head_axes(mesh, rules, N, K)
        spec = PartitionSpec(batch, heads, None, None)
        out = jax.shard_map(
            run,
            mesh=mesh,
            in_specs=(spec, spec, spec, PartitionSpec(batch, None)),
            out_specs=spec,
            check_vma=False,
        )(qh, kh, vh, segments)
    return out[:, :, :T].transpose(0, 2, 1, 3).astype(q.dtype)  # [B, T, N, Hd]


# ------------------------------------------------------------------------------ cuDNN


def cudnn_attention(q, k, v, token_mask, *, implementation: str = "cudnn"):
    """q: [B, T, N, Hd]; k, v: [B, T, K, Hd]; token_mask: [B, T] bool -> [B, T, N, Hd].

    cuDNN's flash attention with its own causal mask and nothing else: a boolean mask would
    reach cuDNN as a [B, 1, T, T] bias, the very matrix a fused kernel exists not to build. A
    row's real tokens are one contiguous run (prompts left-padded, responses right-padded), so
    each row is rotated to start at its first real token: its padding then all follows its real
    tokens, where the causal mask alone keeps every real query from it (a padding query attends
    to what precedes it: garbage that callers mask out, never NaN, as in the XLA path). The
    output is rotated back. Grouped-query heads are cuDNN's own. Runs on NVIDIA GPUs only (bf16
    / f16 inputs); `implementation="xla"` runs the same arithmetic in XLA ops (tests on CPU).
    """
    T = q.shape[1]
    first = jnp.argmax(token_mask, axis=1).astype(jnp.int32)  # [B]: 0 for a row with no padding
    index = (jnp.arange(T, dtype=jnp.int32)[None, :] + first[:, None]) % T  # [B, T]
    rotate = lambda x, i: jnp.take_along_axis(x, i[:, :, None, None], axis=1)
    # cuDNN's training kernels take even lengths only (MemSearcher's rows are 6,719 tokens):
    # rows are padded at the end to whole tiles, after every real token, like the rest.
    padded = -(-T // CUDNN_BLOCK) * CUDNN_BLOCK
    tail = lambda x: jnp.pad(rotate(x, index), ((0, 0), (0, padded - T), (0, 0), (0, 0)))
    out = jax.nn.dot_product_attention(
        tail(q), tail(k), tail(v), is_causal=True, implementation=implementation
    )[:, :T]
    back = (jnp.arange(T, dtype=jnp.int32)[None, :] - first[:, None]) % T
    return rotate(out, back)


__all__ = [
    "IMPLEMENTATIONS",
    "platform",
    "resolve",
    "splash_attention",
    "cudnn_attention",
]
