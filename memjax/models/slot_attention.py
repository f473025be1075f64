"""One-token decode attention over a slot cache that reads each row's own live slots.

    out = slot_decode_attention(q, k, v, lengths, kernel, mesh=mesh, rules=rules)

A slot cache layer is k, v [B, K, S, Hd] (`slot_cache`): row b's keys fill slots
[0, lengths[b]). The XLA path (`decoder.attention_over_cache` over a window) reads the first W
slots of every row, W covering the longest live row. The Pallas kernels here read a row's
slots up to its own length, straight from the cache's buffers (no copy of the cache per step):

- GPU ("triton"): JAX's split-K decode kernel (`pallas.ops.gpu.decode_attention`). Its
  grouped-query entry point `gqa` takes k as [B, S, K, Hd] and transposes it to [B, K, S, Hd]
  for the per-(row, kv head) kernel `decode_attn_unbatched`, which is the slot cache's own
  layout: that kernel is called here directly, vmapped over rows and kv heads, with each row's
  length as `kv_seq_len`. Blocks past a row's length are neither loaded nor computed.
- TPU ("paged"): JAX's paged attention (`pallas.ops.tpu.paged_attention`), which takes pages
  [K', P, page, Hd] and a page table. A row-major [B, K, S, Hd] buffer is, with no copy,
  [1, B * K * S / page, page, Hd]: every (row, kv head) pair becomes a sequence of one kv head
  whose pages are consecutive, and its G = N / K query heads its queries. The kernel copies in
  only the pages below each sequence's length. (The newer `ragged_paged_attention` wants K and
  V interleaved in one [P, page, 2K, Hd] buffer, a layout the slot cache would have to be
  rebuilt into every step, so it is not used.)

Under a mesh the kernels run in `shard_map` (XLA cannot partition a Pallas call): rows over
the rules' `batch` axes and kv heads over `kv_heads`, as the cache is laid out, so each device
attends over its own rows and heads.

Which path runs follows `DecoderConfig.attention` (`fused_attention.resolve`): the fused
choice of a platform ("splash" on TPU, "cudnn" on GPU) decodes with that platform's kernel;
"xla", and every other platform, keeps the XLA window. Off their platform (tests on CPU) the
kernels run in Pallas' interpreter.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec

from memjax.models import fused_attention
from memjax.parallel import logical_to_spec, normalize_rules

KERNELS = ("triton", "paged")
_BY_IMPLEMENTATION = {"cudnn": "triton", "splash": "paged"}
_NATIVE = {"triton": ("gpu", "cuda"), "paged": ("tpu",)}
GPU_BLOCK_K = 128  # keys per step of the GPU kernel's inner loop
TPU_PAGE = 128  # slots per page: a multiple of the TPU's 8 x 128 tiles for bf16 and f32
TPU_PAGES_PER_BLOCK = 4  # pages one step of the TPU kernel copies in and attends over


def gpu_splits(size: int) -> int:
    """Split-K programs for a cache of `size` slots: the most (up to 16) whose splits are a
    whole number of 128-slot blocks, or hold 16 to 128 slots; 0 when none does (XLA then)."""
    for splits in (16, 8, 4, 2, 1):
        part, rest = divmod(size, splits)
        if rest == 0 and part >= 16 and (part <= GPU_BLOCK_K or part % GPU_BLOCK_K == 0):
            return splits
    return 0


def kernel_for(attention: str, mesh: Mesh | None, size: int) -> str:
    """The kernel a T = 1 decode step over a `size`-slot cache runs, or "" for XLA's window."""
    kernel = _BY_IMPLEMENTATION.get(fused_attention.resolve(attention, mesh), "")
    if kernel == "triton" and not gpu_splits(size):
        return ""
    if kernel == "paged" and size % TPU_PAGE:
        return ""
    return kernel


def _interpret(kernel: str, mesh: Mesh | None) -> bool:
    return fused_attention.platform(mesh) not in _NATIVE[kernel]


def _triton(q, k, v, lengths, interpret: bool):
    """q [B, K, G, Hd] (unscaled); k, v [B, K, S, Hd]; lengths [B] -> [B, K, G, Hd]."""
    from jax.experimental.pallas.ops.gpu import decode_attention

    B, K, G, H = q.shape
    splits = gpu_splits(k.shape[2])
    one = lambda q1, k1, v1, n1: decode_attention.decode_attn_unbatched(
        q1,
        k1,
        v1,
        None,
        n1,
        sm_scale=H**-0.5,
        block_h=16,  # query heads per program, masked past G (the kernel's default)
        block_k=min(GPU_BLOCK_K, k.shape[2] // splits),
        k_splits=splits,
        num_warps=None,
        num_stages=2,
        grid=None,
        interpret=interpret,
        debug=False,
        return_residuals=False,
        normalize_output=True,
    )
    n = jnp.broadcast_to(lengths[:, None], (B, K))
    return jax.vmap(jax.vmap(one))(q, k, v, n)


def _paged(q, k, v, lengths, interpret: bool):
    """As `_triton`, by TPU paged attention over the buffers viewed as pages."""
    from jax.experimental.pallas import tpu as pltpu
    from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention

    B, K, G, H = q.shape
    S = k.shape[2]
    per_seq = S // TPU_PAGE
    block = max(d for d in range(1, TPU_PAGES_PER_BLOCK + 1) if per_seq % d == 0)
    pages = lambda a: a.reshape(1, B * K * per_seq, TPU_PAGE, H)  # row-major: no copy
    table = jnp.arange(B * K * per_seq, dtype=jnp.int32).reshape(B * K, per_seq)
    q = (q * jnp.asarray(H**-0.5, q.dtype)).reshape(B * K, G, H)
    n = jnp.repeat(lengths.astype(jnp.int32), K)

    def run():
        return paged_attention(
            q, pages(k), pages(v), n, table, pages_per_compute_block=block
        ).astype(v.dtype)

    if interpret:
        with pltpu.force_tpu_interpret_mode():
            out = run()
    else:
        out = run()
    return out.reshape(B, K, G, H)


def slot_decode_attention(q, k, v, lengths, kernel: str, *, mesh=None, rules=None):
    """q [B, 1, N, Hd]; k, v [B, K, S, Hd] (a layer of the slot cache, the new token written);
    lengths [B] int32: slots each row's query sees (its position + 1). Returns [B, 1, N, Hd]."""
    B, T, N, H = q.shape
    K, S = k.shape[1], k.shape[2]
    if T != 1:
        raise ValueError(f"slot_decode_attention takes one query per row, got T={T}")
    grouped = q.reshape(B, K, N // K, H)
    lengths = jnp.clip(lengths, 1, S).astype(jnp.int32)
    attend = {"triton": _triton, "paged": _paged}[kernel]
    interpret = _interpret(kernel, mesh)
    run = lambda q_, k_, v_, n_: attend(q_, k_, v_, n_, interpret)
    if mesh is None:
        out = run(grouped, k, v, lengths)
    else:
        rules = normalize_rules(rules)
        spec = logical_to_spec(("batch", "kv_heads", None, None), rules, k.shape, mesh)
        rows = PartitionSpec(spec[0])
        out = jax.shard_map(
            run,
            mesh=mesh,
            in_specs=(spec, spec, spec, rows),
            out_specs=spec,
            check_vma=False,
        )(grouped, k, v, lengths)
    return out.reshape(B, 1, N, H).astype(q.dtype)


__all__ = ["KERNELS", "gpu_splits", "kernel_for", "slot_decode_attention"]
