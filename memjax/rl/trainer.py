"""The RL trainer: prompts -> rollouts -> rewards -> advantages -> K epochs of updates.

    rc = RLRunConfig.from_section(config.rl, "config.rl")      # at the job boundary
    summary = train(rc, workdir, env=env, params=params, cfg=cfg,
                    train_examples=examples, eval_examples=held_out, eos_ids=[2], pad_id=0)

`RLTask` runs one step through the roles (`memjax.rl.roles`) and the learner
(`memjax.rl.learners`):
  1. `prompts_per_step` examples from a grain pipeline (its position is checkpointed);
  2. the rollout: `group_size` episodes each through the environment and the sampler (in
     lock-step turns, or on the continuous-batching engine with `rl.rollout_engine`);
  3. the actor's old log-probs (or the sampler's) and the reference's, with the KL term;
  4. the learner's targets: GRPO's group-normalised advantages per trajectory, broadcast to
     all its contexts (multi-context GRPO), or PPO's critic values, GAE and returns;
  5. `epochs` passes over the mini-batch plan (memjax.rl.minibatches: `mini_batches` shuffled
     ones, or MemSearcher's in-order chunks of `mini_batch_rows`), one optimizer update of the
     actor (and the critic) each, micro-batched inside the train step.
The loop around it (resume, logging, evaluation, plots, checkpoints) is `memjax.training.loop`,
shared with SFT.

Which parameters train is `rl.lora` (`memjax.training.trained_weights`): with `lora.rank` > 0 the actor and
critic train adapters over the frozen base they were given, the reference is that base with the
adapters off, the sampler gets the adapters merged in, checkpoints hold adapters and optimizer
state with a pointer to the base in their run spec, and the result's "params" are the merged
weights ("adapters" beside them).

On several hosts (`memjax.distributed`) every process reads its own shard of the examples, rolls
out its share of the prompts and packs its own rows; the train steps, log-probs and values run on
global arrays over the whole mesh (`host_batches`), the rollout metrics and PPO's advantage
whitening are taken over all hosts.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grain
import numpy as np

from memjax import distributed
from memjax.errors import ConfigError, DataError
from memjax.models.config import DecoderConfig
from memjax.parallel import TRAIN_RULES
from memjax.rl.environment import Environment
from memjax.rl.learners import learner_for
from memjax.rl.minibatches import pad_plan, padded_size, plan_mini_batches, take_rows
from memjax.rl.roles import ACTOR_POSITIONS, Actor, ActorSettings, Critic, CriticSettings, Rollout
from memjax.rl.rollout import pack
from memjax.rl.run_config import ALGOS, RLRunConfig, wave_problem
from memjax.rl.shared_prefix import SHARED_PREFIX_GRANULARITY, restore_order, share_prefixes
from memjax.rl.weights import critic_trainable
from memjax.training import host_batches
from memjax.training.logprobs import (
    LOGPROB_ROWS_PER_DEVICE,
    logprob_chunks,
    position_width,
    trained_positions,
)
from memjax.training.loop import model_spec, run_loop
from memjax.training.states import mesh_from, rows_multiple
from memjax.training.trained_weights import trained_weights


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
        self.data_iterator = example_stream(train_examples, rc.loop.seed)
        self.learner = learner_for(rc)
        self._build_roles(params, critic_params, base_source)
        self.rollout = Rollout(rc, cfg, self.eos_ids, pad_id, mesh=self.mesh, generate=generate)

    def _build_roles(self, params, critic_params, base_source: str) -> None:
        """The actor, the reference (with the KL term) and, for PPO, the critic, over the
        weights `rc.lora` chooses to train; their fresh train states in `self.states`."""
        rc, cfg, mesh = self.rc, self.cfg, self.mesh
        self.weights = trained_weights(
            params, cfg, lora=rc.lora, seed=rc.loop.seed, source=base_source, mesh=mesh
        )
        # Before the first update donates the initial weights.
        self.reference = self.weights.reference() if rc.loss.kl_coef else None
        self.actor = Actor(self.weights.policy, cfg, ActorSettings.of(rc), mesh=mesh)
        self.states: dict[str, Any] = {self.actor.name: self.actor.init_state()}
        self.critic = None
        if self.learner.uses_critic:
            trainable = critic_trainable(self.weights, critic_params, rc.loop.seed + 1, mesh)
            self.critic = Critic(trainable, cfg, CriticSettings.of(rc), mesh=mesh)
            self.states[self.critic.name] = self.critic.init_state()

    def _trained(self):
        return self.states[self.actor.name].params

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
        self.learner.add_targets(batch, rewards, row_traj, values=self._critic_values)
        metrics = self._update(batch, row_traj, np.random.default_rng([rc.loop.seed, step]))
        record = self._record(trajs, rewards, row_traj, truncated, t_roll, t0)
        return record, metrics

    def _rollouts(self, env, examples, group_size: int, key, *, evaluation: bool):
        """The episodes of `examples` with the current policy (the sampler's copy of it)."""
        params = self.weights.for_sampler(self._trained())
        return self.rollout.run(env, examples, group_size, key, params, evaluation=evaluation)

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
        out = self.actor.logprob_fn(
            params, rows["tokens"], rows["token_mask"], rows["loss_positions"], rows.get("prefix")
        )  # [B, K]
        out = restore_order(host_batches.to_local(out, self.mesh, self.rules), order)
        full = np.zeros(batch["tokens"].shape, np.float32)  # [B, T]
        r, k = np.nonzero(batch["loss_valid"])
        full[r, batch["loss_positions"][r, k]] = out[r, k]
        return full

    def _add_logprobs(self, batch) -> None:
        """batch["old_logp"] (the trainer's pass, or the sampler's) and, with the KL term,
        batch["ref_logp"], [B, T] each."""
        if not self.learner.old_from_trainer:
            batch["old_logp"] = batch["sampler_logp"]
            if self.reference is None:
                return
        arranged = self._trained_rows(batch)  # once: both passes score the same rows
        if self.learner.old_from_trainer:
            policy = self.weights.for_logprobs(self._trained())
            batch["old_logp"] = self._on_trained(policy, batch, arranged)
        if self.reference is not None:
            batch["ref_logp"] = self._on_trained(self.reference, batch, arranged)

    def _critic_values(self, batch) -> np.ndarray:
        """The critic's [B, T] values of this host's rows (PPO's learner asks for them)."""
        params = self.states[self.critic.name].params
        return self._on_rows(self.critic.values, params, batch)

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
        """One optimizer update of the actor (and the critic) on mini-batch `mb`."""
        keys = (*self.actor.fields, *ACTOR_POSITIONS)
        pb = {k: mb[k] for k in keys if k in mb}
        pb, _ = self._share_prefixes(pb, lambda _: self.rc.micro_batches)
        pb = host_batches.to_global(pb, self.mesh, self.rules)
        name = self.actor.name
        self.states[name], metrics = self.actor.update(self.states[name], pb)
        if self.critic is not None:
            cb = {k: mb[k] for k in self.critic.fields}
            cb = host_batches.to_global(cb, self.mesh, self.rules)
            name = self.critic.name
            self.states[name], critic_metrics = self.critic.update(self.states[name], cb)
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
            "skipped_total": int(self.states[self.actor.name].skipped),
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
        if self.weights.lora_pointer is not None:  # the adapters' settings and their base
            spec["lora"] = self.weights.lora_pointer
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
    if task.weights.lora_pointer is not None and "params" in result:  # merged: the base's layout
        result["adapters"] = result["params"]
        result["params"] = task.weights.for_sampler(result["adapters"])
    return result


__all__ = ["train", "RLTask", "example_stream", "ALGOS"]
