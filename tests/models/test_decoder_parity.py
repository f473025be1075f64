"""memjax's decoder against `transformers` on tiny random checkpoints (f32, 1e-4)."""

import jax.numpy as jnp
import numpy as np
import pytest
from transformers import AutoModelForCausalLM

from memjax.checkpoints.decoder_io import export_hf_decoder, load_hf_decoder
from memjax.models import decoder
from tests.models.hf_fixtures import VARIANTS, hf_logits, make_hf_model, padded_batch

TOL = 1e-4


def memjax_logits(params, cfg, tokens, mask):
    positions = decoder.positions_from_mask(jnp.asarray(mask))
    logits, _ = decoder.jit_forward(
        params, jnp.asarray(tokens), positions, cfg, token_mask=jnp.asarray(mask)
    )
    return np.asarray(logits)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("left_pad", [True, False], ids=["left_pad", "right_pad"])
def test_logits_match_transformers_on_padded_batch(tmp_path, variant, left_pad):
    model = make_hf_model(variant)
    model.save_pretrained(tmp_path)
    params, cfg = load_hf_decoder(tmp_path)
    assert cfg.tie_embeddings == model.config.tie_word_embeddings
    assert ("lm_head" in params) == (not cfg.tie_embeddings)
    assert cfg.qkv_bias == (variant.startswith("qwen2"))
    assert (cfg.rope_scaling is not None) == (variant == "llama_rope_scaling")

    # Lengths past original_max_position_embeddings=16 exercise the Llama 3.1 correction.
    tokens, mask = padded_batch(cfg.vocab_size, [40, 23, 7], 40, left=left_pad)
    ours = memjax_logits(params, cfg, tokens, mask)
    ref = hf_logits(model, tokens, mask)
    diff = np.abs(ours - ref)[mask].max()
    assert diff < TOL, f"{variant}: max abs logit diff {diff}"
    assert np.isfinite(ours).all(), "padded rows must not produce NaN"


@pytest.mark.parametrize("variant", ["qwen2_tied", "llama_rope_scaling"])
def test_export_then_reload_in_transformers(tmp_path, variant):
    model = make_hf_model(variant, seed=1)
    model.save_pretrained(tmp_path / "orig")
    params, cfg = load_hf_decoder(tmp_path / "orig")
    export_hf_decoder(params, cfg, tmp_path / "exported")
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "exported").eval()
    tokens, mask = padded_batch(cfg.vocab_size, [30, 12], 30, left=True, seed=3)
    np.testing.assert_allclose(
        hf_logits(reloaded, tokens, mask)[mask], hf_logits(model, tokens, mask)[mask], atol=1e-5
    )
    # And memjax reads its own export back identically.
    params2, cfg2 = load_hf_decoder(tmp_path / "exported")
    assert cfg2 == cfg
    np.testing.assert_array_equal(
        np.asarray(params2["layers"]["q"]), np.asarray(params["layers"]["q"])
    )


def test_bf16_params_stay_close_to_f32(tmp_path):
    model = make_hf_model("llama")
    model.save_pretrained(tmp_path)
    p32, c32 = load_hf_decoder(tmp_path)
    p16, c16 = load_hf_decoder(tmp_path, param_dtype="bfloat16", compute_dtype="bfloat16")
    assert p16["layers"]["q"].dtype == jnp.bfloat16
    tokens, mask = padded_batch(c32.vocab_size, [20, 9], 20, left=True)
    a = memjax_logits(p32, c32, tokens, mask)
    b = memjax_logits(p16, c16, tokens, mask)
    assert b.dtype == np.float32  # logits are f32 whatever the compute dtype
    assert np.abs(a - b)[mask].max() < 0.1


def test_remat_does_not_change_logits(tmp_path):
    model = make_hf_model("qwen2_untied")
    model.save_pretrained(tmp_path)
    params, cfg = load_hf_decoder(tmp_path)
    tokens, mask = padded_batch(cfg.vocab_size, [16, 10], 16, left=True)
    base = memjax_logits(params, cfg, tokens, mask)
    for remat in ("full", "dots"):
        np.testing.assert_allclose(
            memjax_logits(params, cfg.replace(remat=remat), tokens, mask), base, atol=1e-6
        )


def test_attention_gradients_match_plain_softmax_autodiff():
    # The attention core has a hand-written (FlashAttention-style) backward; it must give the
    # gradients autodiff gives for the textbook formula, padding rows included.
    import jax
    import jax.numpy as jnp
    import numpy as np

    from memjax.models import decoder
    from memjax.models.config import DecoderConfig

    cfg = DecoderConfig(
        "llama", vocab_size=8, embed_dim=8, mlp_dim=8, num_layers=1, num_heads=4,
        num_kv_heads=2, head_dim=4,
    )  # fmt: skip
    B, T, N, K, H = 2, 6, 4, 2, 4
    keys = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(keys[0], (B, T, N, H))
    k = jax.random.normal(keys[1], (B, T, K, H))
    v = jax.random.normal(keys[2], (B, T, K, H))
    w = jax.random.normal(keys[3], (B, T, N, H))
    token_mask = jnp.array([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]], bool)  # left / right pad
    mask = jnp.tril(jnp.ones((T, T), bool))[None] & token_mask[:, None, :]

    def textbook(q, k, v):
        kr, vr = jnp.repeat(k, N // K, axis=2), jnp.repeat(v, N // K, axis=2)
        s = jnp.einsum("btnh,bsnh->bnts", q, kr) / np.sqrt(H)
        s = jnp.where(mask[:, None], s, decoder._MASKED)
        return jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(s, -1), vr)

    loss = lambda f: lambda q, k, v: (f(q, k, v) * w).sum()
    ours = jax.jit(jax.grad(loss(lambda q, k, v: decoder.attention(q, k, v, mask, cfg)), (0, 1, 2)))
    ref = jax.grad(loss(textbook), (0, 1, 2))
    np.testing.assert_allclose(
        decoder.attention(q, k, v, mask, cfg), textbook(q, k, v), rtol=1e-5, atol=1e-5
    )
    for a, b in zip(ours(q, k, v), ref(q, k, v)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
