"""The decoder family (Llama 3.x, Qwen2/2.5) as pure functions over a parameter pytree.

    abstract = decoder_abstract(cfg)                      # ArrayInfo tree
    params = init_params(abstract, key)
    logits, cache = forward(params, tokens, positions, cfg, token_mask=mask)

Layers are stacked on a leading `layers` axis and run with `lax.scan`, so compile time does not
grow with depth. Attention is grouped-query; RoPE uses the rotate-half layout; Qwen2 adds q/k/v
biases; embeddings may be tied. Logits and softmax are always f32.

Parameter layout (L layers, D embed, N heads, K kv heads, Hd head dim, F mlp, V vocab):
    embed            [V, D]
    layers/attn_norm [L, D]        layers/mlp_norm [L, D]
    layers/q         [L, D, N, Hd] layers/q_bias   [L, N, Hd]  (qwen2)
    layers/k, v      [L, D, K, Hd] layers/k_bias, v_bias [L, K, Hd]  (qwen2)
    layers/o         [L, N, Hd, D]
    layers/gate, up  [L, D, F]     layers/down     [L, F, D]
    final_norm       [D]
    lm_head          [D, V]        (untied only)
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from memjax.models import embedding, fused_attention, slot_attention
from memjax.models.config import DecoderConfig
from memjax.models.kv_cache import KVCache
from memjax.models.low_rank import ADAPTERS_KEY, low_rank_update
from memjax.models.params import ArrayInfo, normal_init, ones_init, zeros_init
from memjax.models.rope import apply_rope, inverse_frequencies, rope_tables
from memjax.parallel import constrain

_MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)  # finite, so fully padded rows give no NaN


def decoder_abstract(cfg: DecoderConfig) -> dict:
    L, D, N, K, H, F, V = (
        cfg.num_layers,
        cfg.embed_dim,
        cfg.num_heads,
        cfg.num_kv_heads,
        cfg.head_dim,
        cfg.mlp_dim,
        cfg.vocab_size,
    )
    dt = cfg.weight_dtype
    init = normal_init(0.02)
    layers = {
        "attn_norm": ArrayInfo((L, D), dt, ("layers", "norm"), ones_init),
        "q": ArrayInfo((L, D, N, H), dt, ("layers", "embed", "heads", "head_dim"), init),
        "k": ArrayInfo((L, D, K, H), dt, ("layers", "embed", "kv_heads", "head_dim"), init),
        "v": ArrayInfo((L, D, K, H), dt, ("layers", "embed", "kv_heads", "head_dim"), init),
        "o": ArrayInfo((L, N, H, D), dt, ("layers", "heads", "head_dim", "embed"), init),
        "mlp_norm": ArrayInfo((L, D), dt, ("layers", "norm"), ones_init),
        "gate": ArrayInfo((L, D, F), dt, ("layers", "embed", "mlp"), init),
        "up": ArrayInfo((L, D, F), dt, ("layers", "embed", "mlp"), init),
        "down": ArrayInfo((L, F, D), dt, ("layers", "mlp", "embed"), init),
    }
    if cfg.qkv_bias:
        layers["q_bias"] = ArrayInfo((L, N, H), dt, ("layers", "heads", "head_dim"), zeros_init)
        layers["k_bias"] = ArrayInfo((L, K, H), dt, ("layers", "kv_heads", "head_dim"), zeros_init)
        layers["v_bias"] = ArrayInfo((L, K, H), dt, ("layers", "kv_heads", "head_dim"), zeros_init)
    tree = {
        "embed": ArrayInfo((V, D), dt, ("vocab", "embed"), init),
        "layers": layers,
        "final_norm": ArrayInfo((D,), dt, ("norm",), ones_init),
    }
    if not cfg.tie_embeddings:
        tree["lm_head"] = ArrayInfo((D, V), dt, ("embed", "vocab"), init)
    return tree


def rms_norm(x: jax.Array, scale: jax.Array, eps: float) -> jax.Array:
    """RMSNorm computed in f32 (as transformers does), returned in x's dtype."""
    xf = x.astype(jnp.float32)
    xf = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (scale.astype(jnp.float32) * xf).astype(x.dtype)


def attention(q, k, v, mask, cfg: DecoderConfig, mesh: Mesh | None = None, rules=None):
    """Grouped-query causal self-attention over T tokens, by `cfg.attention`.

    q: [B, T, N, Hd]; k, v: [B, T, K, Hd]; mask: [B, T, T] bool (True = may attend): causal
    and padding, as `forward_hidden` builds it for the XLA path. Returns [B, T, N, Hd].

    The fused kernels (splash on TPU, cuDNN on GPU; `fused_attention`) take the padding as a
    token mask, the mask's last row (the last query sees every real key): `forward_hidden`
    hands them that row alone, [B, 1, T].
    """
    implementation = fused_attention.resolve(cfg.attention, mesh)
    if implementation == "splash":
        return fused_attention.splash_attention(q, k, v, mask[:, -1, :], mesh=mesh, rules=rules)
    if implementation == "cudnn":
        return fused_attention.cudnn_attention(q, k, v, mask[:, -1, :])
    return causal_attention(q, k, v, mask, cfg.attention_query_block)


def causal_attention(q, k, v, mask, query_block: int) -> jax.Array:
    """`xla_attention` for causal self-attention, one block of queries at a time.

    q: [B, T, N, Hd]; k, v: [B, T, K, Hd]; mask: [B, T, T], causal (nothing above the
    diagonal). Returns [B, T, N, Hd]. Queries [a, b) see no key at or past b, so their block
    scores keys [0, b) only: ~(C + 1) / 2C of the square for C blocks (the speed-up:
    `tools/bench.py causal_blocks`, docs/results.md).
    Each block is exact: the keys it skips were masked (probability 0). A padding query (a
    fully masked row) averages the values of its block's keys instead of all T; nothing reads
    a padding position's output.
    """
    if query_block_size(query_block, q.shape[1]) == q.shape[1]:
        return xla_attention(q, k, v, mask)
    q = _grouped_queries(q, k.shape[2])  # [B, K, G, T, Hd]
    k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # [B, K, T, Hd]
    return _merged_heads(_causal_blocks(q, k, v, mask, query_block))


def query_block_size(query_block: int, T: int) -> int:
    """Queries per block over T queries: `query_block` when it splits them (> 0 and < T),
    else T (one piece). The memory planner counts the XLA attention's scores by it."""
    return query_block if 0 < query_block < T else T


def _causal_blocks(q, k, v, mask, query_block: int, prefix=None) -> jax.Array:
    """q: [B, K, G, T, Hd] (pre-scaled); k, v: [B, K, T, Hd]; mask: [B, T, T], causal.
    prefix: None, or (k_old, v_old, old_valid) ([B, K, S, Hd] twice and [B, S]): keys that
    come before the T tokens, which every query may see (`cached_attention`'s cache).
    Returns [B, K, G, T, Hd]: each block of queries over the prefix and the keys up to its
    end, through `_attention_core` (whose backward keeps no scores)."""
    B, T = mask.shape[:2]
    if prefix is not None:
        k_old, v_old, old_valid = prefix
    outs = []
    for start in range(0, T, query_block):
        end = min(start + query_block, T)
        keys, values, seen = k[:, :, :end], v[:, :, :end], mask[:, start:end, :end]
        if prefix is not None:
            keys = jnp.concatenate([k_old, keys.astype(k_old.dtype)], axis=2)  # [B, K, S+end, Hd]
            values = jnp.concatenate([v_old, values.astype(v_old.dtype)], axis=2)
            old_seen = jnp.broadcast_to(old_valid[:, None, :], (B, end - start, old_valid.shape[1]))
            seen = jnp.concatenate([old_seen, seen], axis=2)  # [B, end - start, S + end]
        outs.append(_attention_core(q[:, :, :, start:end], keys, values, seen))
    return jnp.concatenate(outs, axis=3)


def xla_attention(q, k, v, mask) -> jax.Array:
    """Grouped-query attention in XLA ops. q: [B, T, N, Hd]; k, v: [B, S, K, Hd];
    mask: [B, T, S] bool. Returns [B, T, N, Hd]. Scores and softmax in f32.

    The backward pass recomputes the scores (`_attention_core`) rather than saving them per
    layer: L x B x N x T x S floats of residuals not written, for one more QK^T.
    """
    q = _grouped_queries(q, k.shape[2])
    out = _attention_core(q, k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), mask)
    return _merged_heads(out)


def _grouped_queries(q: jax.Array, num_kv_heads: int) -> jax.Array:
    """[B, T, N, Hd] -> [B, K, G, T, Hd], scaled by Hd^-0.5. In this order both attention
    products are plain batched GEMMs over (B, K): the [B, K, G, T, S] scores are written as
    stored and never transposed (the transpose is paid on the small q instead)."""
    B, T, N, H = q.shape
    q = (q * jnp.asarray(H**-0.5, q.dtype)).reshape(B, T, num_kv_heads, N // num_kv_heads, H)
    return q.transpose(0, 2, 3, 1, 4)


def _merged_heads(out: jax.Array) -> jax.Array:
    """[B, K, G, T, Hd] -> [B, T, N, Hd]."""
    B, K, G, T, H = out.shape
    return out.transpose(0, 3, 1, 2, 4).reshape(B, T, K * G, H)


@jax.custom_vjp
def _attention_core(q, k, v, mask) -> jax.Array:
    """q: [B, K, G, T, Hd] (pre-scaled); k, v: [B, K, S, Hd]; mask: [B, T, S] -> [B, K, G, T, Hd].

    The backward pass is FlashAttention's: it keeps only the output and the softmax's max and
    log-sum per query, rebuilds the probabilities with one QK^T, and takes the softmax
    correction from rowsum(dO * O) ([B, K, G, T]) instead of reducing dP * P over
    [B, K, G, T, S].
    """
    return _attention_core_fwd(q, k, v, mask)[0]


def _masked_scores(q, k, mask):
    scores = jnp.einsum("bkgth,bksh->bkgts", q, k, preferred_element_type=jnp.float32)
    return jnp.where(mask[:, None, None, :, :], scores, _MASKED)  # [B, K, G, T, S]


def _attention_core_fwd(q, k, v, mask):
    scores = _masked_scores(q, k, mask)
    m = scores.max(axis=-1, keepdims=True)
    e = jnp.exp(scores - m)
    total = e.sum(axis=-1, keepdims=True)
    # Normalised after the PV GEMM: [B, K, G, T, Hd] divisions instead of [B, K, G, T, S].
    out = (jnp.einsum("bkgts,bksh->bkgth", e.astype(v.dtype), v) / total).astype(v.dtype)
    # The max and the log-sum separately: m + log(total) would round log(total) away when m is
    # the mask value (a fully masked row), and the rebuilt probabilities would not sum to 1.
    return out, (q, k, v, mask, out, m, jnp.log(total))


def _attention_core_bwd(residuals, d_out):
    q, k, v, mask, out, m, log_total = residuals
    # Fully masked (padding) rows are uniform, as the forward's softmax made them (d_v sees it).
    probs = jnp.exp(_masked_scores(q, k, mask) - m - log_total)  # [B, K, G, T, S] f32
    d_v = jnp.einsum("bkgts,bkgth->bksh", probs.astype(v.dtype), d_out)
    d_probs = jnp.einsum("bkgth,bksh->bkgts", d_out, v, preferred_element_type=jnp.float32)
    row = (d_out.astype(jnp.float32) * out.astype(jnp.float32)).sum(axis=-1, keepdims=True)
    # Masked scores were constants in the forward, so no gradient may reach q or k through
    # them. In a row with any visible key their probabilities are exactly 0 already; a fully
    # masked row is switched off whole ([B, 1, 1, T, 1], no extra pass over the scores).
    row_visible = mask.any(axis=-1)[:, None, None, :, None]
    d_scores = (probs * (d_probs - row) * row_visible).astype(q.dtype)
    d_q = jnp.einsum("bkgts,bksh->bkgth", d_scores, k)
    d_k = jnp.einsum("bkgts,bkgth->bksh", d_scores, q)
    return d_q, d_k, d_v, None


_attention_core.defvjp(_attention_core_fwd, _attention_core_bwd)


def cached_attention(
    q, k_new, v_new, new_mask, k_old, v_old, old_valid, query_block: int = 0
) -> jax.Array:
    """Attention of T new queries over S cached slots plus the T new keys themselves.

    q: [B, T, N, Hd]; k_new, v_new: [B, K, T, Hd]; new_mask: [B, T, T] (causal, not padding);
    k_old, v_old: [B, K, S, Hd] (a layer of the cache); old_valid: [B, S].
    Returns [B, T, N, Hd]. Scores and softmax in f32.

    The two score blocks share one softmax (a common max and denominator), which equals a
    softmax over their concatenation. Keeping the cache read-only here is what makes decoding
    cheap: the new keys are written into the cache once per step after the layers, instead of
    each layer updating (and XLA copying) the cache buffer. Einsum orders are chosen so XLA on
    CPU reads the cache as stored, without transposed copies.

    With T > query_block > 0 (a training row's remainder after its shared prompt), the new
    tokens attend by query blocks as in `causal_attention`, each block over the whole cache
    and the new keys up to its end.
    """
    q = _grouped_queries(q, k_new.shape[1])  # [B, K, G, T, Hd]
    if query_block_size(query_block, q.shape[3]) < q.shape[3]:
        prefix = (k_old, v_old, old_valid)
        return _merged_heads(_causal_blocks(q, k_new, v_new, new_mask, query_block, prefix))
    s_old = jnp.einsum("bkgth,bksh->bkgts", q, k_old, preferred_element_type=jnp.float32)
    s_new = jnp.einsum("bkgth,bksh->bkgts", q, k_new, preferred_element_type=jnp.float32)
    s_old = jnp.where(old_valid[:, None, None, None, :], s_old, _MASKED)  # [B, K, G, T, S]
    s_new = jnp.where(new_mask[:, None, None, :, :], s_new, _MASKED)  # [B, K, G, T, T]
    m = jnp.maximum(s_old.max(axis=-1, keepdims=True), s_new.max(axis=-1, keepdims=True))
    p_old = jnp.exp(s_old - m)
    p_new = jnp.exp(s_new - m)
    denom = p_old.sum(axis=-1, keepdims=True) + p_new.sum(axis=-1, keepdims=True)
    out = jnp.einsum("bkgts,bksh->bkgth", p_old.astype(v_old.dtype), v_old)
    out = out + jnp.einsum("bkgts,bksh->bkgth", p_new.astype(v_new.dtype), v_new)
    return _merged_heads((out / denom).astype(v_old.dtype))  # normalised after the GEMMs


def attention_over_cache(q, k, v, mask) -> jax.Array:
    """q: [B, T, N, Hd]; k, v: [B, K, S, Hd] (a layer of the cache, new tokens already in);
    mask: [B, T, S]. Returns [B, T, N, Hd]. Scores and softmax in f32."""
    return _merged_heads(_attention_core(_grouped_queries(q, k.shape[1]), k, v, mask))


def _layer(x, layer, cos, sin, mask, cache_kv, cache_valid, cfg, mesh, rules):
    """One transformer block. x: [B, T, D].

    Without a cache, `mask` is [B, T, T] and the block returns (x, None). With one, cache_kv is
    this layer's old (k, v) [B, K, S, Hd] (read only), cache_valid [B, S], `mask` covers the new
    tokens among themselves, and the block returns (x, (k, v)): the new tokens' [B, K, T, Hd],
    for the caller to write into the cache. With `cache_valid` a write index ([] shared, or
    [B] one per row), the block writes the new tokens into the layer's buffers first and
    attends over them (`mask` [B, T, W]: the buffers' first W slots), returning the buffers;
    a one-token step over per-row positions runs a decode kernel instead where the backend has
    one (`slot_attention`), which reads each row's slots up to its own position.
    """
    dt = cfg.dtype
    B, T, D = x.shape
    N, K, H = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    h = rms_norm(x, layer["attn_norm"], cfg.rms_norm_eps).reshape(B * T, D)
    proj = _projector(layer, cfg)
    q = proj(h, "q").reshape(B, T, N, H)
    k = proj(h, "k").reshape(B, T, K, H)
    v = proj(h, "v").reshape(B, T, K, H)
    if cfg.qkv_bias:
        q = q + layer["q_bias"].astype(dt)
        k = k + layer["k_bias"].astype(dt)
        v = v + layer["v_bias"].astype(dt)
    q = constrain(q, ("batch", "seq", "heads", None), mesh, rules)
    q = apply_rope(q, cos, sin)
    k = apply_rope(k, cos, sin)
    if cache_kv is not None:
        ck, cv = cache_kv
        k = k.transpose(0, 2, 1, 3).astype(ck.dtype)  # [B, K, T, Hd], the cache's layout
        v = v.transpose(0, 2, 1, 3).astype(cv.dtype)
        if isinstance(cache_valid, jax.Array) and cache_valid.ndim == 0:
            # A shared write index: update this layer's buffer, then attend.
            ck = jax.lax.dynamic_update_slice_in_dim(ck, k, cache_valid, axis=2)
            cv = jax.lax.dynamic_update_slice_in_dim(cv, v, cache_valid, axis=2)
            attn = attention_over_cache(q, ck, cv, mask)
            new_kv = (ck, cv)
        elif isinstance(cache_valid, SlotWrite):  # a slot cache: each row at its own position
            ck, cv = cache_valid.write(ck, k), cache_valid.write(cv, v)
            kernel = slot_attention.kernel_for(cfg.attention, mesh, ck.shape[2]) if T == 1 else ""
            if kernel and cache_valid.rows is None:  # a decode step: rows read their live slots
                attn = slot_attention.slot_decode_attention(
                    q, ck, cv, cache_valid.at + 1, kernel, mesh=mesh, rules=rules
                )
            else:
                W = mask.shape[-1]  # the slots attended: a window over the buffer's first W
                attn = attention_over_cache(q, *(cache_valid.read(a, W) for a in (ck, cv)), mask)
            new_kv = (ck, cv)
        else:
            attn = cached_attention(q, k, v, mask, ck, cv, cache_valid, cfg.attention_query_block)
            new_kv = (k, v)
    else:
        attn = attention(q, k, v, mask, cfg, mesh, rules)
        new_kv = (k, v)  # [B, T, K, Hd]: a first prefill writes them (unused in training)
    x = x + proj(attn.reshape(B * T, N * H), "o").reshape(B, T, D)
    x = constrain(x, ("batch", "seq", None), mesh, rules)

    h = rms_norm(x, layer["mlp_norm"], cfg.rms_norm_eps).reshape(B * T, D)
    gate = proj(h, "gate").reshape(B, T, -1)
    up = proj(h, "up").reshape(B, T, -1)
    act = constrain(jax.nn.silu(gate) * up, ("batch", "seq", "mlp"), mesh, rules)
    x = x + proj(act.reshape(B * T, -1), "down").reshape(B, T, D)
    x = constrain(x, ("batch", "seq", None), mesh, rules)
    return x, new_kv


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class SlotWrite:
    """Where a block writes into a slot cache ([B, K, S, Hd] per layer), each row at its own
    position: T new tokens of row r go to slots [at[r], at[r] + T) of cache row rows[r]
    (rows None: the tokens' rows are the cache's rows, all of them).

    Writes come first and reads after, from the written buffer: XLA then updates a donated
    cache in place, where a read before the write would make it copy the cache to keep it."""

    at: jax.Array  # [R] int32
    rows: jax.Array | None = None  # [R] int32

    def write(self, buffer: jax.Array, new: jax.Array) -> jax.Array:
        """buffer [B, K, S, Hd] with new [R, K, T, Hd] written (a scatter, in place)."""
        new = new.astype(buffer.dtype)
        if self.rows is None:
            write = lambda buf, n, i: jax.lax.dynamic_update_slice_in_dim(buf, n, i, axis=1)
            return jax.vmap(write)(buffer, new, self.at)
        slots = self.at[:, None] + jnp.arange(new.shape[2])  # [R, T]
        # Advanced indices around a slice put their axes first: the update is [R, T, K, Hd].
        return buffer.at[self.rows[:, None], :, slots].set(new.transpose(0, 2, 1, 3))

    def read(self, buffer: jax.Array, window: int) -> jax.Array:
        """The rows' first `window` slots, [R, K, W, Hd]."""
        if self.rows is None:
            return buffer[:, :, :window]
        return jnp.take(buffer, self.rows, axis=0)[:, :, :window]


def _project(x: jax.Array, w: jax.Array, dt) -> jax.Array:
    """[M, Din] x a weight whose leading axis is Din ([Din, ...] or [..., Dout]) -> [M, Dout].

    Every projection is one 2-D GEMM over the flattened tokens: with [B, T, D] einsums, XLA on
    CPU writes the backward pass's activation gradients in transposed layouts (a strided copy
    per layer that cost more than the GEMMs' own gap to peak)."""
    w = w.reshape(x.shape[-1], -1)
    if narrow_weights(w, dt):
        return jnp.dot(x.astype(w.dtype), w, preferred_element_type=jnp.float32).astype(dt)
    return x @ w.astype(dt)


def narrow_weights(w: jax.Array, dt) -> bool:
    """Whether a weight is stored narrower than the compute dtype (bf16 weights for decoding
    under f32 compute). Such weights are read as stored, with the activations cast down and the
    product accumulated in f32: casting the weights up would write an f32 copy of every matrix
    on every decode step, more traffic than the f32 weights themselves."""
    return jnp.dtype(w.dtype).itemsize < jnp.dtype(dt).itemsize


def _projector(layer: dict, cfg: DecoderConfig):
    """(x [M, Din], name) -> [M, Dout]: the layer's projection `name`, plus its low-rank update
    s (x A) B where the layer carries adapters (`memjax.models.lora`)."""
    adapters = layer.get(ADAPTERS_KEY, {})
    if adapters and cfg.lora is None:
        raise ValueError("the parameters carry LoRA adapters but DecoderConfig.lora is None")

    def proj(x, name):
        y = _project(x, layer[name], cfg.dtype)
        if name in adapters:
            y = y + low_rank_update(x, adapters[name], cfg.dtype, cfg.lora.scale)
        return y

    return proj


def _remat(fn, policy: str):
    if policy == "none":
        return fn
    if policy == "full":
        return jax.checkpoint(fn, static_argnums=(7, 8, 9))
    return jax.checkpoint(
        fn,
        policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
        static_argnums=(7, 8, 9),
    )


def forward_hidden(
    params,
    tokens: jax.Array,
    positions: jax.Array,
    cfg: DecoderConfig,
    *,
    token_mask: jax.Array | None = None,
    cache: KVCache | None = None,
    mesh: Mesh | None = None,
    rules=None,
    fresh_cache: bool = False,
    read_only_cache: bool = False,
) -> tuple[jax.Array, KVCache | None]:
    """Final-norm hidden states [B, T, D] and the updated cache.

    tokens, positions: [B, T] int32. token_mask: [B, T] bool, False for padding (left or right);
    padded query rows produce garbage that callers mask out, never NaN. With `cache`, the T new
    tokens are written at slots [cache.index, cache.index + T) and attend to every valid slot up
    to their own; without it, attention is causal within the T tokens.

    `params["layers"]` may be stacked (run with `lax.scan`) or a list of per-layer dicts
    (`unstack_layers`, run unrolled); a per-layer cache pairs with the latter for fast decoding
    on CPU. Every combination gives the same numbers.

    `fresh_cache` says the cache holds nothing yet (a first prefill): the tokens then attend
    among themselves through `cfg.attention`'s implementation, as in training, and are written
    into the cache afterwards (no scores over the cache's empty slots).

    `read_only_cache` (a stacked cache, not a fresh one): the tokens attend to its valid slots
    and to each other, are not written, and the cache comes back as it was. A training row's
    remainder over a shared prompt's keys (`memjax.models.shared_prefix`) needs no slots of
    its own, so its cache holds the prompt alone and no query scores T empty slots.
    """
    B, T = tokens.shape
    if token_mask is None:
        token_mask = jnp.ones((B, T), jnp.bool_)
    token_mask = token_mask.astype(jnp.bool_)
    # Rows cast after the lookup, not the table; its gradient stays sharded like the table.
    x = embedding.lookup(params["embed"], tokens, mesh, rules).astype(cfg.dtype)  # [B, T, D]
    cos, sin = rope_tables(
        positions, inverse_frequencies(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling)
    )

    if (cache is None or fresh_cache) and fused_attention.resolve(cfg.attention, mesh) != "xla":
        # A fused kernel takes the token mask alone (`attention`): a [B, T, T] mask handed to
        # every layer would be the one T x T buffer the kernel avoids.
        mask = token_mask[:, None, :]  # [B, 1, T]
    else:
        causal = jnp.tril(jnp.ones((T, T), jnp.bool_))
        mask = causal[None] & token_mask[:, None, :]  # [B, T, T]
    layer_fn = _remat(_layer, cfg.remat)
    layers = params["layers"]
    if cache is None:
        x = _through_layers(x, layers, layer_fn, cos, sin, mask, cfg, mesh, rules)
        return rms_norm(x, params["final_norm"], cfg.rms_norm_eps), None
    if fresh_cache:
        return _fresh_prefill(
            params, x, layers, layer_fn, cos, sin, mask, cache, token_mask, cfg, mesh, rules
        )
    write = not read_only_cache
    x, new_cache = _append_to_cache(
        x, layers, layer_fn, cos, sin, mask, cache, token_mask, cfg, mesh, rules, write
    )
    return rms_norm(x, params["final_norm"], cfg.rms_norm_eps), new_cache


def _through_layers(x, layers, layer_fn, cos, sin, mask, cfg, mesh, rules) -> jax.Array:
    """The layers without a cache: causal attention within the T tokens."""
    if isinstance(layers, (list, tuple)):
        for layer in layers:
            x, _ = layer_fn(x, layer, cos, sin, mask, None, None, cfg, mesh, rules)
        return x

    def body(x, layer):
        x, _ = layer_fn(x, layer, cos, sin, mask, None, None, cfg, mesh, rules)
        return x, None

    x, _ = jax.lax.scan(body, x, layers)
    return x


def _append_to_cache(
    x, layers, layer_fn, cos, sin, mask, cache, token_mask, cfg, mesh, rules, write=True
):
    """The layers over a live cache: the T new tokens attend to its valid slots and to each
    other, and are written at [cache.index, cache.index + T) (unless `write` is False).
    Returns (x, the new cache)."""
    T = x.shape[1]
    # Old slots at or beyond the write index are never attended (they may hold stale entries).
    old_valid = cache.valid & (jnp.arange(cache.size)[None, :] < cache.index)  # [B, S]
    unrolled = isinstance(layers, (list, tuple))
    if unrolled and cache.per_layer:
        if not write:
            raise ValueError("a per-layer cache is written by its layers; it cannot be read-only")
        # Per-layer buffers: write each layer's new slots first, then attend over the updated
        # buffer. The update is the buffer's first use, so XLA does it in place (a read before
        # the write would make it copy the buffer to protect the read).
        valid = jax.lax.dynamic_update_slice_in_dim(cache.valid, token_mask, cache.index, axis=1)
        query_slot = cache.index + jnp.arange(T)[:, None]  # [T, 1]
        full_mask = (jnp.arange(cache.size)[None, :] <= query_slot)[None] & valid[:, None, :]
        cache_k, cache_v = [], []
        for i, layer in enumerate(layers):
            x, (ck, cv) = layer_fn(
                x, layer, cos, sin, full_mask, cache.layer(i), cache.index, cfg, mesh, rules
            )
            cache_k.append(ck)
            cache_v.append(cv)
        return x, KVCache(tuple(cache_k), tuple(cache_v), valid, cache.index + T)
    if unrolled:
        new_kv = []
        for i, layer in enumerate(layers):
            x, kv = layer_fn(x, layer, cos, sin, mask, cache.layer(i), old_valid, cfg, mesh, rules)
            new_kv.append(kv)
        new_k, new_v = [kv[0] for kv in new_kv], [kv[1] for kv in new_kv]
    else:

        def body(x, xs):
            layer, ck, cv = xs
            x, kv = layer_fn(x, layer, cos, sin, mask, (ck, cv), old_valid, cfg, mesh, rules)
            return x, kv

        cache_k = jnp.stack(cache.k) if cache.per_layer else cache.k
        cache_v = jnp.stack(cache.v) if cache.per_layer else cache.v
        x, (new_k, new_v) = jax.lax.scan(body, x, (layers, cache_k, cache_v))
    if not write:
        return x, cache
    return x, write_cache(cache, new_k, new_v, token_mask)


def _fresh_prefill(
    params, x, layers, layer_fn, cos, sin, mask, cache, token_mask, cfg, mesh, rules
):
    """The layers without a cache, then every layer's new keys and values written at once."""
    if isinstance(layers, (list, tuple)):
        kvs = []
        for layer in layers:
            x, kv = layer_fn(x, layer, cos, sin, mask, None, None, cfg, mesh, rules)
            kvs.append(kv)
        cache_layout = lambda a: a.transpose(0, 2, 1, 3)  # [B, T, K, Hd] -> [B, K, T, Hd]
        new_k = [cache_layout(kv[0]) for kv in kvs]
        new_v = [cache_layout(kv[1]) for kv in kvs]
    else:

        def body(x, layer):
            return layer_fn(x, layer, cos, sin, mask, None, None, cfg, mesh, rules)

        x, (new_k, new_v) = jax.lax.scan(body, x, layers)  # [L, B, T, K, Hd] each
        new_k, new_v = (a.transpose(0, 1, 3, 2, 4) for a in (new_k, new_v))
    new_cache = write_cache(cache, new_k, new_v, token_mask)
    return rms_norm(x, params["final_norm"], cfg.rms_norm_eps), new_cache


def write_cache(cache: KVCache, k, v, token_mask: jax.Array) -> KVCache:
    """The cache with T new tokens written at slots [index, index + T).

    k, v: the new tokens' keys and values, [L, B, K, T, Hd] or L arrays [B, K, T, Hd]. One
    update per step for all layers; with the cache donated, XLA writes it in place.
    """
    T = token_mask.shape[1]
    if cache.per_layer:

        def write(old, new):
            return tuple(
                jax.lax.dynamic_update_slice_in_dim(o, n.astype(o.dtype), cache.index, axis=2)
                for o, n in zip(old, new)
            )

    else:

        def write(old, new):
            new = jnp.stack(new) if isinstance(new, (list, tuple)) else new
            return jax.lax.dynamic_update_slice_in_dim(
                old, new.astype(old.dtype), cache.index, axis=3
            )

    return KVCache(
        k=write(cache.k, k),
        v=write(cache.v, v),
        valid=jax.lax.dynamic_update_slice_in_dim(cache.valid, token_mask, cache.index, axis=1),
        index=cache.index + T,
    )


def unstack_layers(params) -> dict:
    """The same parameters with `layers` as a list of L per-layer dicts.

    `forward` then runs the layers as an unrolled Python loop instead of `lax.scan`. Decoding
    on CPU wants this: under scan, XLA copies each layer's weights out of the stacked arrays on
    every step, which triples the memory traffic of a step that is bound by it. The cost is a
    longer compile (one copy of the layer per layer) and a second copy of the weights.
    """
    layers = params["layers"]
    if isinstance(layers, (list, tuple)):
        return params
    num = jax.tree.leaves(layers)[0].shape[0]
    return {**params, "layers": [jax.tree.map(lambda a, i=i: a[i], layers) for i in range(num)]}


def unembedding(params, cfg: DecoderConfig) -> tuple[jax.Array, bool]:
    """The output projection as stored, and whether it is vocab-major: the tied embedding
    [V, D] (True) or lm_head [D, V] (False). Callers contract against it in that layout:
    writing `embed.T` makes XLA on CPU materialise the transposed table on every call."""
    if cfg.tie_embeddings:
        return params["embed"], True
    return params["lm_head"], False


def logits_from_hidden(params, hidden: jax.Array, cfg: DecoderConfig) -> jax.Array:
    """[B, T, D] -> [B, T, V] f32 logits."""
    w, vocab_major = unembedding(params, cfg)
    spec = "btd,vd->btv" if vocab_major else "btd,dv->btv"
    if narrow_weights(w, cfg.dtype):
        hidden = hidden.astype(w.dtype)
    else:
        w = w.astype(cfg.dtype)
    return jnp.einsum(spec, hidden, w, preferred_element_type=jnp.float32)


def forward(params, tokens, positions, cfg: DecoderConfig, **kwargs):
    """Logits [B, T, V] (f32) and the updated cache (None without one)."""
    hidden, cache = forward_hidden(params, tokens, positions, cfg, **kwargs)
    return logits_from_hidden(params, hidden, cfg), cache


def positions_from_mask(token_mask: jax.Array, offset: jax.Array | int = 0) -> jax.Array:
    """Positions [B, T] counting only real tokens (left padding gets position 0)."""
    pos = jnp.cumsum(token_mask.astype(jnp.int32), axis=-1) - 1 + offset
    return jnp.maximum(pos, 0)


jit_forward = jax.jit(forward, static_argnames=("cfg", "mesh", "rules"))
__all__ = [
    "decoder_abstract",
    "forward",
    "forward_hidden",
    "logits_from_hidden",
    "unembedding",
    "positions_from_mask",
    "unstack_layers",
    "write_cache",
    "cached_attention",
    "rms_norm",
    "attention",
    "jit_forward",
]
