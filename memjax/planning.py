"""Per-device memory of an RL recipe on a mesh, from its config alone (no weights, no devices).

    plan = plan_memory(config)                    # config: configs/*.py's get_config()
    print(plan.table()); plan.fits; suggest(config)

What is counted, per device (shards from the rules tables through `parallel.logical_to_spec`
with the mesh's axis sizes, exactly as the train step and sampler place them):

  persistent   policy weights in the train state (param_dtype, f32 master), AdamW's two moments
               (same dtype and sharding), the reference model (the trainer's copy of the
               initial weights, train layout: matrices in compute dtype, as the forward reads
               them) when the KL term is on, the PPO critic's weights and moments, and the
               sampler's copy of the weights (compute dtype, sampling layout: not fsdp-sharded,
               so decode needs no per-step all-gathers)
  rollout      the sampler's KV cache for `rollout.decode_batch` rows of prompt + response
               slots (`kv_cache.cache_abstract`, sampling layout) and its [rows, V] f32 logits,
               plus the larger of the prefill's working set (one [r, P, D + F/t] layer slab
               of the r = decode_batch / group prompts per shard, and every layer's new keys
               and values before they are written; P is `rollout.prefill_chunk` when the
               sampler prefills in chunks, whose scores over the cache are counted too) and a
               decode step's (two layers' weights, which the layer scan double-buffers, and
               `DECODE_LOGIT_COPIES` of the logits)
  train        gradient accumulators (param dtype) of the actor or the critic, whichever is
               larger, and the activations of one micro-batch under the remat policy: b rows of
               prompt + response tokens on each data x fsdp shard (`micro_batches_for`; the
               tensor axis splits a row's heads and features, not the rows):
                 saved   per layer: the residual input [b, T, D] (remat full); plus every
                         matmul output (remat dots); everything (remat none), where
                         attention keeps a few f32 statistics per query [b, N/t, T] and no
                         scores (every implementation's backward rebuilds them)
                 layer   the working set of the layer being recomputed: its dense
                         intermediates and attention's own: with the XLA implementation the
                         scores [b, N/t, Q, T] of one block of Q queries
                         (`DecoderConfig.attention_query_block`, or Q = T in one piece;
                         f32 scores and bf16 probabilities: 6 bytes each, as the TPU
                         compiler keeps them), with a fused kernel (splash, cuDNN) the
                         statistics per query (the implementation: `model.attention`, or
                         the hardware's default: splash on TPU, cuDNN on GPU)
                 weights one layer's fsdp-gathered weights (and their gradient) in compute dtype
                 logits  the vocab-chunked log-prob slab [b, T, chunk] f32 (x3: logits, exp,
                         gradient) and `VOCAB_TABLE_COPIES` gathered vocabulary tables
                         (`VOCAB_TABLE_COPIES_GPU` on a GPU)
               where the step donates its state (CPU, GPU: `train_step.donates_state`), the
               update's temporaries: the new weights and both new moments (param dtype),
               computed whole before the step keeps them or, on a non-finite gradient norm,
               the old ones (`UPDATE_COPIES`; measured against the TPU compile, donating; on
               a GPU one state-sized buffer, `UPDATE_COPIES_GPU`);
               where it does not (TPU), the new state in buffers of its own, which also hold
               the layer, weights and logits working sets until the update writes them (what
               exceeds the new state is counted), except a buffer larger than every one of
               the new state's (a gathered vocabulary table when fsdp cuts the layers' weights
               finer than the table: MemSearcher 3B, fsdp 8), which is counted apart
               (`buffers_apart`): the TPU compile's outputs + temporaries within 15% of every
               paper config (table in tools/plan_memory.py)
  log-probs    the old / reference log-prob pass over a chunk of `logprob_rows` rows (r per
               data x fsdp shard; `logprobs.make_logprob_fn` walks a step's rows in such
               chunks): one layer's forward slab [r, T, D + F/t] (plus the XLA path's f32
               scores of one query block), the log-prob slab [r, T, chunk] f32 and the
               gathered [V/t, D] tables

With LoRA (`config.lora.rank` > 0, cfg.lora): the base is frozen in param_dtype (it may be
bf16: it is never updated), the adapters (their own dtype) and their AdamW moments are the only
trained state, there is no reference model (the KL reference is the base with the adapters off),
the critic trains its adapters and head over the policy's own base (no second backbone),
gradient accumulators are the adapters', the fsdp-gathered layer weights need no gradient
buffer, and each target projection adds its [b, T, r] and [b, T, out] matmul outputs.

peak = persistent + max(rollout, log-probs, train): the phases alternate on the same devices.
Checked against the TPU compiler (tools/aot_check.py, Qwen2.5-3B GRPO on v5p:2x2x1, splash
attention): the train state, sampler weights, KV cache and reference model exactly; the train
step's, log-prob pass's, prefill's and decode step's temporaries within 15% (the working-set
slabs above are fitted to those compiles).
A config fits when the peak is at most `hardware.USABLE_FRACTION` of the device's HBM.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np

from memjax import hardware as hw_lib
from memjax.models import presets
from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract, query_block_size
from memjax.models.frozen import frozen_bytes
from memjax.models.kv_cache import cache_abstract, cache_bytes
from memjax.models.lora import lora_abstract
from memjax.models.lora_config import lora_config_from
from memjax.models.params import is_info
from memjax.parallel import (
    MESH_AXES,
    SAMPLING_RULES,
    TRAIN_RULES,
    ShardingError,
    logical_to_spec,
    normalize_rules,
)
from memjax.rl.critic import critic_abstract, critic_trainable_abstract
from memjax.sampling.padding import bucket_length
from memjax.training.logprobs import LOGPROB_ROWS_PER_DEVICE
from memjax.training.train_step import donates_state

ATTN_BYTES_PER_SCORE = 6  # f32 scores + bf16 probabilities (XLA fuses the softmax; TPU compile)
# A prefill chunk's scores over the cache, fitted to the TPU compile of Qwen2.5-3B's chunks
# (v5p:2x2x1, 4 prompts of 4,096 tokens per chip over 6,144 slots; chunks of 512 tokens: the
# planner +8% on the compiler's 0.98 GiB, 1,024: -1% on 2.13 GiB; tools/aot_check.py
# --prefill_chunk).
CHUNK_BYTES_PER_SCORE = 5
FUSED_BYTES_PER_QUERY = 16  # a fused kernel's f32 max, log-sum-exp, rowsum(dO * O), spare
LOGIT_SLABS = 3  # chunk logits, their exponentials, their gradient
# Gathered [V/t, D] vocabulary tables in compute dtype live in a train step: the embedding
# lookup's, the unembedding padded to whole chunks, and its [n, C, D] chunked layout (TPU
# compile of MemSearcher 3B: 593 + 608 + 608 MiB; Memory-R1 3B shares the last two). The
# lookup's gradient is no table of its own (`models/embedding.py` keeps it sharded).
VOCAB_TABLE_COPIES = 3
# On a GPU two are live at once (GPU compiles of every paper config's train step on its H100s,
# tools/aot_check.py --target: with three, the planner read +1% to +15% over the compiler's
# temporaries, fsdp-8 MemSearcher 3B the most; with two, -3% to +5%).
VOCAB_TABLE_COPIES_GPU = 2
UPDATE_COPIES = 3  # new weights, new m, new v, live together before the finite-gradient select
# XLA's GPU compiler writes the new moments over the donated old ones and keeps one state-sized
# buffer apart (GPU compiles of Qwen2.5-3B and 7B GRPO steps on H100s, tools/aot_check.py
# --target: 0.70 and 0.94 of the trained weights' bytes beyond gradients and activations).
UPDATE_COPIES_GPU = 1
DECODE_LOGIT_COPIES = 4  # logits, temperature-scaled, filtered, log-softmax


class PlanError(ValueError):
    pass


# ------------------------------------------------------------------------------ sharding


def resolve_mesh(mesh: Mapping[str, int], num_devices: int) -> dict[str, int]:
    """The mesh's axis sizes with a -1 axis filled in; the product must be num_devices."""
    unknown = set(mesh) - set(MESH_AXES)
    if unknown:
        raise PlanError(f"mesh axes {sorted(unknown)} are unknown; choose from {MESH_AXES}")
    sizes = {a: int(mesh.get(a, 1)) for a in MESH_AXES}
    free = [a for a, s in sizes.items() if s == -1]
    if len(free) > 1:
        raise PlanError(f"mesh {sizes}: at most one axis may be -1")
    known = math.prod(s for s in sizes.values() if s != -1)
    if any(s == 0 or s < -1 for s in sizes.values()):
        raise PlanError(f"mesh {sizes}: sizes must be positive (or one -1)")
    if free:
        if num_devices % known:
            raise PlanError(f"mesh {sizes}: {num_devices} devices do not divide by {known}")
        sizes[free[0]] = num_devices // known
    if math.prod(sizes.values()) != num_devices:
        raise PlanError(
            f"mesh {sizes} needs {math.prod(sizes.values())} devices; the hardware has "
            f"{num_devices}"
        )
    return sizes


def micro_batches_for(
    rows: int, micro_batch_per_device: int, mesh: Mapping[str, int], num_devices: int
) -> int:
    """Micro-batches over which `rows` rows run with `micro_batch_per_device` rows on each
    batch shard: a micro-batch has micro_batch_per_device x data x fsdp rows (the tensor axis
    splits a row's heads and features, not the rows), so every device holds that many rows."""
    m = resolve_mesh(mesh, num_devices)
    return max(1, -(-int(rows) // (int(micro_batch_per_device) * m["data"] * m["fsdp"])))


def shard_factor(shape, logical_axes, rules, mesh_sizes: Mapping[str, int]) -> int:
    """Into how many pieces the rules cut an array on a mesh of these sizes (no devices needed:
    `logical_to_spec` only reads the mesh's axis sizes)."""
    spec = logical_to_spec(logical_axes, rules, shape, SimpleNamespace(shape=dict(mesh_sizes)))
    factor = 1
    for entry in spec:
        for axis in (entry,) if isinstance(entry, str) else (entry or ()):
            factor *= mesh_sizes[axis]
    return factor


def leaf_bytes_per_device(abstract, rules, mesh_sizes, dtype=None) -> list[int]:
    """Bytes of one device's shard of each leaf of an ArrayInfo tree (in `dtype` when given)."""
    out = []
    for a in jax.tree.leaves(abstract, is_leaf=is_info):
        size = int(np.prod(a.shape)) * jnp.dtype(dtype or a.dtype).itemsize
        out.append(-(-size // shard_factor(a.shape, a.logical_axes, rules, mesh_sizes)))
    return out


def tree_bytes_per_device(abstract, rules, mesh_sizes, dtype=None) -> int:
    """Bytes of one device's shards of an ArrayInfo tree (in `dtype` when given)."""
    return sum(leaf_bytes_per_device(abstract, rules, mesh_sizes, dtype))


def reference_bytes_per_device(abstract, rules, mesh_sizes, compute_dtype) -> int:
    """The frozen KL reference as the trainer holds it (`memjax.models.frozen.frozen_copy`:
    every leaf but the norm scales in the compute dtype)."""
    return frozen_bytes(abstract, leaf_bytes_per_device(abstract, rules, mesh_sizes), compute_dtype)


# ------------------------------------------------------------------------------ the plan


DEFAULT_PATHS = {
    "mesh": "mesh",
    "micro_batch": "train.micro_batch_per_device",
    "decode_batch": "rollout.decode_batch",
    "optimizer": "optimizer",
}


@dataclasses.dataclass(frozen=True)
class Workload:
    """What the plan depends on, read from a config (`workload_from_config`)."""

    cfg: DecoderConfig  # param_dtype: the train state's; dtype: compute
    mesh: dict[str, int]
    train_rules: Mapping
    sampling_rules: Mapping
    hardware: hw_lib.Hardware
    seq_len: int  # prompt + response tokens of one training row (and cache slots)
    micro_batch_per_device: int
    decode_batch: int  # global rows decoded at once
    reference: bool  # a frozen reference model for the KL term
    critic: bool  # PPO's value model
    vocab_chunk: int = 4096
    logprob_rows: int = 0  # rows of one chunk of the old / reference log-prob pass (0: none)
    prompt_len: int = 0  # the sampler's prefill length (0: no prefill planned)
    group_size: int = 1  # rollouts per prompt: a prefill covers decode_batch / group prompts
    prefill_chunk: int = 0  # the sampler's prefill columns per call (0: the prompt in one piece)
    donate_state: bool | None = None  # the train steps'; None: the platform's (donates_state)
    # Where the config keeps the mesh, micro-batch and decode batch (`JobFields.paths`).
    paths: Mapping = dataclasses.field(default_factory=lambda: dict(DEFAULT_PATHS), compare=False)
    mini_batch_rows: int = 0  # rows per update (0: unknown)

    @property
    def donates(self) -> bool:
        """Whether the train steps donate their state: as set, else as the trainer does on
        this hardware's platform."""
        if self.donate_state is not None:
            return self.donate_state
        return donates_state(self.hardware.accelerator.kind)

    @property
    def attention(self) -> str:
        """The attention implementation the job runs: the config's, else the hardware's."""
        if self.cfg.attention:
            return self.cfg.attention
        kind = self.hardware.accelerator.kind
        return {"tpu": "splash", "gpu": "cudnn"}.get(kind, "xla")


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    workload: Workload
    parts: dict[str, int]  # bytes per device
    persistent: int
    rollout: int
    train: int
    logprobs: int = 0

    @property
    def peak(self) -> int:
        return self.persistent + max(self.rollout, self.logprobs, self.train)

    @property
    def usable(self) -> int:
        return self.workload.hardware.usable_bytes

    @property
    def fits(self) -> bool:
        return self.peak <= self.usable

    def table(self) -> str:
        gib = lambda b: f"{b / hw_lib.GIB:8.2f}"
        w = self.workload
        lines = [
            f"{w.hardware.describe()}  mesh {w.mesh}  remat={w.cfg.remat}  "
            f"T={w.seq_len}  micro_batch/device={w.micro_batch_per_device}  "
            f"decode_batch={w.decode_batch}",
            f"{'part':<28}{'GiB/device':>10}",
        ]
        for name, b in self.parts.items():
            lines.append(f"{name:<28}{gib(b):>10}")
        lines += [
            f"{'persistent':<28}{gib(self.persistent):>10}",
            f"{'rollout phase':<28}{gib(self.rollout):>10}",
            f"{'log-prob phase':<28}{gib(self.logprobs):>10}",
            f"{'train phase':<28}{gib(self.train):>10}",
            f"{'peak':<28}{gib(self.peak):>10}",
            f"{'usable (of HBM)':<28}{gib(self.usable):>10}"
            f"  ({hw_lib.USABLE_FRACTION:.0%} of {w.hardware.accelerator.hbm_gib:g} GiB)",
            f"fits: {'yes' if self.fits else 'NO'}",
        ]
        return "\n".join(lines)


def _activation_parts(w: Workload) -> dict[str, int]:
    cfg, T = w.cfg, w.seq_len
    # A micro-batch has micro_batch_per_device rows on each data x fsdp shard
    # (`micro_batches_for`); the tensor axis splits their heads and features, not the rows.
    b = w.micro_batch_per_device
    L, D, N, K, H, F, V = (
        cfg.num_layers,
        cfg.embed_dim,
        cfg.num_heads,
        cfg.num_kv_heads,
        cfg.head_dim,
        cfg.mlp_dim,
        cfg.vocab_size,
    )
    t = w.mesh["tensor"]
    split = lambda n: n // t if n % t == 0 else n  # a dimension the tensor axis cannot split
    c = jnp.dtype(cfg.dtype).itemsize
    residual = b * T * D * c  # [b, T, D]
    # Matmul outputs: q [b,T,N,Hd], k and v [b,T,K,Hd], o-projection [b,T,D], gate and up
    # [b,T,F], down [b,T,D].
    dots = b * T * (split(N) * H + 2 * split(K) * H + 2 * D + 2 * split(F)) * c
    if cfg.lora is not None:  # s (x A) B per target: [b, T, r] and [b, T, out] more
        out = {"q": split(N) * H, "k": split(K) * H, "v": split(K) * H, "o": D, "down": D}
        dots += b * T * sum(cfg.lora.rank + out.get(t, split(F)) for t in cfg.lora.targets) * c
    # The rest of a layer: two RMSNorm outputs and the residual sum [b,T,D], RoPE'd q and k,
    # attention output [b,T,N,Hd], silu(gate) and the gated product [b,T,F].
    others = b * T * (3 * D + split(N) * H * 2 + split(K) * H + 2 * split(F)) * c
    # Neither implementation keeps scores across layers: a fused kernel's backward rebuilds
    # them, and so does the XLA one's (decoder._attention_core); both keep a few f32
    # statistics per query. While a layer runs, the XLA one holds one query block's scores
    # against every key.
    statistics = b * split(N) * T * FUSED_BYTES_PER_QUERY
    if w.attention == "xla":
        Q = query_block_size(cfg.attention_query_block, T)  # queries scored at once
        scores = b * split(N) * Q * T * ATTN_BYTES_PER_SCORE
    else:
        scores = statistics
    if cfg.remat == "full":
        saved = L * residual
    elif cfg.remat == "dots":
        saved = L * (residual + dots)
    else:
        saved = L * (residual + dots + others + statistics)
    layer = dots + others + scores
    layer_params = sum(
        int(np.prod(a.shape[1:]))
        for a in jax.tree.leaves(decoder_abstract(cfg)["layers"], is_leaf=is_info)
    )
    if cfg.lora is None:
        gathered = 2 * split_params(layer_params, t) * c  # the weights and their gradient
    else:  # the frozen weights need no gradient buffer; the adapters' weights and gradient
        adapter_params = sum(
            int(np.prod(a.shape[1:]))
            for a in jax.tree.leaves(lora_abstract(cfg)["layers"], is_leaf=is_info)
        )
        gathered = (split_params(layer_params, t) + 2 * split_params(adapter_params, t)) * c
    logits = LOGIT_SLABS * b * T * min(w.vocab_chunk, V) * 4 // t
    return {
        "activations: saved": saved,
        "activations: one layer": layer,
        "activations: layer weights": gathered,
        "activations: logits": logits + _vocab_table_copies(w) * vocab_table_bytes(w),
    }


def _vocab_table_copies(w: Workload) -> int:
    gpu = w.hardware.accelerator.kind == "gpu"
    return VOCAB_TABLE_COPIES_GPU if gpu else VOCAB_TABLE_COPIES


def vocab_table_bytes(w: Workload) -> int:
    """One gathered [V/t, D] vocabulary table in compute dtype, per device."""
    cfg, t = w.cfg, w.mesh["tensor"]
    V = cfg.vocab_size // t if cfg.vocab_size % t == 0 else cfg.vocab_size
    return V * cfg.embed_dim * jnp.dtype(cfg.dtype).itemsize


def buffers_apart(w: Workload) -> int:
    """The policy step's working-set bytes that a step not donating its state cannot keep in
    the new state's buffers, because each is larger than every one of them: the gathered
    vocabulary tables, when fsdp cuts the trained leaves finer than a table."""
    trained = lora_abstract(w.cfg) if w.cfg.lora is not None else decoder_abstract(w.cfg)
    largest = max(leaf_bytes_per_device(trained, normalize_rules(w.train_rules), w.mesh))
    table = vocab_table_bytes(w)
    return VOCAB_TABLE_COPIES * table if table > largest else 0


def _logprob_pass(w: Workload) -> int:
    """One device's working set in the forward-only log-prob pass, per chunk of rows."""
    if not w.logprob_rows:
        return 0
    cfg, T, t = w.cfg, w.seq_len, w.mesh["tensor"]
    r = -(-w.logprob_rows // (w.mesh["data"] * w.mesh["fsdp"]))
    c = jnp.dtype(cfg.dtype).itemsize
    F = cfg.mlp_dim // t if cfg.mlp_dim % t == 0 else cfg.mlp_dim
    N = cfg.num_heads // t if cfg.num_heads % t == 0 else cfg.num_heads
    layer = r * T * (cfg.embed_dim + F) * c
    if w.attention == "xla":
        layer += r * N * query_block_size(cfg.attention_query_block, T) * T * 4  # f32
    slab = r * T * min(w.vocab_chunk, cfg.vocab_size) * 4 // t
    # The embedding table gathered for the lookup and again for the unembedding (compute
    # dtype), and an f32 copy: fitted to the TPU compile of the chunked pass (3B: 3.14 GiB).
    V = cfg.vocab_size // t if cfg.vocab_size % t == 0 else cfg.vocab_size
    tables = V * cfg.embed_dim * (2 * c + 4)
    return layer + slab + tables


def _rollout_working_sets(w: Workload, sampler_layer: int, kv_per_row_slot: int) -> dict:
    """Prefill and decode-step temporaries per device (bytes), beyond the cache and logits."""
    cfg, t = w.cfg, w.mesh["tensor"]
    shards = w.mesh["data"] * w.mesh["fsdp"]
    rows = -(-w.decode_batch // shards)
    c = jnp.dtype(cfg.dtype).itemsize
    out = {"decode step": 2 * sampler_layer + DECODE_LOGIT_COPIES * rows * cfg.vocab_size * 4}
    if w.prompt_len:
        # A chunked prefill (memjax/sampling/chunk.py) holds one chunk's columns at a time,
        # and every chunk after the first runs the cached path, whatever the attention.
        chunked = 0 < w.prefill_chunk < w.prompt_len
        P = w.prefill_chunk if chunked else w.prompt_len
        prompts = -(-max(1, w.decode_batch // w.group_size) // shards)
        F = cfg.mlp_dim // t if cfg.mlp_dim % t == 0 else cfg.mlp_dim
        slab = prompts * P * (cfg.embed_dim + F) * c
        if w.attention == "xla" or chunked:  # the cached path: scores over every cache slot
            N = cfg.num_heads // t if cfg.num_heads % t == 0 else cfg.num_heads
            per_score = CHUNK_BYTES_PER_SCORE if chunked else ATTN_BYTES_PER_SCORE
            slab += prompts * N * P * w.seq_len * per_score
        out["prefill"] = slab + prompts * P * kv_per_row_slot
    return out


def split_params(n: int, t: int) -> int:
    return -(-n // t)


def _update_bytes(w: Workload, parts: dict, acts: dict, trained: int) -> int:
    """The train phase beyond the gradients: the activations and what the optimizer update
    needs, in `parts` as they are counted. `trained`: the bytes of the trained weights (and of
    each AdamW moment)."""
    parts.update(acts)
    if w.donates:
        copies = UPDATE_COPIES_GPU if w.hardware.accelerator.kind == "gpu" else UPDATE_COPIES
        parts["optimizer update"] = copies * trained
        return sum(acts.values()) + parts["optimizer update"]
    state = 3 * trained  # weights and both moments
    parts["new train state"] = state
    return undonated_step_bytes(acts, state, apart=buffers_apart(w))


def undonated_step_bytes(acts: dict[str, int], state: int, *, apart: int = 0) -> int:
    """Outputs + temporaries of a train step that does not donate its `state` bytes, beyond
    its gradients: the new state and the saved activations; the layer, weights and logits
    working sets live in the new state's buffers until the update writes them, so only what
    exceeds the new state counts, except `apart`: working-set buffers (part of `acts`) too
    large for any of the new state's buffers, counted in full."""
    saved = acts["activations: saved"]
    transient = sum(acts.values()) - saved - apart
    return saved + state + apart + max(0, transient - state)


def plan(w: Workload) -> MemoryPlan:
    cfg = w.cfg
    tr, sr = normalize_rules(w.train_rules), normalize_rules(w.sampling_rules)
    abstract = decoder_abstract(cfg)
    param_dtype = cfg.weight_dtype
    policy = tree_bytes_per_device(abstract, tr, w.mesh)
    trained = policy  # bytes of the policy's trained parameters (and of each AdamW moment)
    parts = {"policy weights": policy}
    if cfg.lora is not None:
        trained = tree_bytes_per_device(lora_abstract(cfg), tr, w.mesh)
        parts["LoRA adapters"] = trained
    parts["optimizer (AdamW m, v)"] = 2 * trained
    critic = 0
    if w.reference and cfg.lora is None:  # LoRA's reference is the base, adapters off
        parts["reference model"] = reference_bytes_per_device(abstract, tr, w.mesh, cfg.dtype)
    if w.critic:
        if cfg.lora is None:
            critic = tree_bytes_per_device(critic_abstract(cfg), tr, w.mesh, param_dtype)
        else:  # adapters and head; the backbone is the policy's frozen base
            critic = tree_bytes_per_device(critic_trainable_abstract(cfg), tr, w.mesh)
        parts["critic weights + AdamW"] = 3 * critic
    parts["sampler weights"] = tree_bytes_per_device(abstract, sr, w.mesh, cfg.dtype)
    persistent = sum(parts.values())

    # k and v [L, B, K, S, Hd] in compute dtype, cut as the sampling rules place them.
    kv = cache_abstract(cfg, w.decode_batch, w.seq_len)["k"]
    kv_shards = shard_factor(kv.shape, kv.logical_axes, sr, w.mesh)
    batch_shards = w.mesh["data"] * w.mesh["fsdp"]
    rows_per_device = -(-w.decode_batch // batch_shards)
    parts["KV cache"] = -(-cache_bytes(cfg, w.decode_batch, w.seq_len) // kv_shards)
    parts["decode logits"] = rows_per_device * cfg.vocab_size * 4
    sampler_layer = tree_bytes_per_device(abstract["layers"], sr, w.mesh, cfg.dtype)
    sampler_layer //= cfg.num_layers
    kv_per_row_slot = parts["KV cache"] * batch_shards // max(w.decode_batch, 1) // w.seq_len
    working = _rollout_working_sets(w, sampler_layer, kv_per_row_slot)
    parts.update({f"rollout: {k}": v for k, v in working.items()})
    rollout = parts["KV cache"] + parts["decode logits"] + max(working.values())

    parts["gradients"] = max(trained, critic)
    acts = _activation_parts(w)
    train = parts["gradients"] + _update_bytes(w, parts, acts, max(trained, critic))
    logprobs = _logprob_pass(w)
    if logprobs:
        parts["log-prob pass (a chunk)"] = logprobs
    return MemoryPlan(w, parts, persistent, rollout, train, logprobs)


# ------------------------------------------------------------------------------ from a config


def _section(config, name, default=None):
    return config.get(name, default)


def decoder_config_from(config) -> DecoderConfig:
    model = _section(config, "model")
    if model is None or "preset" not in model:
        raise PlanError("config.model.preset is missing (a name from memjax.models.presets)")
    # Memory-R1 keeps its trainer's sections (lora among them) under `rl`.
    trainer = config.rl if "rl" in config else config
    lora_path = "rl.lora" if "rl" in config else "lora"
    try:
        return presets.decoder_config(
            model.preset,
            param_dtype=str(_section(model, "param_dtype", "float32")),
            compute_dtype=str(_section(model, "compute_dtype", "bfloat16")),
            remat=str(_section(model, "remat", "full")),
            attention=str(_section(model, "attention", "")),
            lora=lora_config_from(_section(trainer, "lora")),
        )
    except presets.UnknownPresetError as e:
        raise PlanError(f"config.model.preset: {e}") from None
    except ValueError as e:  # a bad lora section
        raise PlanError(f"config.{lora_path}: {e}") from None


@dataclasses.dataclass(frozen=True)
class JobFields:
    """What the planner and the dry run read of a job's config, wherever its schema keeps it,
    with the dotted path of each field a user sets (for the changes `suggest` names)."""

    algorithm: str  # "grpo", "ppo", "multi_context_grpo"
    prompt_len: int
    response_len: int
    decoded_len: int  # of a row's response tokens, those the model writes (not tool output)
    group_size: int
    prompts_per_step: int  # questions per step
    mini_batch_rows: int  # rows per update (MemSearcher: of first contexts)
    micro_batch_per_device: int
    decode_batch: int
    num_steps: int  # 0: not fixed by the config (an epoch over the data)
    epochs: int  # passes over a step's rows
    mesh: dict
    kl_coef: float
    learning_rate: float
    vocab_chunk: int
    prefill_chunk: int
    temperature: float
    sections: dict  # "loss", "optimizer", "critic_optimizer": the trainer's sections (and its
    # "value_clip" where the config sets one)
    paths: dict  # "mesh", "micro_batch", "decode_batch", "optimizer": where the user sets them


def job_fields(config) -> JobFields:
    """The RL job's sizes from a Memory-R1 config (its trainer section `rl`) or a MemSearcher
    one (`train`, `rollout`, `mesh`)."""
    if "rl" in config:
        return _memory_r1_fields(config)
    return _memsearcher_fields(config)


def _memory_r1_fields(config) -> JobFields:
    rl = config.rl
    hardware = hw_lib.from_config(_section(config, "hardware"))
    mesh = resolve_mesh(dict(_section(rl, "mesh") or {}), hardware.num_devices)
    response = int(rl.sampling.max_new_tokens)
    group, prompts = int(rl.group_size), int(rl.prompts_per_step)
    rows = prompts * group // max(1, int(_section(rl, "mini_batches", 1)))
    per_device = -(-rows // (int(rl.micro_batches) * mesh["data"] * mesh["fsdp"]))
    return JobFields(
        algorithm=str(rl.algo),
        prompt_len=int(rl.seq_len) - response,
        response_len=response,
        decoded_len=response,
        group_size=group,
        prompts_per_step=prompts,
        mini_batch_rows=rows,
        micro_batch_per_device=per_device,
        # Without rl.decode_batch the sampler decodes a step's rows at once.
        decode_batch=int(_section(rl, "decode_batch", 0) or prompts * group),
        num_steps=int(rl.num_steps),
        epochs=int(_section(rl, "epochs", 1)),
        mesh=mesh,
        kl_coef=float(rl.loss.kl_coef),
        learning_rate=float(rl.optimizer.learning_rate),
        vocab_chunk=int(_section(rl, "vocab_chunk", 4096)),
        prefill_chunk=int(_section(rl.sampling, "prefill_chunk", None) or 0),
        temperature=float(_section(rl.sampling, "temperature", 1.0)),
        sections={
            **{
                name: dict(_section(rl, name) or {})
                for name in ("loss", "optimizer", "critic_optimizer")
            },
            **({"value_clip": rl.value_clip} if "value_clip" in rl else {}),
        },
        paths={
            "mesh": "rl.mesh",
            "micro_batch": "rl.micro_batches",
            "decode_batch": "rl.decode_batch",
            "optimizer": "rl.optimizer",
        },
    )


def _memsearcher_fields(config) -> JobFields:
    rollout, train = config.rollout, config.train
    hardware = hw_lib.from_config(_section(config, "hardware"))
    mesh = resolve_mesh(dict(_section(config, "mesh") or {}), hardware.num_devices)
    group = int(_section(rollout, "group_size", 1))
    mini = int(_section(train, "mini_batch_size", _section(train, "batch_size", 1)))
    return JobFields(
        algorithm=str(_section(train, "algorithm", "grpo")),
        prompt_len=int(rollout.max_prompt_length),
        response_len=int(rollout.max_response_length),
        # A context's two calls (action, memory update); the passages between are prefilled.
        decoded_len=min(
            int(rollout.max_response_length), 2 * int(_section(rollout, "max_tokens_per_call", 0))
        )
        or int(rollout.max_response_length),
        group_size=group,
        prompts_per_step=int(_section(train, "batch_size", mini)),
        mini_batch_rows=mini * group,
        micro_batch_per_device=int(train.micro_batch_per_device),
        # 0: the sampler decodes a step's trajectories at once.
        decode_batch=int(_section(rollout, "decode_batch", 0) or 0)
        or int(_section(train, "batch_size", mini)) * group,
        num_steps=int(_section(train, "num_steps", 0) or 0),
        epochs=int(_section(train, "ppo_epochs", 1)),
        mesh=mesh,
        kl_coef=float(_section(_section(config, "loss", {}), "kl_coef", 0.0)),
        learning_rate=float(_section(_section(config, "optimizer", {}), "learning_rate", 0.0)),
        vocab_chunk=int(_section(train, "vocab_chunk", 4096)),
        # Unset is the sampler's default off the CPU backend, which this plans for: one piece.
        prefill_chunk=int(_section(rollout, "prefill_chunk", None) or 0),
        temperature=float(_section(rollout, "temperature", 1.0)),
        sections={
            name: dict(_section(config, name) or {})
            for name in ("loss", "optimizer", "critic_optimizer")
        },
        paths={
            "mesh": "mesh",
            "micro_batch": "train.micro_batch_per_device",
            "decode_batch": "rollout.decode_batch",
            "optimizer": "optimizer",
        },
    )


def workload_from_config(config, **overrides) -> Workload:
    """The Workload of a paper config (model.preset, hardware, rules and the job's sizes)."""
    cfg = decoder_config_from(config)
    hardware = hw_lib.from_config(_section(config, "hardware"))
    f = job_fields(config)
    rules = _section(config, "rules") or {}
    kw = dict(
        cfg=cfg,
        mesh=f.mesh,
        train_rules=normalize_rules(dict(_section(rules, "train", TRAIN_RULES))),
        sampling_rules=normalize_rules(dict(_section(rules, "sampling", SAMPLING_RULES))),
        hardware=hardware,
        seq_len=f.prompt_len + f.response_len,
        micro_batch_per_device=f.micro_batch_per_device,
        decode_batch=f.decode_batch,
        reference=f.kl_coef > 0,
        critic=f.algorithm == "ppo",
        vocab_chunk=f.vocab_chunk,
        # The old / reference log-prob pass runs in chunks of this many rows (logprobs.py).
        logprob_rows=LOGPROB_ROWS_PER_DEVICE * f.mesh["data"] * f.mesh["fsdp"],
        prompt_len=bucket_length(f.prompt_len),
        group_size=f.group_size,
        prefill_chunk=f.prefill_chunk,
        paths=f.paths,
        mini_batch_rows=f.mini_batch_rows,
    )
    kw.update(overrides)
    return Workload(**kw)


def workload_overrides(
    w: Workload,
    *,
    hardware: hw_lib.Hardware | None = None,
    mesh: str = "",
    micro_batch_per_device: int = 0,
    decode_batch: int = 0,
    prefill_chunk: int = 0,
    **cfg_fields,
) -> dict:
    """The Workload fields a command line changes (tools/plan_memory.py, tools/aot_check.py);
    unset values (None, "", 0) change nothing.

    hardware: another target; with another device count the mesh is laid out again over it
        (fsdp takes the devices, tensor is kept). mesh: "data,fsdp,tensor", one may be -1.
    cfg_fields: DecoderConfig fields (remat, attention, param_dtype, lora).
    A new mesh also resizes the log-prob pass's chunk, which follows the data-parallel size.
    """
    out: dict = {}
    hardware = hardware or w.hardware
    if hardware != w.hardware:
        out["hardware"] = hardware
    sizes = None
    if mesh:
        sizes = dict(zip(MESH_AXES, map(int, mesh.split(","))))
    elif hardware.num_devices != w.hardware.num_devices:
        sizes = {"data": 1, "fsdp": -1, "tensor": w.mesh["tensor"]}
    if sizes is not None:
        resolved = resolve_mesh(sizes, hardware.num_devices)
        out["mesh"] = resolved
        out["logprob_rows"] = LOGPROB_ROWS_PER_DEVICE * resolved["data"] * resolved["fsdp"]
    if micro_batch_per_device:
        out["micro_batch_per_device"] = micro_batch_per_device
    if decode_batch:
        out["decode_batch"] = decode_batch
    if prefill_chunk:
        out["prefill_chunk"] = prefill_chunk
    changes = {k: v for k, v in cfg_fields.items() if v}
    if changes and w.cfg.replace(**changes) != w.cfg:
        out["cfg"] = w.cfg.replace(**changes)
    return out


def plan_memory(config, **overrides) -> MemoryPlan:
    return plan(workload_from_config(config, **overrides))


# ------------------------------------------------------------------------------ validation


def validate(config) -> list[str]:
    """Problems that would stop the config at scale (empty: none). Checks the shape preset,
    hardware, mesh, both rules tables against every parameter, cache and activation axis,
    and that the batch sizes split over the mesh."""
    problems = []
    try:
        w = workload_from_config(config)
    except (PlanError, hw_lib.HardwareError, ShardingError, KeyError, AttributeError) as e:
        return [f"{type(e).__name__}: {e}"]
    cfg = w.cfg
    trees = {
        "train": [decoder_abstract(cfg)] + ([critic_abstract(cfg)] if w.critic else []),
        "sampling": [decoder_abstract(cfg), cache_abstract(cfg, w.decode_batch, w.seq_len)],
    }
    if cfg.lora is not None:
        trees["train"].append(lora_abstract(cfg))
    activations = [("batch", "seq", None), ("batch", "seq", "heads", None), ("batch", "seq", "mlp")]
    for role, rules in (("train", w.train_rules), ("sampling", w.sampling_rules)):
        try:
            for tree in trees[role]:
                for a in jax.tree.leaves(tree, is_leaf=is_info):
                    shard_factor(a.shape, a.logical_axes, rules, w.mesh)
            for axes in activations:
                logical_to_spec(axes, rules)
        except ShardingError as e:
            problems.append(f"rules.{role}: {e}")
    shards = w.mesh["data"] * w.mesh["fsdp"]
    if w.decode_batch % shards:
        problems.append(
            f"{w.paths['decode_batch']}={w.decode_batch} does not split over data x fsdp = {shards}"
        )
    if w.micro_batch_per_device < 1:
        problems.append(f"{w.paths['micro_batch']}: fewer than one row per device")
    if w.seq_len > cfg.max_position_embeddings:
        problems.append(
            f"prompt + response = {w.seq_len} tokens exceeds the model's "
            f"max_position_embeddings={cfg.max_position_embeddings}"
        )
    lr = job_fields(config).learning_rate
    if cfg.param_dtype == "bfloat16" and cfg.lora is None and 0 < lr < 1e-4:
        problems.append(
            f"model.param_dtype=bfloat16 with learning_rate={lr:g}: updates round away in "
            "bf16; train f32 master weights (param_dtype=float32, compute_dtype=bfloat16)"
        )
    return problems


# ------------------------------------------------------------------------------ what to change


def _micro_override(w: Workload, per_device: int, mesh: Mapping, devices: int) -> str:
    """The override that gives `per_device` rows per device on this mesh: the rows per device
    itself, or (Memory-R1's `rl.micro_batches`) the number of micro-batches it makes."""
    path = w.paths["micro_batch"]
    if path.endswith("micro_batch_per_device"):
        return f"--config.{path}={per_device}"
    return f"--config.{path}={micro_batches_for(w.mini_batch_rows, per_device, mesh, devices)}"


def mesh_override(w: Workload, mesh: Mapping, devices: int) -> str:
    """The overrides that run the workload on `mesh` over `devices` with its rows per device:
    the mesh's sizes, and Memory-R1's micro-batch count, which follows the mesh."""
    sizes = " ".join(f"--config.{w.paths['mesh']}.{a}={s}" for a, s in mesh.items())
    if w.paths["micro_batch"].endswith("micro_batch_per_device"):
        return sizes
    return f"{sizes} {_micro_override(w, w.micro_batch_per_device, mesh, devices)}"


def _changes(w: Workload):
    """Candidate changes, mildest first: (description, override, new workload) or None."""
    n = w.hardware.num_devices
    if w.cfg.remat != "full":
        yield (
            "remat=full",
            "--config.model.remat=full",
            dataclasses.replace(w, cfg=w.cfg.replace(remat="full")),
        )
    if w.micro_batch_per_device > 1:
        b = w.micro_batch_per_device // 2
        yield (
            f"micro_batch_per_device={b}",
            _micro_override(w, b, w.mesh, n),
            dataclasses.replace(w, micro_batch_per_device=b),
        )
    shards = w.mesh["data"] * w.mesh["fsdp"]
    if w.decode_batch // 2 >= shards and (w.decode_batch // 2) % shards == 0:
        d = w.decode_batch // 2
        yield (
            f"decode_batch={d}",
            f"--config.{w.paths['decode_batch']}={d}",
            dataclasses.replace(w, decode_batch=d),
        )
    # Move a factor 2 from data/fsdp to tensor: shards the sampler's weights, the KV cache's
    # heads and the attention scores, which fsdp does not.
    donor = "data" if w.mesh["data"] % 2 == 0 else "fsdp" if w.mesh["fsdp"] % 2 == 0 else None
    t2 = w.mesh["tensor"] * 2
    if donor and w.cfg.num_kv_heads % t2 == 0 and w.decode_batch % (shards // 2) == 0:
        mesh = {**w.mesh, donor: w.mesh[donor] // 2, "tensor": t2}
        yield (f"mesh {mesh}", mesh_override(w, mesh, n), dataclasses.replace(w, mesh=mesh))
    # More devices, as more fsdp (whole hosts).
    hw = w.hardware
    mesh = {**w.mesh, "fsdp": w.mesh["fsdp"] * 2}
    yield (
        f"{2 * n} x {hw.accelerator.name}, fsdp={mesh['fsdp']}",
        f"--config.hardware.num_devices={2 * n} {mesh_override(w, mesh, 2 * n)}",
        dataclasses.replace(w, hardware=hw_lib.Hardware(hw.accelerator, 2 * n), mesh=mesh),
    )


def suggest(w: Workload, max_changes: int = 8) -> tuple[list[tuple[str, str]], MemoryPlan]:
    """Changes (description, command-line override) that make the workload fit, mildest first,
    applied greedily: each step takes the first candidate that lowers the peak."""
    current, steps = plan(w), []
    while not current.fits and len(steps) < max_changes:
        for desc, override, nw in _changes(current.workload):
            candidate = plan(nw)
            if candidate.peak < current.peak:
                steps.append((desc, override))
                current = candidate
                break
        else:
            break
    return steps, current


def best_plan_on(w: Workload, hardware: hw_lib.Hardware) -> MemoryPlan:
    """The lowest peak of the workload on `hardware` over meshes {data 1, fsdp, tensor t}, t a
    power of two dividing the devices and the KV heads (the micro-batch per device kept)."""
    n, plans = hardware.num_devices, []
    for t in (1, 2, 4, 8):
        if n % t or w.cfg.num_kv_heads % t:
            continue
        mesh = {"data": 1, "fsdp": n // t, "tensor": t}
        rows = LOGPROB_ROWS_PER_DEVICE * (n // t)
        plans.append(plan(dataclasses.replace(w, hardware=hardware, mesh=mesh, logprob_rows=rows)))
    return min(plans, key=lambda p: p.peak)


def paper_hardware_plan(config) -> MemoryPlan | None:
    """Where a config needs more devices than its paper trained on
    (`hardware.paper_num_devices`): its best plan on the paper's count; else None."""
    section = _section(config, "hardware") or {}
    paper = int(_section(section, "paper_num_devices", 0) or 0)
    w = workload_from_config(config)
    if not paper or paper == w.hardware.num_devices:
        return None
    return best_plan_on(w, hw_lib.Hardware(w.hardware.accelerator, paper))


__all__ = [
    "best_plan_on",
    "paper_hardware_plan",
    "ATTN_BYTES_PER_SCORE",
    "VOCAB_TABLE_COPIES",
    "buffers_apart",
    "undonated_step_bytes",
    "Workload",
    "JobFields",
    "job_fields",
    "micro_batches_for",
    "mesh_override",
    "reference_bytes_per_device",
    "MemoryPlan",
    "PlanError",
    "resolve_mesh",
    "shard_factor",
    "tree_bytes_per_device",
    "plan",
    "plan_memory",
    "workload_from_config",
    "workload_overrides",
    "decoder_config_from",
    "validate",
    "suggest",
]
