"""The jitted functions an RL job runs, with abstract arguments laid out over a target's mesh.

    job = JobShape.from_config(config)               # rows, lengths, algorithm, from the config
    for program in job_programs(job, mesh):          # policy step, critic step, ref log-probs,
        compiled = program.lower().compile()         # sampler prefill and decode

Arguments are `jax.ShapeDtypeStruct`s carrying the NamedShardings the job gives them (train
state and batch under the train rules, sampler weights and KV cache under the sampling rules),
so nothing is allocated. The functions are the job's own: the trainer's roles
(`memjax.rl.roles`: the actor's train step with its micro-batch scan and remat, its log-prob
pass, the critic's train step), built from the config's sections as the trainer builds them;
the sampler's `loop.prefill_new` / `loop.decode`, called with the arguments the sampler builds
(memjax/sampling/sampler.py); and the continuous-batching engine's `prefill_slot` / `decode`
(memjax/engine/programs.py) over a slot cache of the sampler's size with the job's decode batch
as its slots.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from memjax import planning
from memjax.engine import programs as engine_programs
from memjax.engine.engine import PREFILL_CHUNK, STEPS_PER_CALL
from memjax.engine.token_choice import RowSettings
from memjax.models import slot_attention
from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract
from memjax.models.kv_cache import CACHE_AXES, KVCache
from memjax.models.params import is_info
from memjax.models.slot_cache import SLOT_CACHE_AXES, SlotCache
from memjax.parallel import named_sharding, normalize_rules, param_shardings
from memjax.rl.critic import critic_abstract
from memjax.rl.losses import PolicyLossConfig
from memjax.rl.roles import Actor, ActorSettings, Critic, CriticSettings
from memjax.rl.run_config import DEFAULT_VALUE_CLIP
from memjax.sampling import loop
from memjax.sampling.padding import bucket_length, cache_length
from memjax.sampling.sampling_params import SamplingParams
from memjax.training import train_step
from memjax.training.sections import read_section
from memjax.training.states import optimizer_from
from memjax.training.trained_weights import FullWeights, Trainable

_SCHEDULE_STEPS = 1000  # the optimizer schedule's length does not change a program


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
    sections: dict  # the trainer's "loss", "optimizer", "critic_optimizer" and "value_clip"

    @property
    def donates(self) -> bool:
        """Whether the train steps donate their state (`planning.Workload.donates`)."""
        return self.workload.donates

    @property
    def cfg(self) -> DecoderConfig:
        return self.workload.cfg

    @property
    def num_micro_batches(self) -> int:
        """As the jobs size them (`planning.micro_batches_for`)."""
        w = self.workload
        return planning.micro_batches_for(
            self.rows, w.micro_batch_per_device, w.mesh, w.hardware.num_devices
        )

    @classmethod
    def from_config(cls, config, **overrides) -> JobShape:
        w = planning.workload_from_config(config, **overrides)
        f = planning.job_fields(config)
        return cls(
            workload=w,
            algorithm="ppo" if f.algorithm == "ppo" else "grpo",
            rows=f.mini_batch_rows,
            step_rows=f.prompts_per_step * f.group_size,
            group_size=f.group_size,
            prompt_len=f.prompt_len,
            response_len=f.response_len,
            temperature=f.temperature,
            sections=f.sections,
        )

    # The roles' settings, read from the trainer's sections by the readers RLRunConfig uses.

    def actor_settings(self) -> ActorSettings:
        return ActorSettings(
            loss=read_section(PolicyLossConfig, self.sections["loss"], "config.loss"),
            optimizer=optimizer_from(
                self.sections["optimizer"], "config.optimizer", _SCHEDULE_STEPS
            ),
            temperature=self.temperature,
            vocab_chunk=self.workload.vocab_chunk,
            micro_batches=self.num_micro_batches,
        )

    def critic_settings(self) -> CriticSettings:
        section = self.sections["critic_optimizer"]
        return CriticSettings(
            optimizer=optimizer_from(section, "config.critic_optimizer", _SCHEDULE_STEPS),
            value_clip=self.sections.get("value_clip", DEFAULT_VALUE_CLIP),
            micro_batches=self.num_micro_batches,
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
    attention_len: int = 0  # T of its causal self-attention: a [T, T] score buffer is a finding
    widths: tuple[int, ...] = ()  # the model's feature widths (D, F, N x Hd, K x Hd)

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


@dataclasses.dataclass(frozen=True)
class _Target:
    """What every program of a job shares: its sizes, the mesh, the planner's figures, and the
    policy's train-step costs (the critic step runs the same shapes)."""

    job: JobShape
    mesh: Mesh
    parts: dict[str, int]  # the planner's bytes per device, by part
    persistent: int  # the planner's bytes resident for the whole step
    train_rules: tuple
    sampling_rules: tuple
    policy_abstract: dict
    train_flops: float  # per device, per update: forward + backward
    remat_flops: float  # per device, per update: the forward remat recomputes
    gathered: float  # bytes of weights one micro-batch reads, gathered (three passes)

    @property
    def devices(self) -> int:
        return self.mesh.devices.size

    @property
    def state_bytes(self) -> int:
        return self.parts["policy weights"] + self.parts["optimizer (AdamW m, v)"]

    @property
    def train_traffic(self) -> float:
        """Bytes a train step streams at least: the gathered weights per micro-batch, and the
        update reading and writing the weights and both moments once."""
        return self.job.num_micro_batches * self.gathered + 2 * self.state_bytes


def _target(job: JobShape, mesh: Mesh) -> _Target:
    w, cfg = job.workload, job.cfg
    plan = planning.plan(w)
    tr = normalize_rules(w.train_rules)
    policy_abstract = decoder_abstract(cfg)
    n_dev = mesh.devices.size
    forward = forward_flops(cfg, job.rows, w.seq_len, w.seq_len / 2) / n_dev
    # Per micro-batch the gathered weights are read three times (forward, recompute, backward).
    gathered = 3 * planning.tree_bytes_per_device(
        policy_abstract, tr, {**w.mesh, "fsdp": 1, "data": 1}, cfg.dtype
    )
    return _Target(
        job=job,
        mesh=mesh,
        parts=plan.parts,
        persistent=plan.persistent,
        train_rules=tr,
        sampling_rules=normalize_rules(w.sampling_rules),
        policy_abstract=policy_abstract,
        train_flops=3 * forward,
        remat_flops=forward if cfg.remat != "none" else 0.0,
        gathered=gathered,
    )


def _step_planner(job: JobShape, parts: dict[str, int], state: int, *, logits: bool) -> dict:
    """The planner's figures for a train step whose trained state is `state` bytes (weights and
    both moments; without `logits`, the critic's step, which has no vocabulary slab).

    Donating, the new state overwrites the old and the update's temporaries are counted apart.
    Not donating, the new state has buffers of its own, and the compiler keeps the layer,
    weights and logits working sets in them until the update writes them (all but buffers
    larger than any of the new state's, `planning.buffers_apart`): its outputs and
    temporaries split freely, so their sum (the step's working set) is what is compared."""
    acts = {
        k: v
        for k, v in parts.items()
        if k.startswith("activations") and (logits or k != "activations: logits")
    }
    if job.donates:
        temporaries = parts["gradients"] + sum(acts.values()) + parts["optimizer update"]
        return {"arguments": state, "temporaries": temporaries}
    apart = planning.buffers_apart(job.workload) if logits else 0
    working = parts["gradients"] + planning.undonated_step_bytes(acts, state, apart=apart)
    return {"arguments": state, "outputs": state, "working set": working}


def _actor(t: _Target) -> Actor:
    """The trainer's actor over the job's mesh (full fine-tuning: the paper configs')."""
    job = t.job
    return Actor(
        FullWeights(None, job.cfg).policy,
        job.cfg,
        job.actor_settings(),
        mesh=t.mesh,
        rules=t.train_rules,
        donate=job.donates,
    )


def _policy_train_step(t: _Target) -> Program:
    job, w = t.job, t.job.workload
    actor = _actor(t)
    state, _ = abstract_state(actor.trainable.abstract, actor.optimizer, t.mesh, t.train_rules)
    batch = abstract_batch(actor.fields, job.rows, w.seq_len, t.mesh, t.train_rules)
    return Program(
        "policy_train_step",
        actor.train_step.jitted(batch),  # the step's own jit: in/out shardings, donation
        (state, batch, None),  # no frozen tree: full fine-tuning
        {},
        _step_planner(job, t.parts, t.state_bytes, logits=True),
        t.persistent - t.state_bytes,
        t.train_flops,
        t.train_flops + t.remat_flops,
        t.train_traffic,
        params=t.policy_abstract,
        attention_len=w.seq_len,
    )


def _critic_train_step(t: _Target) -> Program:
    job = t.job
    trainable = Trainable(None, critic_abstract(job.cfg))  # a whole critic, as FullWeights'
    critic = Critic(
        trainable,
        job.cfg,
        job.critic_settings(),
        mesh=t.mesh,
        rules=t.train_rules,
        donate=job.donates,
    )
    state, _ = abstract_state(trainable.abstract, critic.optimizer, t.mesh, t.train_rules)
    batch = abstract_batch(critic.fields, job.rows, job.workload.seq_len, t.mesh, t.train_rules)
    critic_state = t.parts["critic weights + AdamW"]
    return Program(
        "critic_train_step",
        critic.train_step.jitted(batch),
        (state, batch, None),
        {},
        _step_planner(job, t.parts, critic_state, logits=False),
        t.persistent - critic_state,
        t.train_flops,
        t.train_flops + t.remat_flops,
        t.train_traffic,
        params=trainable.abstract,
        attention_len=job.workload.seq_len,
    )


def _logprob_pass(t: _Target) -> Program:
    """Old log-probs (the policy's weights) and, with the KL term, reference log-probs (the
    trainer's copy of the initial weights): the actor's jitted pass over a step's rows, which
    walks them in chunks, weights in the train layout."""
    job, w = t.job, t.job.workload
    weights = abstract_tree(t.policy_abstract, t.mesh, t.train_rules)
    rows = job.step_rows
    fields = {"tokens": jnp.int32, "token_mask": jnp.bool_}
    batch = abstract_batch(fields, rows, w.seq_len, t.mesh, t.train_rules)
    flops = forward_flops(job.cfg, rows, w.seq_len, w.seq_len / 2) / t.devices
    planned = {"arguments": t.parts["policy weights"]}
    if "log-prob pass (a chunk)" in t.parts:
        planned["temporaries"] = t.parts["log-prob pass (a chunk)"]
    return Program(
        "logprob_pass",
        _actor(t).logprob_fn,
        (weights, batch["tokens"], batch["token_mask"]),
        {},
        planned,
        t.persistent - t.parts["policy weights"],
        flops,
        flops,
        t.gathered / 3,
        params=t.policy_abstract,
        attention_len=w.seq_len,
    )


@dataclasses.dataclass(frozen=True)
class _SamplerShapes:
    params: dict  # abstract sampler weights (stacked layers, compute dtype)
    prompt: int  # the prompt's bucketed length
    slots: int  # KV cache length
    prompts: int  # distinct prompts of a decode batch (each sampled group_size times)


def _sampler_shapes(t: _Target) -> _SamplerShapes:
    job = t.job
    prompt = bucket_length(job.prompt_len)
    return _SamplerShapes(
        params=abstract_tree(t.policy_abstract, t.mesh, t.sampling_rules, job.cfg.dtype),
        prompt=prompt,
        slots=_sampler_shapes_size(job),
        prompts=max(1, job.workload.decode_batch // job.group_size),
    )


def _sampler_prefill(t: _Target) -> Program:
    job, s = t.job, _sampler_shapes(t)
    chunk = job.workload.prefill_chunk
    if chunk and s.prompt > chunk:
        return _sampler_prefill_chunk(t, s, chunk)
    rows_sh = named_sharding(t.mesh, t.sampling_rules, ("batch", "seq"), (s.prompts, s.prompt))
    tok = jax.ShapeDtypeStruct((s.prompts, s.prompt), jnp.int32, sharding=rows_sh)
    msk = jax.ShapeDtypeStruct((s.prompts, s.prompt), jnp.bool_, sharding=rows_sh)
    kwargs = dict(
        cfg=job.cfg,
        cache_size=s.slots,
        per_layer=False,
        group_size=job.group_size,
        mesh=t.mesh,
        rules=t.sampling_rules,
    )
    weights, kv = t.parts["sampler weights"], t.parts["KV cache"]
    flops = forward_flops(job.cfg, s.prompts, s.prompt, s.prompt / 2) / t.devices
    return Program(
        "sampler_prefill",
        loop.prefill_new,
        (s.params, tok, msk, tok),
        kwargs,
        {
            "arguments": weights,
            "outputs": kv + t.parts["decode logits"],
            "temporaries": t.parts["rollout: prefill"],
        },
        t.persistent - weights,
        flops,
        flops,
        weights + kv,
        attention_len=s.prompt,
    )


def _sampler_prefill_chunk(t: _Target, s: _SamplerShapes, chunk: int) -> Program:
    """A chunked prefill's steady program (memjax/sampling/chunk.py): `chunk` more columns of
    every prompt appended to the prompts' cache (donated), attending over every slot (the XLA
    cached path, whatever the attention: only a first prefill runs a fused kernel)."""
    job = t.job
    rows_sh = named_sharding(t.mesh, t.sampling_rules, ("batch", "seq"), (s.prompts, chunk))
    tok = jax.ShapeDtypeStruct((s.prompts, chunk), jnp.int32, sharding=rows_sh)
    msk = jax.ShapeDtypeStruct((s.prompts, chunk), jnp.bool_, sharding=rows_sh)
    weights = t.parts["sampler weights"]
    # The prompts' rows of the cache, before the last chunk widens them into groups.
    kv = t.parts["KV cache"] * s.prompts // max(s.prompts, job.workload.decode_batch)
    flops = forward_flops(job.cfg, s.prompts, chunk, s.prompt / 2) / t.devices
    return Program(
        "sampler_prefill",
        loop.prefill,
        (s.params, tok, msk, tok, _decode_cache(t, s.prompts, s.slots)),
        dict(cfg=job.cfg, mesh=t.mesh, rules=t.sampling_rules),
        {"arguments": weights + kv, "temporaries": t.parts["rollout: prefill"]},
        t.persistent - weights,
        flops,
        flops,
        weights + kv,
        attention_len=s.prompt,
    )


def _decode_cache(t: _Target, rows: int, slots: int) -> KVCache:
    cfg, mesh, rules = t.job.cfg, t.mesh, t.sampling_rules
    shape = (cfg.num_layers, rows, cfg.num_kv_heads, slots, cfg.head_dim)
    kv = jax.ShapeDtypeStruct(
        shape, cfg.dtype, sharding=named_sharding(mesh, rules, CACHE_AXES, shape)
    )
    valid_sh = named_sharding(mesh, rules, ("batch", "cache_seq"), (rows, slots))
    return KVCache(
        k=kv,
        v=kv,
        valid=jax.ShapeDtypeStruct((rows, slots), jnp.bool_, sharding=valid_sh),
        index=jax.ShapeDtypeStruct((), jnp.int32, sharding=NamedSharding(mesh, PartitionSpec())),
    )


@partial(
    jax.jit,
    static_argnames=("cfg", "sampling", "pad_id", "mesh", "rules"),
    donate_argnames=("cache",),
)
def _static_decode(params, cache, logits, positions, key, eos_ids, stops, **static):
    """The sampler's decode loop as one program: the static batch (no compaction, whose batch
    changes are host decisions between programs), the cache donated as the sampler does."""
    r = loop.decode(params, cache, logits, positions, key, eos_ids, stops, **static)
    return r.tokens, r.logprobs, r.lengths, r.reason, r.cache


def _sampler_decode(t: _Target) -> Program:
    job, s = t.job, _sampler_shapes(t)
    cfg, mesh, rules = job.cfg, t.mesh, t.sampling_rules
    B = job.workload.decode_batch
    replicated = NamedSharding(mesh, PartitionSpec())
    logits = jax.ShapeDtypeStruct(
        (B, cfg.vocab_size),
        jnp.float32,
        sharding=named_sharding(mesh, rules, ("batch", None), (B, cfg.vocab_size)),
    )
    positions = jax.ShapeDtypeStruct(
        (B,), jnp.int32, sharding=named_sharding(mesh, rules, ("batch",), (B,))
    )
    key = jax.eval_shape(lambda: jax.random.key(0))
    key = jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=replicated)
    eos = jax.ShapeDtypeStruct((2,), jnp.int32, sharding=replicated)
    stops = jax.ShapeDtypeStruct((0, 1), jnp.int32, sharding=replicated)
    sampling = SamplingParams(temperature=job.temperature, max_new_tokens=job.response_len)
    steps, context = job.response_len, s.prompt + job.response_len / 2
    weights, kv = t.parts["sampler weights"], t.parts["KV cache"]
    flops = steps * forward_flops(cfg, B, 1, context) / t.devices
    return Program(
        "sampler_decode",
        _static_decode,
        (s.params, _decode_cache(t, B, s.slots), logits, positions, key, eos, stops),
        dict(cfg=cfg, sampling=sampling, pad_id=0, mesh=mesh, rules=rules),
        {"arguments": weights + kv, "temporaries": t.parts["rollout: decode step"]},
        t.persistent - weights,
        flops,
        flops,
        steps * (weights + kv),  # every step reads the weights and the cache
    )


def _slot_cache(t: _Target, rows: int, size: int, *, per_layer: bool = False) -> SlotCache:
    """The engine's slot cache [L, rows, K, size, Hd] (or L x [rows, K, size, Hd]), laid out
    as the sampler's."""
    cfg, mesh, rules = t.job.cfg, t.mesh, t.sampling_rules
    shape = (cfg.num_layers, rows, cfg.num_kv_heads, size, cfg.head_dim)
    axes = SLOT_CACHE_AXES
    if per_layer:
        shape, axes = shape[1:], axes[1:]
    kv = jax.ShapeDtypeStruct(shape, cfg.dtype, sharding=named_sharding(mesh, rules, axes, shape))
    if per_layer:
        return SlotCache(k=(kv,) * cfg.num_layers, v=(kv,) * cfg.num_layers)
    return SlotCache(k=kv, v=kv)


def _per_layer(params: dict, num_layers: int) -> dict:
    """Abstract stacked weights as L per-layer trees (`decoder.unstack_layers`'s layout)."""

    def one(a):
        spec = a.sharding.spec
        sharding = NamedSharding(a.sharding.mesh, PartitionSpec(*spec[1:]))
        return jax.ShapeDtypeStruct(a.shape[1:], a.dtype, sharding=sharding)

    layer = jax.tree.map(one, params["layers"])
    return {**params, "layers": [layer] * num_layers}


def _slot_state(t: _Target, rows: int) -> engine_programs.SlotState:
    per_row = named_sharding(t.mesh, t.sampling_rules, ("batch",), (rows,))
    row = lambda dtype: jax.ShapeDtypeStruct((rows,), dtype, sharding=per_row)
    keys = named_sharding(t.mesh, t.sampling_rules, ("batch", None), (rows, 2))
    settings = RowSettings(
        temperature=row(jnp.float32),
        top_k=row(jnp.int32),
        top_p=row(jnp.float32),
        greedy=row(jnp.bool_),
        key=jax.ShapeDtypeStruct((rows, 2), jnp.uint32, sharding=keys),
        row=row(jnp.int32),
    )
    return engine_programs.SlotState(
        token=row(jnp.int32),
        length=row(jnp.int32),
        live=row(jnp.bool_),
        produced=row(jnp.int32),
        limit=row(jnp.int32),
        settings=settings,
    )


def _engine_decode(t: _Target, *, per_layer: bool = False) -> Program:
    """The engine's decode call (memjax/engine/programs.py): its slots are the job's decode
    batch, its cache the sampler's length, and the window the whole cache (the worst case: a
    row at the end of its response). Stacked weights and cache, as the engine holds them on an
    accelerator, attend over the window in XLA; `per_layer` compiles the per-layer layout,
    where the backend's decode kernel reads each row's live slots (`slot_attention`)."""
    job, s = t.job, _sampler_shapes(t)
    cfg, B, steps = job.cfg, job.workload.decode_batch, STEPS_PER_CALL
    replicated = NamedSharding(t.mesh, PartitionSpec())
    eos = jax.ShapeDtypeStruct((2,), jnp.int32, sharding=replicated)
    weights, kv = t.parts["sampler weights"], t.parts["KV cache"]
    flops = steps * forward_flops(cfg, B, 1, s.slots) / t.devices
    kwargs = dict(
        cfg=cfg, window=s.slots, steps=steps, filtered=False, mesh=t.mesh, rules=t.sampling_rules
    )
    params = _per_layer(s.params, cfg.num_layers) if per_layer else s.params
    cache = _slot_cache(t, B, s.slots, per_layer=per_layer)
    return Program(
        "engine_decode_kernel" if per_layer else "engine_decode",
        engine_programs.decode,
        (params, cache, _slot_state(t, B), eos),
        kwargs,
        # The sampler's decode step: the same weights, cache and per-step working set.
        {"arguments": weights + kv, "temporaries": t.parts["rollout: decode step"]},
        t.persistent - weights,
        flops,
        flops,
        steps * (weights + kv),  # the worst case: every row reads the whole cache
    )


def _engine_prefill(t: _Target) -> Program:
    """The engine's prompt chunk into one slot: its default chunk, at the end of the cache."""
    job, s = t.job, _sampler_shapes(t)
    cfg, B = job.cfg, job.workload.decode_batch
    chunk = min(bucket_length(PREFILL_CHUNK), s.prompt)
    replicated = NamedSharding(t.mesh, PartitionSpec())
    scalar = jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated)
    tokens = jax.ShapeDtypeStruct((1, chunk), jnp.int32, sharding=replicated)
    weights, kv = t.parts["sampler weights"], t.parts["KV cache"]
    flops = forward_flops(cfg, 1, chunk, s.slots) / t.devices
    return Program(
        "engine_prefill",
        engine_programs.prefill_slot,
        (s.params, _slot_cache(t, B, s.slots), scalar, tokens, scalar, scalar),
        dict(cfg=cfg, window=s.slots, mesh=t.mesh, rules=t.sampling_rules),
        # No planner temporaries: the planner sizes the lock-step prefill over every prompt
        # at once, not one slot's chunk.
        {"arguments": weights + kv},
        t.persistent - weights,
        flops,
        flops,
        weights + kv * chunk // max(B * s.slots, 1),
        attention_len=chunk,
    )


# The functions a job runs, in the order a step runs them (the engine's two stand in for the
# sampler's where rollouts run on the continuous-batching engine).
PROGRAMS: dict[str, Callable[[_Target], Program]] = {
    "policy_train_step": _policy_train_step,
    "critic_train_step": _critic_train_step,  # PPO only
    "logprob_pass": _logprob_pass,
    "sampler_prefill": _sampler_prefill,
    "sampler_decode": _sampler_decode,
    "engine_prefill": _engine_prefill,
    "engine_decode": _engine_decode,
    # Only where the target has a decode kernel for the engine's cache (GPU, TPU).
    "engine_decode_kernel": partial(_engine_decode, per_layer=True),
}


def has_decode_kernel(job: JobShape, mesh: Mesh) -> bool:
    """Whether the engine's decode on `mesh` runs a Pallas kernel (`slot_attention`)."""
    size = _sampler_shapes_size(job)
    return bool(slot_attention.kernel_for(job.cfg.attention, mesh, size))


def _sampler_shapes_size(job: JobShape) -> int:
    return cache_length(bucket_length(job.prompt_len) + job.response_len)


def job_programs(job: JobShape, mesh: Mesh, only: set[str] | None = None) -> list[Program]:
    """The job's programs (all, or those named in `only`), with abstract arguments on `mesh`."""
    target = _target(job, mesh)
    names = [n for n in PROGRAMS if only is None or n in only]
    if job.algorithm != "ppo":
        names = [n for n in names if n != "critic_train_step"]
    if not has_decode_kernel(job, mesh):
        names = [n for n in names if n != "engine_decode_kernel"]
    cfg = job.cfg
    widths = (
        cfg.embed_dim,
        cfg.mlp_dim,
        cfg.num_heads * cfg.head_dim,
        cfg.num_kv_heads * cfg.head_dim,
    )
    return [dataclasses.replace(PROGRAMS[n](target), widths=widths) for n in names]


__all__ = [
    "JobShape",
    "PROGRAMS",
    "Program",
    "job_programs",
    "has_decode_kernel",
    "abstract_tree",
    "forward_flops",
    "matmul_params",
]
