"""The `model.generate` job: load a model and answer chat prompts with the on-device sampler."""

from __future__ import annotations

import time

import jax

from memjax.checkpoints import load_model
from memjax.sampling.chat import generate_chat
from memjax.sampling.sampler import prepare_params
from memjax.sampling.sampling_params import SamplingParams


def generate_job(config, workdir) -> None:
    del workdir
    t0 = time.perf_counter()
    model = load_model(config.model.source, param_dtype=config.model.param_dtype)
    print(f"loaded {model.path.name} in {time.perf_counter() - t0:.1f}s")
    params = prepare_params(model.params, model.cfg)
    sampling = SamplingParams(
        max_new_tokens=config.max_new_tokens,
        greedy=config.get("temperature", 0.0) == 0.0,
        temperature=config.get("temperature", 0.0) or 1.0,
    )
    conversations = [[{"role": "user", "content": p}] for p in config.prompts]
    t0 = time.perf_counter()
    out = generate_chat(
        params,
        model.tokenizer,
        conversations,
        sampling,
        jax.random.key(config.seed),
        cfg=model.cfg,
    )
    dt = time.perf_counter() - t0
    for prompt, text, n in zip(config.prompts, out.texts, out.output.lengths):
        print(f"\n> {prompt}\n{text}\n({n} tokens)")
    total = int(out.output.lengths.sum())
    print(f"\n{len(config.prompts)} prompts, {total} tokens in {dt:.1f}s (compile included)")
