"""Texts -> unit vectors with memjax's JAX encoder: tokenise, bucket by length, jit, pool.

    embedder = Embedder.load("packaged:minilm")               # or an E5/BGE directory + layout
    vectors = embedder.encode(["Alice moved to Paris."])      # [N, D] float32, passage side
    queries = embedder.encode(["where does Alice live?"], kind="query")

Texts are sorted by token length and cut into batches; each batch is padded to a power-of-two
length and a fixed batch size, so a handful of compiled shapes serve any workload and short
texts do not pay for long ones. Results come back in the caller's order.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np

from memjax.checkpoints import packaged
from memjax.checkpoints.encoder_io import load_hf_encoder
from memjax.models.encoder import jit_embed
from memjax.models.encoder_config import EmbeddingRecipe, EncoderConfig, recipe_from_dir
from memjax.text.valid import valid_text

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_MIN_BUCKET = 8


class TextEncoder(Protocol):
    """What the memory bank and the retriever need from an embedder."""

    dim: int

    def encode(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray: ...


def length_bucket(n: int, max_length: int) -> int:
    """Smallest power of two >= n (at least 8), capped at max_length."""
    b = _MIN_BUCKET
    while b < n:
        b *= 2
    return min(b, max_length)


class Embedder:
    def __init__(
        self,
        params,
        cfg: EncoderConfig,
        recipe: EmbeddingRecipe,
        tokenizer,
        *,
        batch_size: int = 64,
        source: str = "",
        mesh=None,
        rules=None,
    ):
        self.params, self.cfg, self.recipe = params, cfg, recipe
        self.batch_size = int(batch_size)
        self.source = source
        self.mesh, self.rules = mesh, rules
        max_len = min(recipe.max_length, cfg.max_position_embeddings)
        self.max_length = max_len
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_len)
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.token_to_id("[PAD]") or 0

    @property
    def dim(self) -> int:
        return self.cfg.embed_dim

    @classmethod
    def load(
        cls,
        source: str = packaged.MINILM,
        *,
        layout: str | None = None,
        batch_size: int = 64,
        compute_dtype: str = "float32",
        mesh=None,
        rules=None,
        **recipe_overrides,
    ) -> Embedder:
        """From 'packaged:minilm' or an HF BERT directory with tokenizer.json. `layout` picks a
        named recipe (minilm, e5, bge); otherwise sentence-transformers files decide."""
        from tokenizers import Tokenizer

        path = Path(packaged.resolve(source))
        tok_file = path / "tokenizer.json"
        if not tok_file.is_file():
            raise FileNotFoundError(f"no tokenizer.json in encoder directory {path}")
        params, cfg = load_hf_encoder(path, mesh=mesh, compute_dtype=compute_dtype)
        recipe = recipe_from_dir(path, layout, **recipe_overrides)
        tokenizer = Tokenizer.from_file(str(tok_file))
        return cls(
            params,
            cfg,
            recipe,
            tokenizer,
            batch_size=batch_size,
            source=str(source),
            mesh=mesh,
            rules=rules,
        )

    def tokenize(self, texts: Sequence[str], kind: str = "passage") -> list[list[int]]:
        prefix = self.recipe.prefix(kind)
        # valid_text: a lone surrogate in one text would make the Rust tokenizer raise for all.
        encodings = self.tokenizer.encode_batch([prefix + valid_text(t) for t in texts])
        return [e.ids for e in encodings]

    def encode(
        self, texts: Sequence[str], kind: str = "passage", progress: bool = False
    ) -> np.ndarray:
        """[N, D] float32 vectors (unit length when the recipe normalises)."""
        if isinstance(texts, str):
            raise TypeError("encode takes a list of texts, not one string")
        out = np.zeros((len(texts), self.dim), np.float32)
        if not len(texts):
            return out
        ids = self.tokenize(texts, kind)
        order = np.argsort([-len(x) for x in ids], kind="stable")  # longest first
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        if progress:
            from tqdm import tqdm

            batches = tqdm(batches, desc="embedding", unit="batch")
        for rows in batches:
            out[rows] = self._encode_batch([ids[r] for r in rows])
        return out

    def _encode_batch(self, ids: list[list[int]]) -> np.ndarray:
        T = length_bucket(max(len(x) for x in ids), self.max_length)
        # Pad the batch to the fixed size (or a power of two below it) to bound recompiles.
        B = min(self.batch_size, length_bucket(len(ids), 1 << 30))
        tokens = np.full((B, T), self.pad_id, np.int32)  # [B, T]
        mask = np.zeros((B, T), bool)  # [B, T]
        for i, row in enumerate(ids):
            tokens[i, : len(row)] = row
            mask[i, : len(row)] = True
        mask[len(ids) :, 0] = True  # padding rows attend to one token: finite, then dropped
        vectors = jit_embed(
            self.params,
            jnp.asarray(tokens),
            jnp.asarray(mask),
            self.cfg,
            self.recipe,
            self.mesh,
            self.rules,
        )
        return np.asarray(jax.device_get(vectors))[: len(ids)]
