"""Tiny random decoders and a toy tokenizer for sampler tests."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from memjax.models import decoder
from memjax.models.config import DecoderConfig
from memjax.models.params import init_params

CFG = DecoderConfig(
    "llama",
    vocab_size=64,
    embed_dim=32,
    mlp_dim=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=8,
    tie_embeddings=True,
)


def tiny_model(seed: int = 0, cfg: DecoderConfig = CFG):
    """Random params scaled up so logits are peaked (std ~3): greedy choices are not near-ties
    and sampled rows differ visibly between seeds."""
    params = init_params(decoder.decoder_abstract(cfg), jax.random.key(seed))
    scale = {"embed": 25.0, "lm_head": 25.0}
    return (
        jax.tree_util.tree_map_with_path(
            lambda path, a: (
                a * scale.get(getattr(path[0], "key", ""), 10.0)
                if a.ndim > 1 and "norm" not in str(path)
                else a
            ),
            params,
        ),
        cfg,
    )


def reference_logits(params, cfg, tokens: list[int]) -> jnp.ndarray:
    """[len(tokens), V] logits of a full recompute without cache. The row is right-padded to
    a multiple of 32 (harmless under causal attention) so one compile serves many lengths."""
    n = len(tokens)
    width = -(-n // 32) * 32
    arr = jnp.asarray([list(tokens) + [0] * (width - n)], jnp.int32)
    logits, _ = decoder.jit_forward(params, arr, jnp.arange(width)[None], cfg)
    return logits[0, :n]


def assert_same_draws(a, b, atol: float = 1e-5) -> None:
    """Two SampleOutputs drew the same tokens with the same log-probs (up to float rounding)
    and hold the same per-row history."""
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_allclose(a.logprobs, b.logprobs, atol=atol)
    assert a.state.history == b.state.history


def greedy_reference(params, cfg, prompt: list[int], n: int) -> list[int]:
    """Greedy decoding by full recompute at every step (slow, obviously right)."""
    seq = list(prompt)
    for _ in range(n):
        seq.append(int(jnp.argmax(reference_logits(params, cfg, seq)[-1])))
    return seq[len(prompt) :]


def _toy_pieces(vocab_size: int) -> list[str]:
    """Distinct strings over {a, b, c}, shortest first: every text over the alphabet has many
    spellings ("ab" is one token or "a" + "b"), which is what makes stop strings hard."""
    pieces, length = [], 1
    while len(pieces) < vocab_size:
        pieces += ["".join("abc"[(n // 3**i) % 3] for i in range(length)) for n in range(3**length)]
        length += 1
    return pieces[:vocab_size]


class ToyTokenizer:
    """Token i is the string _toy_pieces()[i]; encode is greedy longest match."""

    def __init__(self, vocab_size: int):
        self.pieces = _toy_pieces(vocab_size)
        self.eos_ids = ()
        self.pad_id = 0

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(self.pieces[int(i)] for i in ids)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        out, i = [], 0
        by_len = sorted(range(len(self.pieces)), key=lambda t: -len(self.pieces[t]))
        while i < len(text):
            t = next((t for t in by_len if text.startswith(self.pieces[t], i)), None)
            if t is None:  # a character outside the alphabet: dropped
                i += 1
                continue
            out.append(t)
            i += len(self.pieces[t])
        return out
