"""A verifiable toy task and the `rl.train` job that the toy recipes run.

Task ("repeat the target"): the prompt is [BOS, target]; the reward is the fraction of the first
`length` generated tokens that equal the target (an early EOS or wrong tokens score 0 for the
rest). A randomly initialised decoder starts near 1/num_targets and must learn to read the
prompt and copy the target token repeatedly.
"""

from __future__ import annotations

import dataclasses
import json

import jax

from memjax.errors import ConfigError
from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract
from memjax.models.params import flatten_with_names, init_params
from memjax.rl.environment import Environment, StepResult
from memjax.training.sections import read_section

PAD, BOS, EOS = 0, 1, 2
FIRST_TARGET = 3


class RepeatTargetEnv(Environment):
    max_turns = 1

    def __init__(self, length: int):
        self.length = length

    def reset(self, example):
        target = int(example)
        return target, [BOS, target]

    def step(self, state, completion, stop_reason):
        hits = sum(1 for t in completion[: self.length] if t == state)
        return state, StepResult(done=True, reward=hits / self.length, info={"hits": hits})


def toy_decoder_config(c) -> DecoderConfig:
    return DecoderConfig(
        "llama",
        vocab_size=int(c.vocab_size),
        embed_dim=int(c.embed_dim),
        mlp_dim=int(c.mlp_dim),
        num_layers=int(c.num_layers),
        num_heads=int(c.num_heads),
        num_kv_heads=int(c.num_kv_heads),
        head_dim=int(c.embed_dim) // int(c.num_heads),
        max_position_embeddings=64,
    )


INIT_STDDEV = 0.02  # decoder_abstract's initialiser


def toy_params(cfg: DecoderConfig, key, stddev: float = INIT_STDDEV) -> dict:
    """A random decoder whose matrices have std `stddev` (norms at one, biases at zero).

    A LoRA run cannot sharpen its base's output: the final norm and the unembedding stay frozen,
    and at std 0.02 they bound every logit near +-1.3 (|h| = sqrt(D) after the norm, |w_v| =
    0.02 sqrt(D)), so sampling at temperature 1 stays near uniform whatever the adapters learn.
    A larger std stands in for a pretrained base, whose logits span tens of nats.
    """
    params = init_params(decoder_abstract(cfg), key)
    scale = stddev / INIT_STDDEV
    flat = flatten_with_names(params)
    keep = lambda name: "norm" in name or name.endswith("_bias")
    scaled = {n: (x if keep(n) else x * scale) for n, x in flat.items()}
    return jax.tree.unflatten(jax.tree.structure(params), [scaled[n] for n in flat])


@dataclasses.dataclass(frozen=True)
class ToyModel:
    """`config.model`: a random decoder of this shape, or `source`'s checkpoint."""

    source: str = ""  # "": the random decoder; else an HF directory, .gguf, packaged:, workdir
    vocab_size: int = 16
    embed_dim: int = 64
    mlp_dim: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    init_stddev: float = INIT_STDDEV


@dataclasses.dataclass(frozen=True)
class ToyRun:
    """The toy job's own fields; the rest of its config is the trainer's (RLRunConfig)."""

    model: ToyModel
    num_targets: int  # targets are token ids FIRST_TARGET ..
    length: int  # tokens to repeat
    seed: int

    @classmethod
    def from_config(cls, config) -> ToyRun:
        return cls(
            model=read_section(ToyModel, config.model, "config.model"),
            num_targets=int(config.task.num_targets),
            length=int(config.task.length),
            seed=int(config.seed),
        )


def toy_policy(run: ToyRun) -> tuple[dict, DecoderConfig, str]:
    """(params, cfg, description) of the policy: the random decoder of `model`'s shape, or,
    with `model.source` set, that checkpoint's weights (its own shape; the task's token ids
    are ids of its vocabulary)."""
    source = run.model.source
    if source:
        from memjax.checkpoints import load_model

        model = load_model(source, with_tokenizer=False, param_dtype="float32")
        n = run.num_targets
        if FIRST_TARGET + n > model.cfg.vocab_size:
            raise ConfigError(
                f"config.task.num_targets={n}: {source} has {model.cfg.vocab_size} token ids"
            )
        return model.params, model.cfg, source
    cfg = toy_decoder_config(run.model)
    std = run.model.init_stddev
    params = jax.jit(lambda k: toy_params(cfg, k, std))(jax.random.key(run.seed))
    return params, cfg, f"toy decoder, random init seed {run.seed}"


def train_job(config, workdir) -> None:
    """`rl.train` on the toy task; prints one JSON summary line last."""
    from memjax.rl.run_config import RLRunConfig
    from memjax.rl.trainer import train
    from memjax.training.reporting import summary_line

    if not workdir:
        raise ConfigError("--workdir: rl.train needs a directory (checkpoints, TensorBoard, plots)")
    run, rc = ToyRun.from_config(config), RLRunConfig.from_section(config)
    params, cfg, base = toy_policy(run)
    targets = [FIRST_TARGET + i for i in range(run.num_targets)]
    env = RepeatTargetEnv(run.length)
    result = train(
        rc,
        workdir,
        env=env,
        params=params,
        cfg=cfg,
        train_examples=targets * 64,
        eval_examples=targets,
        eos_ids=(EOS,),
        pad_id=PAD,
        base_source=base,
    )
    if "interrupted_at" in result:  # config.stop_after: a simulated crash, nothing to sum up
        print(json.dumps({"interrupted_at": result["interrupted_at"]}), flush=True)
        return
    print(summary_line(result), flush=True)


__all__ = [
    "RepeatTargetEnv",
    "ToyModel",
    "ToyRun",
    "toy_decoder_config",
    "toy_policy",
    "train_job",
]
