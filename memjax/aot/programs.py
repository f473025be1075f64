"""The jitted functions an RL job runs, with abstract arguments laid out over a target's mesh.

    job = JobShape.from_config(config)               # rows, lengths, algorithm, from the config
    for program in job_programs(job, mesh):          # policy step, critic step, ref log-probs,
        compiled = program.lower().compile()         # sampler prefill and decode

Arguments are `jax.ShapeDtypeStruct`s carrying the NamedShardings the job gives them (train
state and batch under the train rules, sampler weights and KV cache under the sampling rules),
so nothing is allocated. The functions are the job's own: `train_step.policy_train_step` (its
micro-batch scan and remat), `train_step.critic_train_step`, `logprobs.make_logprob_fn`, and
the sampler's `loop.prefill_new` / `loop.decode`, called with the arguments the trainer and the
sampler build (memjax/rl/trainer.py, memjax/sampling/sampler.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from memjax import planning
from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract
from memjax.models.kv_cache import CACHE_AXES, KVCache
from memjax.models.params import is_info
from memjax.parallel import named_sharding, normalize_rules, param_shardings
from memjax.rl import critic as critic_lib
from memjax.rl import train_step
from memjax.rl.logprobs import make_logprob_fn
from memjax.rl.optimizer import make_optimizer
from memjax.rl.trainer import loss_config, optimizer_config
from memjax.sampling import loop
from memjax.sampling.padding import bucket_length, cache_length
from memjax.sampling.sampling_params import SamplingParams


@dataclasses.dataclass(frozen=True)
class JobShape:
    """The sizes of one RL step, read from a paper config (the planner's Workload plus the
    rows of an update and the sampler's settings)."""

    workload: planning.Workload
    algorithm: str  # "grpo" | "ppo" (multi_context_grpo compiles as grpo)
    rows: int  # rows of one optimizer update (mini-batch questions x group size)
    step_rows: int  # rows of one step (questions x group size): the log-prob pass's batch
    group_size: int
    prompt_len: int
    response_len: int
    temperature: float
    loss_section: dict
    optimizer_section: dict
    critic_optimizer_section: dict

    @property
    def cfg(self) -> DecoderConfig:
        return self.workload.cfg

    @property
    def num_micro_batches(self) -> int:
        """As the Memory-R1 adapter sizes them: rows / (micro_batch_per_device x devices)."""
        devices = self.workload.hardware.num_devices
        per_step = self.workload.micro_batch_per_device * devices
        return max(1, self.rows // per_step)

    @classmethod
    def from_config(cls, config, **overrides) -> JobShape:
        w = planning.workload_from_config(config, **overrides)
        train, rollout = config.train, config.rollout
        group = int(rollout.get("group_size", 1))
        mini = int(train.get("mini_batch_size", train.get("batch_size", 1)))
        algorithm = "ppo" if str(train.get("algorithm", "grpo")) == "ppo" else "grpo"
        return cls(
            workload=w,
            algorithm=algorithm,
            rows=mini * group,
            step_rows=int(train.get("batch_size", mini)) * group,
            group_size=group,
            prompt_len=int(rollout.max_prompt_length),
            response_len=int(rollout.max_response_length),
            temperature=float(rollout.get("temperature", 1.0)),
            loss_section=dict(config.get("loss", {})),
            optimizer_section=dict(config.get("optimizer", {})),
            critic_optimizer_section=dict(config.get("critic_optimizer", {})),
        )


@dataclasses.dataclass
class Program:
    """One jitted function with its abstract arguments, and what the planner says of it."""

    name: str
    fn: Callable  # a jax.jit-wrapped function
    args: tuple
    kwargs: dict
    planner: dict[
        str, int
    ]  # "arguments", "outputs", "temporaries" (bytes/device); absent = no figure
    resident_elsewhere: int  # planner bytes resident during this call that are not its arguments
    model_flops: float  # per device, per call
    hardware_flops: float  # model FLOPs plus the recomputation remat adds
    hbm_traffic: float  # per device, per call: the bytes a roofline must stream at least
    params: dict = dataclasses.field(default_factory=dict)  # name -> abstract, for gather checks

    def lower(self):
        return self.fn.lower(*self.args, **self.kwargs)


# ------------------------------------------------------------------------------ abstract values


def _struct(info, sharding, dtype=None) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(info.shape, dtype or info.dtype, sharding=sharding)


def abstract_tree(abstract, mesh: Mesh, rules, dtype=None):
    """ShapeDtypeStructs for an ArrayInfo tree, sharded by `rules` (in `dtype` when given)."""
    shardings = param_shardings(abstract, mesh, rules)
    return jax.tree.map(lambda a, s: _struct(a, s, dtype), abstract, shardings, is_leaf=is_info)


def abstract_state(abstract, optimizer, mesh: Mesh, rules):
    """The TrainState the trainer builds (`init_train_state`), as sharded abstract values, and
    its shardings (`train_state_shardings`)."""
    sh = train_step.train_state_shardings(abstract, optimizer, mesh, rules)
    shapes = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), abstract, is_leaf=is_info
    )
    opt_shapes = jax.eval_shape(optimizer.init, shapes)
    with_sharding = lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s)
    scalar = lambda: jax.ShapeDtypeStruct((), jnp.int32, sharding=sh.step)
    return train_step.TrainState(
        params=jax.tree.map(with_sharding, shapes, sh.params),
        opt_state=jax.tree.map(with_sharding, opt_shapes, sh.opt_state),
        step=scalar(),
        skipped=scalar(),
    ), sh


def abstract_batch(fields: dict, rows: int, length: int, mesh: Mesh, rules) -> dict:
    """[rows, length] arrays sharded as the train step shards a batch (rows over data, fsdp)."""
    sharding = named_sharding(mesh, rules, ("batch", "seq"), (rows, length))
    return {
        k: jax.ShapeDtypeStruct((rows, length), dt, sharding=sharding) for k, dt in fields.items()
    }


# ------------------------------------------------------------------------------ FLOPs


def matmul_params(cfg: DecoderConfig) -> int:
    """Weights every token multiplies by: the layers' projections and the unembedding."""
    layers = decoder_abstract(cfg)["layers"]
    n = sum(
        math.prod(a.shape)
        for name, a in layers.items()
        if name in ("q", "k", "v", "o", "gate", "up", "down")
    )
    return n + cfg.embed_dim * cfg.vocab_size


def forward_flops(cfg: DecoderConfig, rows: int, q_len: int, context: float) -> float:
    """Model FLOPs of a forward pass: 2 per weight per token, plus QK^T and PV over `context`
    keys per query on average (q_len / 2 for causal self-attention)."""
    attn = 4 * cfg.num_layers * cfg.num_heads * cfg.head_dim * context
    return rows * q_len * (2 * matmul_params(cfg) + attn)


# ------------------------------------------------------------------------------ the programs


def job_programs(job: JobShape, mesh: Mesh, only: set[str] | None = None) -> list[Program]:
    w, cfg = job.workload, job.cfg
    plan = planning.plan(w)
    parts = plan.parts
    tr, sr = normalize_rules(w.train_rules), normalize_rules(w.sampling_rules)
    n_dev = mesh.devices.size
    T = w.seq_len
    policy_abstract = decoder_abstract(cfg)
    persistent = plan.persistent
    out: list[Program] = []
    want = lambda name: only is None or name in only

    total_updates = 1000  # the schedule's length does not change shapes
    opt = make_optimizer(optimizer_config(job.optimizer_section, total_updates))
    state, sh = abstract_state(policy_abstract, opt, mesh, tr)
    train_flops = 3 * forward_flops(cfg, job.rows, T, T / 2) / n_dev
    remat_extra = forward_flops(cfg, job.rows, T, T / 2) / n_dev if cfg.remat != "none" else 0
    state_bytes = parts["policy weights"] + parts["optimizer (AdamW m, v)"]
    # Per micro-batch the gathered weights are read three times (forward, recompute, backward);
    # the update reads and writes the weights and both moments once.
    gathered = 3 * planning.tree_bytes_per_device(
        policy_abstract, tr, {**w.mesh, "fsdp": 1, "data": 1}, cfg.dtype
    )
    train_traffic = job.num_micro_batches * gathered + 2 * state_bytes

    if want("policy_train_step"):
        loss_cfg = loss_config({"loss": job.loss_section})
        fields = {
            "tokens": jnp.int32,
            "token_mask": jnp.bool_,
            "loss_mask": jnp.bool_,
            "advantages": jnp.float32,
            "old_logp": jnp.float32,
            "sampler_logp": jnp.float32,
        }
        if loss_cfg.kl_coef:
            fields["ref_logp"] = jnp.float32
        batch = abstract_batch(fields, job.rows, T, mesh, tr)
        step = train_step.policy_train_step(
            cfg,
            loss_cfg,
            opt,
            temperature=job.temperature,
            vocab_chunk=w.vocab_chunk,
            num_micro_batches=job.num_micro_batches,
            mesh=mesh,
            rules=tr,
            state_shardings=sh,
        )
        acts = sum(v for k, v in parts.items() if k.startswith("activations"))
        acts += parts["optimizer update"]
        out.append(
            Program(
                "policy_train_step",
                step._jitted(batch),  # the step's own jit: in/out shardings, donation
                (state, batch, None),  # no frozen tree: full fine-tuning
                {},
                {"arguments": state_bytes, "temporaries": parts["gradients"] + acts},
                persistent - state_bytes,
                train_flops,
                train_flops + remat_extra,
                train_traffic,
                params=policy_abstract,
            )
        )

    if job.algorithm == "ppo" and want("critic_train_step"):
        critic_abstract = critic_lib.critic_abstract(cfg)
        copt = make_optimizer(optimizer_config(job.critic_optimizer_section, total_updates))
        cstate, csh = abstract_state(critic_abstract, copt, mesh, tr)
        fields = {
            "tokens": jnp.int32,
            "token_mask": jnp.bool_,
            "loss_mask": jnp.bool_,
            "old_values": jnp.float32,
            "returns": jnp.float32,
        }
        batch = abstract_batch(fields, job.rows, T, mesh, tr)
        step = train_step.critic_train_step(
            cfg,
            copt,
            num_micro_batches=job.num_micro_batches,
            mesh=mesh,
            rules=tr,
            state_shardings=csh,
        )
        critic_state = parts["critic weights + AdamW"]
        acts = sum(
            v
            for k, v in parts.items()
            if k.startswith("activations") and k != "activations: logits"
        )
        acts += parts["optimizer update"]
        out.append(
            Program(
                "critic_train_step",
                step._jitted(batch),
                (cstate, batch, None),
                {},
                {"arguments": critic_state, "temporaries": parts["gradients"] + acts},
                persistent - critic_state,
                train_flops,
                train_flops + remat_extra,
                train_traffic,
                params=critic_abstract,
            )
        )

    if want("logprob_pass"):
        # Old log-probs (the policy's weights) and, with the KL term, reference log-probs (the
        # trainer's f32 copy of the initial weights): one jitted function, run over all the
        # rows of a step at once (trainer.on_rows), weights in the train layout.
        weights = abstract_tree(policy_abstract, mesh, tr)
        rows = job.step_rows
        batch = abstract_batch({"tokens": jnp.int32, "token_mask": jnp.bool_}, rows, T, mesh, tr)
        fn = make_logprob_fn(
            cfg, temperature=job.temperature, chunk=w.vocab_chunk, mesh=mesh, rules=tr
        )
        flops = forward_flops(cfg, rows, T, T / 2) / n_dev
        planned = {"arguments": parts["policy weights"]}
        if "log-prob pass (a chunk)" in parts:
            planned["temporaries"] = parts["log-prob pass (a chunk)"]
        out.append(
            Program(
                "logprob_pass",
                fn,
                (weights, batch["tokens"], batch["token_mask"]),
                {},
                planned,
                persistent - parts["policy weights"],
                flops,
                flops,
                gathered / 3,
                params=policy_abstract,
            )
        )

    # ---------------------------------------------------------------- the sampler
    sampler_params = abstract_tree(policy_abstract, mesh, sr, cfg.dtype)  # stacked layers
    sampler_bytes = parts["sampler weights"]
    prompt = bucket_length(job.prompt_len)
    slots = cache_length(prompt + job.response_len)
    prompts = max(1, w.decode_batch // job.group_size)
    rows_sh = named_sharding(mesh, sr, ("batch", "seq"), (prompts, prompt))
    kv_bytes = parts["KV cache"]
    if want("sampler_prefill"):
        tok = jax.ShapeDtypeStruct((prompts, prompt), jnp.int32, sharding=rows_sh)
        msk = jax.ShapeDtypeStruct((prompts, prompt), jnp.bool_, sharding=rows_sh)
        kwargs = dict(
            cfg=cfg,
            cache_size=slots,
            per_layer=False,
            group_size=job.group_size,
            mesh=mesh,
            rules=sr,
        )
        out.append(
            Program(
                "sampler_prefill",
                loop.prefill_new,
                (sampler_params, tok, msk, tok),
                kwargs,
                {
                    "arguments": sampler_bytes,
                    "outputs": kv_bytes + parts["decode logits"],
                    "temporaries": parts["rollout: prefill"],
                },
                persistent - sampler_bytes,
                forward_flops(cfg, prompts, prompt, prompt / 2) / n_dev,
                forward_flops(cfg, prompts, prompt, prompt / 2) / n_dev,
                sampler_bytes + kv_bytes,
            )
        )
    if want("sampler_decode"):
        B = w.decode_batch
        kv_sh = named_sharding(
            mesh, sr, CACHE_AXES, (cfg.num_layers, B, cfg.num_kv_heads, slots, cfg.head_dim)
        )
        kv = jax.ShapeDtypeStruct(
            (cfg.num_layers, B, cfg.num_kv_heads, slots, cfg.head_dim), cfg.dtype, sharding=kv_sh
        )
        valid_sh = named_sharding(mesh, sr, ("batch", "cache_seq"), (B, slots))
        replicated = NamedSharding(mesh, PartitionSpec())
        cache = KVCache(
            k=kv,
            v=kv,
            valid=jax.ShapeDtypeStruct((B, slots), jnp.bool_, sharding=valid_sh),
            index=jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated),
        )
        row_sh = named_sharding(mesh, sr, ("batch",), (B,))
        logits = jax.ShapeDtypeStruct(
            (B, cfg.vocab_size),
            jnp.float32,
            sharding=named_sharding(mesh, sr, ("batch", None), (B, cfg.vocab_size)),
        )
        positions = jax.ShapeDtypeStruct((B,), jnp.int32, sharding=row_sh)
        key = jax.eval_shape(lambda: jax.random.key(0))
        key = jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=replicated)
        eos = jax.ShapeDtypeStruct((2,), jnp.int32, sharding=replicated)
        stops = jax.ShapeDtypeStruct((0, 1), jnp.int32, sharding=replicated)
        sampling = SamplingParams(temperature=job.temperature, max_new_tokens=job.response_len)
        steps = job.response_len
        context = prompt + job.response_len / 2
        kwargs = dict(cfg=cfg, sampling=sampling, pad_id=0, mesh=mesh, rules=sr)
        out.append(
            Program(
                "sampler_decode",
                loop.decode,
                (sampler_params, cache, logits, positions, key, eos, stops),
                kwargs,
                {
                    "arguments": sampler_bytes + kv_bytes,
                    "temporaries": parts["rollout: decode step"],
                },
                persistent - sampler_bytes,
                steps * forward_flops(cfg, B, 1, context) / n_dev,
                steps * forward_flops(cfg, B, 1, context) / n_dev,
                steps * (sampler_bytes + kv_bytes),  # every step reads the weights and the cache
            )
        )
    return out


__all__ = ["JobShape", "Program", "job_programs", "abstract_tree", "forward_flops", "matmul_params"]
