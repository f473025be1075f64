"""Loading Memory-R1's models from their spec (run_settings.ModelSpec), and turning one into a

    model = load_agent_model(run.model("answer"))        # run_settings.ModelSpec
    policy = sampler_policy(model, {"greedy": True, "max_new_tokens": 64}, batch_size=16)
    texts = policy([[{"role": "user", "content": "..."}], ...])

A model spec names a base checkpoint (`source`: 'packaged:smollm2', an HF directory, a .gguf)
and optionally `trained`: an HF directory of trained weights written by a Memory-R1 training
job (memjax.checkpoints.export_hf_decoder); the tokenizer and chat template always come from
`source`. Loaded models are shared: the fact extractor, the manager, the answer agent and the
judge often are one model on a CPU, and it is read once.
"""

from __future__ import annotations

import jax
import numpy as np

from memjax.agents.memory_r1.policy import ChatPolicy, Messages
from memjax.agents.memory_r1.run_settings import ModelSpec
from memjax.checkpoints import LoadedModel, load_model

_LOADED: dict[tuple, LoadedModel] = {}


def load_agent_model(spec: ModelSpec) -> LoadedModel:
    """`spec`: source, param_dtype, and trained (HF dir of trained weights, "" for none)."""
    source, trained, dtype = str(spec.source), str(spec.trained), str(spec.param_dtype)
    remat = str(spec.remat or "none")  # recompute activations in the backward pass
    key = (source, trained, dtype, remat)
    if key not in _LOADED:
        model = load_model(source, param_dtype=dtype, remat=remat)
        if trained:
            from memjax.checkpoints.decoder_io import load_hf_decoder

            params, cfg = load_hf_decoder(trained, param_dtype=dtype, remat=remat)
            if cfg.vocab_size != model.cfg.vocab_size:
                raise ValueError(
                    f"trained weights {trained} have vocab {cfg.vocab_size}, the tokenizer of "
                    f"{source} has {model.cfg.vocab_size}"
                )
            model = LoadedModel(params=params, cfg=cfg, tokenizer=model.tokenizer, path=model.path)
        _LOADED[key] = model
    return _LOADED[key]


def sampler_policy(
    model: LoadedModel,
    sampling: dict,
    *,
    batch_size: int = 16,
    seed: int = 0,
    max_prompt_tokens: int | None = None,
    params=None,
    engine_slots: int = 0,
) -> ChatPolicy:
    """A ChatPolicy over memjax's sampler. Prompts are sorted by length and sent `batch_size`
    at a time (less padding per call), and answers come back in the caller's order. A prompt
    longer than `max_prompt_tokens` keeps its last tokens (the question sits at the end).

    With `engine_slots` > 0 every prompt of a batch is a request to a continuous-batching
    engine of that many slots instead (`memjax.engine`): a slot whose answer ends takes the
    next prompt at once. Greedy answers are the same either way."""
    from memjax.sampling.sampler import SamplingParams
    from memjax.sampling.sampling_params import run_options

    sp = SamplingParams(
        temperature=float(sampling.get("temperature", 1.0)),
        top_k=int(sampling.get("top_k", 0)),
        top_p=float(sampling.get("top_p", 1.0)),
        max_new_tokens=int(sampling["max_new_tokens"]),
        greedy=bool(sampling.get("greedy", False)),
        **run_options(sampling),
    )
    tok = model.tokenizer
    weights = params if params is not None else model.params
    generate = (
        _engine_generate(model, weights, sp, seed, engine_slots, max_prompt_tokens)
        if engine_slots
        else _lock_step_generate(model, weights, sp, seed, batch_size)
    )

    def policy(batch: list[Messages]) -> list[str]:
        ids = [tok.chat(list(m)) for m in batch]
        if max_prompt_tokens:
            ids = [x[-max_prompt_tokens:] for x in ids]
        return [tok.decode(t) for t in generate(ids)]

    return policy


def _lock_step_generate(model: LoadedModel, weights, sp, seed: int, batch_size: int):
    """prompts -> completions (token ids), `batch_size` prompts of similar length a call."""
    from memjax.sampling.sampler import prepare_params, sample
    from memjax.sampling.weights import WeightCopies

    tok = model.tokenizer
    calls = [0]
    prepared = []  # per-layer weights on CPU (and a cast copy), laid out once, not per call

    def generate(ids: list[list[int]]) -> list[list[int]]:
        order = np.argsort([len(x) for x in ids], kind="stable")
        out: list[list[int]] = [[] for _ in ids]
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            calls[0] += 1
            if not prepared:
                prepared.append(WeightCopies(prepare_params(weights, model.cfg)))
            result = sample(
                prepared[0].for_call(sp, len(rows)),
                model.cfg,
                [ids[r] for r in rows],
                sp,
                jax.random.fold_in(jax.random.key(seed), calls[0]),
                eos_ids=tuple(tok.eos_ids),
                pad_id=tok.pad_id,
            )
            tokens, lengths = np.asarray(result.tokens), np.asarray(result.lengths)
            for j, r in enumerate(rows):
                out[r] = tokens[j, : lengths[j]].tolist()
        return out

    return generate


def _engine_generate(model: LoadedModel, weights, sp, seed: int, slots: int, max_prompt_tokens):
    """prompts -> completions (token ids) through one engine, built on the first call; the
    i-th prompt of the n-th call draws from key fold_in(key(seed), n) at row i."""
    from memjax.engine import Engine, Request

    engines: list[Engine] = []
    calls = [0]

    def generate(ids: list[list[int]]) -> list[list[int]]:
        if not engines:
            longest = max_prompt_tokens or model.cfg.max_position_embeddings - sp.max_new_tokens
            engines.append(
                Engine(
                    weights,
                    model.cfg,
                    eos_ids=model.tokenizer.eos_ids,
                    slots=slots,
                    max_len=longest + sp.max_new_tokens,
                )
            )
        calls[0] += 1
        key = jax.random.fold_in(jax.random.key(seed), calls[0])
        requests = [Request(x, sp, key, row) for row, x in enumerate(ids)]
        return [c.tokens for c in engines[0].run(requests)]

    return generate


def greedy_policy(source: str, max_new_tokens: int, batch_size: int = 16) -> ChatPolicy:
    """The model at `source` (a workdir, HF directory, packaged:...) answering greedily: what
    the held-out checks in tools/ run."""
    sampling = {"greedy": True, "temperature": 1.0, "max_new_tokens": max_new_tokens}
    return sampler_policy(load_model(source), sampling, batch_size=batch_size)
