"""The `model.generate` job: load a model and print its greedy answer to chat prompts."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from memjax.checkpoints import load_model
from memjax.models import decoder
from memjax.models.kv_cache import init_cache


def greedy_generate(params, cfg, prompt: list[int], max_new_tokens: int, eos_ids) -> list[int]:
    """Greedy decoding of one prompt with a KV cache (a plain loop of jitted steps)."""
    size = len(prompt) + max_new_tokens
    cache = init_cache(cfg, 1, size)
    step = jax.jit(decoder.forward, static_argnames=("cfg",), donate_argnames=("cache",))
    tokens = jnp.asarray([prompt], jnp.int32)
    positions = jnp.arange(len(prompt), dtype=jnp.int32)[None]
    logits, cache = step(params, tokens, positions, cfg, cache=cache)
    out = []
    for i in range(max_new_tokens):
        token = int(jnp.argmax(logits[0, -1]))
        out.append(token)
        if token in eos_ids:
            break
        position = jnp.asarray([[len(prompt) + i]], jnp.int32)
        logits, cache = step(params, jnp.asarray([[token]], jnp.int32), position, cfg, cache=cache)
    return out


def generate_job(config, workdir) -> None:
    del workdir
    t0 = time.perf_counter()
    model = load_model(config.model.source, param_dtype=config.model.param_dtype)
    print(f"loaded {model.path.name} in {time.perf_counter() - t0:.1f}s")
    for prompt in config.prompts:
        ids = model.tokenizer.chat([{"role": "user", "content": prompt}])
        t0 = time.perf_counter()
        out = greedy_generate(
            model.params, model.cfg, ids, config.max_new_tokens, model.tokenizer.eos_ids
        )
        dt = time.perf_counter() - t0
        print(f"\n> {prompt}\n{model.tokenizer.decode(out)}\n({len(out)} tokens, {dt:.1f}s)")
