"""The RL trainer: prompts -> rollouts -> rewards -> advantages -> K epochs of updates.

    summary = train(config, workdir, env=env, params=params, cfg=cfg,
                    train_examples=examples, eval_examples=held_out, eos_ids=[2], pad_id=0)

One step of `RLTask`:
  1. `prompts_per_step` examples from a grain pipeline (its position is checkpointed);
  2. `group_size` episodes each through the environment and the on-device sampler (in
     lock-step turns, or on the continuous-batching engine with `rl.rollout_engine`);
  3. advantages: GRPO group-normalised per trajectory, broadcast to all its contexts
     (multi-context GRPO); or PPO: critic values + GAE over the trainable tokens;
  4. old log-probs (recomputed by the trainer, or the sampler's), reference log-probs when the
     KL term is on;
  5. `epochs` passes over the mini-batch plan (memjax.rl.minibatches: `mini_batches` shuffled
     ones, or MemSearcher's in-order chunks of `mini_batch_rows`), one optimizer update each
     (micro-batched inside the train step).
The loop around it (resume, logging, evaluation, plots, checkpoints) is `memjax.training.loop`,
shared with SFT.

With `lora.rank` > 0 the policy trains adapters over the frozen base it was given
(`memjax.training.lora_state.FrozenBase`): the KL reference is that base with the adapters off, the
sampler gets the adapters merged into its copy, the PPO critic trains adapters and its head over
the same base, checkpoints hold adapters and optimizer state, their run spec a pointer to the base, and the
result's "params" are the merged weights ("adapters" beside them).

On several hosts (`memjax.distributed`) every process reads its own shard of the examples, rolls
out its share of the prompts and packs its own rows; the train steps, log-probs and values run on
global arrays over the whole mesh (`host_batches`), the rollout metrics and PPO's advantage
whitening are taken over all hosts.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import grain
import jax
import jax.numpy as jnp
import numpy as np

from memjax import distributed
from memjax.engine import Engine
from memjax.errors import ConfigError, DataError
from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract
from memjax.models.frozen import frozen_copy
from memjax.models.lora import lora_abstract
from memjax.parallel import SAMPLING_RULES, TRAIN_RULES
from memjax.rl import advantages as adv_lib
from memjax.rl import critic as critic_lib
from memjax.rl import losses, steps
from memjax.rl.engine_rollout import run_on_engine
from memjax.rl.environment import Environment
from memjax.rl.minibatches import pad_plan, padded_size, plan_mini_batches, take_rows
from memjax.rl.rollout import Completion, pack, run_in_waves
from memjax.rl.run_config import ALGOS, RLRunConfig, wave_problem
from memjax.rl.shared_prefix import SHARED_PREFIX_GRANULARITY, restore_order, share_prefixes
from memjax.sampling.sampling_params import SamplingParams
from memjax.training import host_batches
from memjax.training import lora_state as lora_lib
from memjax.training.logprobs import (
    LOGPROB_ROWS_PER_DEVICE,
    logprob_chunks,
    make_logprob_fn,
    position_width,
    trained_positions,
)
from memjax.training.loop import model_spec, run_loop
from memjax.training.optimizer import OptimizerConfig
from memjax.training.sections import read_section
from memjax.training.states import build_state, mesh_from, optimizer_from, rows_multiple

POLICY_KEYS = (
    "tokens",
    "token_mask",
    "loss_mask",
    "advantages",
    "old_logp",
    "ref_logp",
    "loss_positions",
    "loss_valid",
)
CRITIC_KEYS = ("tokens", "token_mask", "loss_mask", "old_values", "returns")


def loss_config(config) -> losses.PolicyLossConfig:
    return read_section(losses.PolicyLossConfig, config.get("loss"), "config.loss")


def optimizer_config(section, total_steps: int) -> OptimizerConfig:
    return optimizer_from(section, "config.optimizer", total_steps)


def make_generate(cfg: DecoderConfig, sampling, eos_ids, pad_id: int, mesh=None):
    """Wraps memjax's on-device sampler as the rollout loop's `generate(prompts, rng)`; the
    parameters are read from `generate.params` at call time. `sampling` is SamplingParams or a
    sampling section."""
    from memjax.sampling.sampler import sample

    if not isinstance(sampling, SamplingParams):
        sampling = read_section(SamplingParams, sampling, "sampling")
    rules = SAMPLING_RULES if mesh is not None else None

    def generate(prompts, rng):
        out = sample(
            generate.params,
            cfg,
            prompts,
            sampling,
            rng,
            eos_ids=tuple(eos_ids),
            pad_id=pad_id,
            mesh=mesh,
            rules=rules,
        )
        tokens, logps = np.asarray(out.tokens), np.asarray(out.logprobs)
        lengths = np.asarray(out.lengths)
        reasons = list(out.stop_reason) if out.stop_reason is not None else None
        return [
            Completion(
                tokens[i, : lengths[i]].tolist(),
                logps[i, : lengths[i]].tolist(),
                str(reasons[i]) if reasons is not None else "",
            )
            for i in range(len(prompts))
        ]

    generate.params = None
    return generate


def example_stream(examples, seed: int):
    """This host's shard of `examples`, shuffled and repeated, as a checkpointable iterator."""
    examples = list(examples)
    if not examples:  # else the first step's next() raises a bare StopIteration
        raise DataError("train_examples is empty: there is nothing to train on")
    dataset = grain.MapDataset.source(examples)
    if host_batches.multi_host():
        shard, shards = distributed.data_shard()
        dataset = dataset[shard::shards]
        if not len(dataset):
            raise DataError(
                f"{len(examples)} training examples leave none for process {shard} of {shards}"
            )
    return iter(dataset.shuffle(seed=seed).repeat().to_iter_dataset())


class RLTask:
    """One RL step for `memjax.training.loop.run_loop` (see its Task protocol)."""

    record_prefix = "rollout"
    curve = "reward"
    eval_key = "reward"
    best_mode = "max"

    def __init__(
        self,
        rc: RLRunConfig,
        *,
        env,
        params,
        cfg,
        train_examples,
        eval_examples,
        eos_ids,
        pad_id,
        critic_params=None,
        generate=None,
        eval_env=None,
        base_source: str = "",
    ):
        if rc.lora is not None:
            cfg = cfg.replace(lora=rc.lora)
        if rc.shared_prefix and host_batches.multi_host():
            raise ConfigError(
                "config.rl.shared_prefix: one host only (a global micro-batch holds every "
                "host's rows, which share no prompt); set it to 0"
            )
        self.rc, self.env, self.cfg = rc, env, cfg
        self.eos_ids, self.pad_id = tuple(eos_ids), pad_id
        self.label = rc.algo
        self.mesh = mesh_from(rc.mesh)
        self.rules = TRAIN_RULES if self.mesh is not None else None
        if self.mesh is not None:  # a -1 axis is sized only now, from the devices there are
            problem = wave_problem(rc.decode_batch, rc.group_size, dict(self.mesh.shape))
            if problem is not None:
                raise ConfigError(f"decode_batch={rc.decode_batch} on {self.mesh.shape}: {problem}")
        if rc.mini_batch.mode == "in_order":  # each mini-batch is padded on its own
            self.rows_multiple = rows_multiple(1, rc.micro_batches, self.mesh)
            self.mini_batch_size = padded_size(rc.mini_batch, self.rows_multiple)
        else:
            self.rows_multiple = rows_multiple(rc.mini_batches, rc.micro_batches, self.mesh)
        self.eval_examples = list(eval_examples)
        self.has_eval = bool(self.eval_examples)
        self.eval_env = eval_env or env
        self.source = env
        self.base_source = base_source  # with LoRA: named in the checkpoints' base pointer
        self.data_iterator = example_stream(train_examples, rc.loop.seed)
        self._build_states(params, critic_params)
        self._build_generate(generate)

    # ---------------------------------------------------------------- construction

    def _build_states(self, params, critic_params) -> None:
        rc, cfg, mesh = self.rc, self.cfg, self.mesh
        self.lora = None
        trainable, abstract, step_kwargs = params, decoder_abstract(cfg), {}
        # The KL reference in the dtypes the forward reads (same log-probs, half of f32).
        self.ref_params = frozen_copy(params, cfg.dtype) if rc.loss.kl_coef else None
        if rc.lora is not None:
            self.lora = lora_lib.FrozenBase(params, cfg, source=self.base_source, mesh=mesh)
            trainable = lora_lib.init_policy_adapters(cfg, jax.random.key(rc.loop.seed))
            abstract, step_kwargs = lora_abstract(cfg), self.lora.policy_kwargs
            self.ref_params = self.lora.params if rc.loss.kl_coef else None  # adapters off
        policy = build_state(trainable, abstract, rc.optimizer, mesh)
        self.states: dict[str, Any] = {"policy": policy.state}
        temperature = rc.sampling.temperature
        self.policy_step = steps.policy_train_step(
            cfg,
            rc.loss,
            policy.optimizer,
            temperature=temperature,
            vocab_chunk=rc.vocab_chunk,
            num_micro_batches=rc.micro_batches,
            mesh=mesh,
            state_shardings=policy.shardings,
            **step_kwargs,
        )
        if self.lora is not None:
            self.policy_step = self.lora.bind(self.policy_step)
        self.logprob_fn = make_logprob_fn(
            cfg, temperature=temperature, chunk=rc.vocab_chunk, mesh=mesh, rules=self.rules
        )
        if rc.algo == "ppo":
            self._build_critic(params, critic_params)

    def _build_critic(self, params, critic_params) -> None:
        rc, cfg, mesh = self.rc, self.cfg, self.mesh
        if self.lora is not None:
            self._build_lora_critic(critic_params)
            return
        if critic_params is None:
            critic_params = critic_lib.critic_from_policy(params, cfg)
        critic = build_state(
            critic_params, critic_lib.critic_abstract(cfg), rc.critic_optimizer, mesh
        )
        self.states["critic"] = critic.state
        self.critic_step = steps.critic_train_step(
            cfg,
            critic.optimizer,
            value_clip=rc.value_clip,
            num_micro_batches=rc.micro_batches,
            mesh=mesh,
            state_shardings=critic.shardings,
        )
        rules = self.rules
        self.value_fn = jax.jit(
            lambda p, t, m: critic_lib.critic_values(p, cfg, t, m, mesh=mesh, rules=rules)
        )

    def _build_lora_critic(self, critic_params) -> None:
        """Adapters and the value head over a frozen backbone: the policy's base, or the given
        critic's (its head kept)."""
        rc, cfg, mesh, rules = self.rc, self.cfg, self.mesh, self.rules
        trainable = critic_lib.init_critic_trainable(cfg, jax.random.key(rc.loop.seed + 1))
        if critic_params is None:
            frozen = critic_lib.critic_backbone_of(self.lora.params)
        else:
            frozen = critic_params["backbone"]
            trainable.update(head=critic_params["head"], bias=critic_params["bias"])
        kwargs = critic_lib.critic_step_kwargs(cfg, mesh)
        if kwargs["frozen_shardings"] is not None:
            frozen = jax.device_put(frozen, kwargs["frozen_shardings"])
        abstract = critic_lib.critic_trainable_abstract(cfg)
        critic = build_state(trainable, abstract, rc.critic_optimizer, mesh)
        self.states["critic"] = critic.state
        step = steps.critic_train_step(
            cfg,
            critic.optimizer,
            value_clip=rc.value_clip,
            num_micro_batches=rc.micro_batches,
            mesh=mesh,
            state_shardings=critic.shardings,
            **kwargs,
        )
        self.critic_step = self.lora.bind(step, frozen)
        values = jax.jit(
            lambda f, p, t, m: critic_lib.critic_values(
                critic_lib.compose_critic(f, p), cfg, t, m, mesh=mesh, rules=rules
            )
        )
        self.value_fn = lambda p, t, m: values(frozen, p, t, m)

    def _policy_params(self):
        """The policy as log-probs see it (with LoRA: the base with the adapters on)."""
        params = self.states["policy"].params
        return params if self.lora is None else self.lora.policy(params)

    def _sampler_params(self):
        """The policy as the sampler gets it (with LoRA: the adapters merged in)."""
        params = self.states["policy"].params
        return params if self.lora is None else self.lora.merged(params)

    def _build_generate(self, generate) -> None:
        # The engine takes the stop strings (and the tokenizer that spells them) a caller's
        # generate was built with (`make_rollout_generate`); the default one has none.
        self.stop_strings = tuple(getattr(generate, "stop_strings", ()))
        self.tokenizer = getattr(generate, "tokenizer", None)
        self.eval_generate = generate  # a caller-supplied generate serves both
        if generate is None:
            sampling = self.rc.sampling
            args = (self.cfg, sampling, self.eos_ids, self.pad_id, self.mesh)
            generate = make_generate(*args)
            greedy = dataclasses.replace(sampling, greedy=True)
            self.eval_generate = make_generate(self.cfg, greedy, *args[2:])
        self.generate = generate

    # ---------------------------------------------------------------- one step

    def step(self, step: int, key) -> tuple[dict, dict]:
        rc = self.rc
        P_local = distributed.host_batch_size(rc.prompts_per_step)
        examples = [next(self.data_iterator) for _ in range(P_local)]
        t0 = time.perf_counter()
        trajs = self._rollouts(self.env, examples, rc.group_size, key, evaluation=False)
        t_roll = time.perf_counter() - t0
        batch, row_traj, truncated = self._pack(trajs)
        rewards = np.array([t.reward for t in trajs], np.float32)
        self._add_logprobs(batch)
        if rc.algo == "grpo":
            batch["advantages"] = self._grpo_advantages(rewards, row_traj, batch["loss_mask"])
        else:
            self._add_ppo_targets(batch, rewards, row_traj)
        metrics = self._update(batch, row_traj, np.random.default_rng([rc.loop.seed, step]))
        record = self._record(trajs, rewards, row_traj, truncated, t_roll, t0)
        return record, metrics

    def _rollouts(self, env, examples, group_size: int, key, *, evaluation: bool):
        """The episodes of `examples` with the current policy: on the engine (rl.rollout_engine)
        or in the sampler's lock-step waves. Evaluation decodes greedily."""
        rc = self.rc
        if rc.rollout_engine:
            sampling = dataclasses.replace(rc.sampling, greedy=True) if evaluation else rc.sampling
            engine = Engine(
                self._sampler_params(),
                self.cfg,
                eos_ids=self.eos_ids,
                tokenizer=self.tokenizer,
                slots=rc.slots,
                max_len=rc.seq_len,  # a context the trainer can hold, with its completion
            )
            return run_on_engine(
                env, examples, group_size, engine, sampling, key, stop_strings=self.stop_strings
            )
        generate = self.eval_generate if evaluation else self.generate
        generate.params = self._sampler_params()
        # This host's share of the rows the sampler decodes at once (the memory plan's KV cache).
        wave = distributed.host_batch_size(rc.decode_batch) if rc.decode_batch else 0
        return run_in_waves(env, examples, group_size, generate, key, self.eos_ids, wave)

    def _pack(self, trajs):
        batch = pack(trajs, self.rc.seq_len, self.pad_id, self.rows_multiple)
        if host_batches.multi_host():  # a global array takes as many rows from every host
            batch = host_batches.pad_rows(batch, host_batches.max_over_hosts(len(batch["tokens"])))
        row_traj = batch.pop("trajectory")  # [B] trajectory of each row, -1 for padding
        truncated = int(batch.pop("truncated_rows"))
        most = int(batch["loss_mask"].sum(axis=1).max(initial=0))
        if host_batches.multi_host():  # one K on every host: one global array
            most = host_batches.max_over_hosts(most)
        width = position_width(most, self.rc.seq_len)
        batch.update(trained_positions(batch["loss_mask"], width))  # [B, K] each
        return batch, row_traj, truncated

    def _on_rows(self, fn, params, batch) -> np.ndarray:
        """fn(params, tokens, token_mask) -> [B, T] over this host's rows, as numpy."""
        rows = {k: batch[k] for k in ("tokens", "token_mask")}
        rows = host_batches.to_global(rows, self.mesh, self.rules)
        out = fn(params, rows["tokens"], rows["token_mask"])
        return host_batches.to_local(out, self.mesh, self.rules)

    def _trained_rows(self, batch) -> tuple[dict, np.ndarray]:
        """The rows the log-prob passes score, on the mesh, and the order that undoes their
        arrangement (with rl.shared_prefix, regrouped so that each chunk runs the prompt its
        rows share once). Arranged once per step: the old and the reference pass share it."""
        keys = ("tokens", "token_mask", "loss_mask", "loss_positions", "loss_valid")
        rows, order = self._share_prefixes({k: batch[k] for k in keys}, self.logprob_chunks)
        return host_batches.to_global(rows, self.mesh, self.rules), order

    def _on_trained(self, params, batch, arranged) -> np.ndarray:
        """The policy's log-probs of the trained tokens, [B, T] (0 elsewhere): only those go
        through the unembedding. `arranged` is `_trained_rows(batch)`."""
        rows, order = arranged
        out = self.logprob_fn(
            params, rows["tokens"], rows["token_mask"], rows["loss_positions"], rows.get("prefix")
        )  # [B, K]
        out = restore_order(host_batches.to_local(out, self.mesh, self.rules), order)
        full = np.zeros(batch["tokens"].shape, np.float32)  # [B, T]
        r, k = np.nonzero(batch["loss_valid"])
        full[r, batch["loss_positions"][r, k]] = out[r, k]
        return full

    def _add_logprobs(self, batch) -> None:
        old_from_trainer = self.rc.old_logprobs == "trainer" or self.rc.algo == "ppo"
        if not old_from_trainer:
            batch["old_logp"] = batch["sampler_logp"]
            if self.ref_params is None:
                return
        arranged = self._trained_rows(batch)  # once: both passes score the same rows
        if old_from_trainer:
            batch["old_logp"] = self._on_trained(self._policy_params(), batch, arranged)
        if self.ref_params is not None:
            batch["ref_logp"] = self._on_trained(self.ref_params, batch, arranged)

    def _grpo_advantages(self, rewards, row_traj, loss_mask) -> np.ndarray:
        """[B, T]: each trajectory's group advantage on every trainable token of its contexts."""
        a = self.rc.advantage
        traj_adv = adv_lib.group_advantages(
            rewards,
            self.rc.group_size,
            scaling=a.scaling,
            ddof=a.ddof,
            epsilon=a.epsilon,
            singleton_group=a.singleton_group,
        )
        real = row_traj >= 0
        contexts = np.asarray(adv_lib.broadcast_to_contexts(traj_adv, np.maximum(row_traj, 0)))
        row_adv = np.where(real, contexts, 0.0)  # [B]
        return np.asarray(adv_lib.token_advantages(jnp.asarray(row_adv, jnp.float32), loss_mask))

    def _add_ppo_targets(self, batch, rewards, row_traj) -> None:
        """Critic values, GAE advantages (whitened over every host's tokens) and returns."""
        a = self.rc.advantage
        values = self._on_rows(self.value_fn, self.states["critic"].params, batch)  # [B, T]
        token_rewards = np.zeros_like(values)
        last_context = {int(i): r for r, i in enumerate(row_traj) if i >= 0}
        for i, r in last_context.items():  # the trajectory's final context gets the reward
            idx = np.nonzero(batch["loss_mask"][r])[0]
            if len(idx):
                token_rewards[r, idx[-1]] = rewards[i]
        adv, ret = adv_lib.gae(token_rewards, values, batch["loss_mask"], gamma=a.gamma, lam=a.lam)
        if a.whiten:
            adv = host_batches.whiten_global(adv, batch["loss_mask"], adv_lib.masked_whiten)
        batch["advantages"] = np.asarray(adv)
        batch["old_values"] = values
        batch["returns"] = np.asarray(ret)

    def _update(self, batch, row_traj, np_rng) -> dict[str, float]:
        """`epochs` passes over the mini-batch plan (memjax.rl.minibatches); the mean of each
        update's metrics."""
        sums: dict[str, float] = {}
        updates = 0
        for _epoch in range(self.rc.epochs):
            for rows in self._plan(row_traj, np_rng):
                mb = take_rows(batch, rows)
                for k, v in self._update_one(mb).items():
                    sums[k] = sums.get(k, 0.0) + float(v)
                updates += 1
        return {k: v / updates for k, v in sums.items()}

    def _plan(self, row_traj, np_rng) -> list[np.ndarray]:
        plan = plan_mini_batches(row_traj, self.rc.mini_batch, np_rng)
        if self.rc.mini_batch.mode != "in_order":
            return plan
        if host_batches.multi_host():  # every host makes as many updates (empty ones pad)
            plan += [np.zeros(0, np.int64)] * (host_batches.max_over_hosts(len(plan)) - len(plan))
        return pad_plan(plan, self.mini_batch_size)

    def _share_prefixes(self, rows: dict, chunks) -> tuple[dict, np.ndarray]:
        """With rl.shared_prefix, `rows` regrouped so that each of its `chunks(B)` chunks runs
        the prompt its rows share once (memjax.rl.shared_prefix); else as they are."""
        B = len(rows["tokens"])
        if not self.rc.shared_prefix:
            return rows, np.arange(B)
        return share_prefixes(
            rows, chunks(B), granularity=SHARED_PREFIX_GRANULARITY, minimum=self.rc.shared_prefix
        )

    def logprob_chunks(self, rows: int) -> int:
        """The chunks `make_logprob_fn` splits `rows` rows into."""
        shards = 1 if self.mesh is None else self.mesh.shape["data"] * self.mesh.shape["fsdp"]
        return logprob_chunks(rows, LOGPROB_ROWS_PER_DEVICE * shards)

    def _update_one(self, mb) -> dict:
        keys = (*POLICY_KEYS, "sampler_logp")
        pb = {k: mb[k] for k in keys if k in mb}
        pb, _ = self._share_prefixes(pb, lambda _: self.rc.micro_batches)
        pb = host_batches.to_global(pb, self.mesh, self.rules)
        self.states["policy"], metrics = self.policy_step(self.states["policy"], pb)
        if self.rc.algo == "ppo":
            cb = host_batches.to_global({k: mb[k] for k in CRITIC_KEYS}, self.mesh, self.rules)
            self.states["critic"], critic_metrics = self.critic_step(self.states["critic"], cb)
            metrics = {**metrics, **critic_metrics}
        return metrics

    def _record(self, trajs, rewards, row_traj, truncated, t_roll, t0) -> dict:
        """Rollout metrics over every host's trajectories (hosts hold equally many)."""
        all_rewards = host_batches.gather(rewards).reshape(-1)
        lengths = host_batches.gather([t.completion_tokens for t in trajs])
        contexts = host_batches.gather((row_traj >= 0).sum()).sum() / len(all_rewards)
        record = {
            "reward": float(all_rewards.mean()),
            "reward_std": float(all_rewards.std()),
            "completion_tokens": float(np.mean(lengths)),
            "contexts": float(contexts),
            "truncated_rows": truncated,
            "rollout_s": t_roll,
            "step_s": time.perf_counter() - t0,
            "skipped_total": int(self.states["policy"].skipped),
        }
        for k in sorted({k for t in trajs for k in t.info}):  # this host's episodes
            record[f"env/{k}"] = float(np.mean([t.info.get(k, 0.0) for t in trajs]))
        return record

    # ---------------------------------------------------------------- evaluation, display

    def evaluate(self, step: int, key) -> float:
        """Mean reward of one greedy episode per held-out example."""
        trajs = self._rollouts(self.eval_env, self.eval_examples, 1, key, evaluation=True)
        return float(np.mean([t.reward for t in trajs]))

    def postfix(self, record, metrics) -> dict[str, str]:
        return {"reward": f"{record['reward']:.3f}", "kl": f"{metrics.get('kl', 0):.3f}"}

    def run_spec(self) -> dict:
        spec = {"algo": self.rc.algo, **model_spec(self.cfg)}
        if self.lora is not None:  # the adapters' settings and the pointer to their base
            spec["lora"] = self.lora.pointer
        return spec


def train(
    rc: RLRunConfig,
    workdir: str | Path,
    *,
    env: Environment,
    params,
    cfg: DecoderConfig,
    train_examples,
    eval_examples=(),
    eos_ids=(),
    pad_id: int = 0,
    critic_params=None,
    generate=None,
    eval_env: Environment | None = None,
    progress: bool = True,
    base_source: str = "",
) -> dict[str, Any]:
    """Runs (or resumes) RL training; returns the history, evals, final params and wall time.

    `rc` is the trainer's typed settings, read at the job boundary
    (`RLRunConfig.from_section(config.rl, "config.rl")`). `generate` defaults to memjax's
    sampler (with `rl.rollout_engine` the engine samples instead, with the `stop_strings` and
    `tokenizer` the given generate carries, if any); `critic_params` to a copy of the policy
    (PPO only). `base_source` names the base in LoRA checkpoints.
    """
    task = RLTask(
        rc,
        env=env,
        params=params,
        cfg=cfg,
        train_examples=train_examples,
        eval_examples=eval_examples,
        eos_ids=eos_ids,
        pad_id=pad_id,
        critic_params=critic_params,
        generate=generate,
        eval_env=eval_env,
        base_source=base_source,
    )
    result = run_loop(task, rc.loop, workdir, progress=progress)
    if task.lora is not None and "params" in result:  # the merged weights export as the base
        result["adapters"] = result["params"]
        result["params"] = task.lora.merged(result["adapters"])
    return result


__all__ = [
    "train",
    "RLTask",
    "make_generate",
    "loss_config",
    "optimizer_config",
    "example_stream",
    "ALGOS",
]
