"""The RL trainer loop: prompts -> rollouts -> rewards -> advantages -> K epochs -> metrics.

    summary = train(config, workdir, env=env, params=params, cfg=cfg,
                    train_examples=examples, eval_examples=held_out, eos_ids=[2], pad_id=0)

One iteration (a "step"):
  1. `prompts_per_step` examples from a grain pipeline (its position is checkpointed);
  2. `group_size` episodes each through the environment and the on-device sampler;
  3. advantages: GRPO group-normalised per trajectory, broadcast to all its contexts
     (multi-context GRPO); or PPO: critic values + GAE over the trainable tokens;
  4. old log-probs (recomputed by the trainer, or the sampler's), reference log-probs when the
     KL term is on;
  5. `epochs` passes over `mini_batches` shuffled mini-batches, one optimizer update each
     (micro-batched inside the train step);
  6. metrics to TensorBoard (workdir/tb), a tqdm bar with ETA, workdir/reward_curve.png;
     periodic greedy evaluation and checkpoints (workdir/checkpoints).

On several hosts (`memjax.distributed`) every process reads its own shard of the examples, rolls
out its share of the prompts and packs its own rows; the train steps, log-probs and values run on
global arrays over the whole mesh (`host_batches`), the rollout metrics and PPO's advantage
whitening are taken over all hosts, and only process 0 writes TensorBoard, plots and the bar.

Everything random derives from (seed, step), and the checkpoint holds the train states, the RNG,
the data iterator, the metric history and the environment's state, so a run killed at any point
and restarted with the same workdir ends with the same parameters as an uninterrupted one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import grain
import jax
import jax.numpy as jnp
import numpy as np

from memjax import distributed
from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract
from memjax.parallel import SAMPLING_RULES, TRAIN_RULES, make_mesh
from memjax.rl import advantages as adv_lib
from memjax.rl import critic as critic_lib
from memjax.rl import host_batches, losses, train_step
from memjax.rl.checkpointing import Checkpointer
from memjax.rl.environment import Environment
from memjax.rl.logprobs import make_logprob_fn
from memjax.rl.optimizer import OptimizerConfig, make_optimizer
from memjax.rl.rollout import Completion, pack, run_episodes

ALGOS = ("grpo", "ppo")


def _get(config, name, default):
    return config.get(name, default) if hasattr(config, "get") else default


def loss_config(config) -> losses.PolicyLossConfig:
    c = _get(config, "loss", {}) or {}
    fields = {f: c[f] for f in losses.PolicyLossConfig.__dataclass_fields__ if f in c}
    return losses.PolicyLossConfig(**fields)


def optimizer_config(c, total_steps: int) -> OptimizerConfig:
    c = dict(c or {})
    fields = {f: c[f] for f in OptimizerConfig.__dataclass_fields__ if f in c}
    fields.setdefault("total_steps", total_steps)
    return OptimizerConfig(**fields)


def make_generate(cfg: DecoderConfig, sampling: dict, eos_ids, pad_id: int, mesh=None):
    """Wraps memjax's on-device sampler as the rollout loop's `generate(prompts, rng)`; the
    parameters are read from `generate.params` at call time."""
    from memjax.sampling.sampler import sample
    from memjax.sampling.sampling_params import SamplingParams

    params_obj = SamplingParams(
        temperature=float(sampling.get("temperature", 1.0)),
        top_k=int(sampling.get("top_k", 0)),
        top_p=float(sampling.get("top_p", 1.0)),
        max_new_tokens=int(sampling["max_new_tokens"]),
        greedy=bool(sampling.get("greedy", False)),
    )
    rules = SAMPLING_RULES if mesh is not None else None

    def generate(prompts, rng):
        out = sample(
            generate.params,
            cfg,
            prompts,
            params_obj,
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


class _Logger:
    """TensorBoard scalars, a JSONL history, and the reward-curve PNG."""

    def __init__(self, workdir: Path):
        from tensorboardX import SummaryWriter

        self.workdir = workdir
        self.writer = SummaryWriter(str(workdir / "tb"))

    def scalars(self, step: int, metrics: dict[str, float], prefix: str):
        for k, v in metrics.items():
            self.writer.add_scalar(f"{prefix}/{k}", float(v), step)
        self.writer.flush()

    def plot(self, history: list[dict], evals: list[dict]):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([h["step"] for h in history], [h["reward"] for h in history], label="train")
        if evals:
            ax.plot([e["step"] for e in evals], [e["reward"] for e in evals], "o-", label="eval")
        ax.set_xlabel("step")
        ax.set_ylabel("mean reward")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        tmp = self.workdir / "reward_curve.tmp.png"
        fig.savefig(tmp, dpi=80)
        plt.close(fig)
        tmp.replace(self.workdir / "reward_curve.png")  # atomic: a viewer never sees half a file

    def close(self):
        self.writer.close()


def _device_put(tree, shardings):
    return tree if shardings is None else jax.device_put(tree, shardings)


def train(
    config,
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
) -> dict[str, Any]:
    """Runs (or resumes) training; returns a summary with the reward history.

    `generate` defaults to memjax's sampler; `critic_params` defaults to a copy of the policy
    (PPO only). See the module docstring for the config fields (configs/toy_grpo.py lists them).
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    algo = _get(config, "algo", "grpo")
    if algo not in ALGOS:
        raise ValueError(f"config.algo={algo!r}; choose from {ALGOS}")
    seed = int(_get(config, "seed", 0))
    num_steps = int(config.num_steps)
    G = int(config.group_size)
    P = int(config.prompts_per_step)
    epochs = int(_get(config, "epochs", 1))
    n_mini = int(_get(config, "mini_batches", 1))
    n_micro = int(_get(config, "micro_batches", 1))
    seq_len = int(config.seq_len)
    sampling = dict(config.sampling)
    temperature = float(sampling.get("temperature", 1.0))
    chunk = int(_get(config, "vocab_chunk", 4096))
    loss_cfg = loss_config(config)
    adv_cfg = dict(_get(config, "advantage", {}) or {})

    mesh_shape = _get(config, "mesh", None)
    mesh = make_mesh(dict(mesh_shape)) if mesh_shape else None
    rows_multiple = (
        n_mini * n_micro * (1 if mesh is None else mesh.shape["data"] * mesh.shape["fsdp"])
    )

    # ---------------------------------------------------------------- states and steps
    opt = make_optimizer(
        optimizer_config(_get(config, "optimizer", {}), num_steps * epochs * n_mini)
    )
    sh = train_step.train_state_shardings(decoder_abstract(cfg), opt, mesh) if mesh else None
    ref_params = jax.tree.map(jnp.copy, params) if loss_cfg.kl_coef else None
    policy = train_step.init_train_state(params, opt, sh)
    policy_step = train_step.policy_train_step(
        cfg,
        loss_cfg,
        opt,
        temperature=temperature,
        vocab_chunk=chunk,
        num_micro_batches=n_micro,
        mesh=mesh,
        state_shardings=sh,
    )
    logprob_fn = make_logprob_fn(
        cfg, temperature=temperature, chunk=chunk, mesh=mesh, rules=TRAIN_RULES if mesh else None
    )
    states: dict[str, Any] = {"policy": policy}
    if algo == "ppo":
        copt = make_optimizer(
            optimizer_config(_get(config, "critic_optimizer", {}), num_steps * epochs * n_mini)
        )
        csh = (
            train_step.train_state_shardings(critic_lib.critic_abstract(cfg), copt, mesh)
            if mesh
            else None
        )
        cparams = (
            critic_params
            if critic_params is not None
            else critic_lib.critic_from_policy(params, cfg)
        )
        states["critic"] = train_step.init_train_state(cparams, copt, csh)
        critic_step = train_step.critic_train_step(
            cfg,
            copt,
            value_clip=_get(config, "value_clip", 0.2),
            num_micro_batches=n_micro,
            mesh=mesh,
            state_shardings=csh,
        )
        value_fn = jax.jit(
            lambda p, t, m: critic_lib.critic_values(
                p, cfg, t, m, mesh=mesh, rules=TRAIN_RULES if mesh else None
            )
        )

    # ---------------------------------------------------------------- data
    # Each host reads only its own shard of the examples and rolls out its share of the prompts
    # (the groups of one prompt stay on one host, so group advantages need no communication).
    P_local = distributed.host_batch_size(P)
    dataset = grain.MapDataset.source(list(train_examples))
    if host_batches.multi_host():
        shard, shards = distributed.data_shard()
        dataset = dataset[shard::shards]
    dataset = dataset.shuffle(seed=seed).repeat()
    data_it = iter(dataset.to_iter_dataset())
    eval_generate = generate  # a caller-supplied generate serves both
    if generate is None:
        generate = make_generate(cfg, sampling, eos_ids, pad_id, mesh)
        eval_generate = make_generate(cfg, {**sampling, "greedy": True}, eos_ids, pad_id, mesh)
    if not len(eval_examples):
        eval_generate = None

    # ---------------------------------------------------------------- resume
    ckpt = Checkpointer(
        workdir / "checkpoints",
        keep_last=int(_get(config, "keep_last", 2)),
        keep_best=int(_get(config, "keep_best", 1)) if len(eval_examples) else 0,
        best_metric="eval_reward" if len(eval_examples) else None,
    )
    base_key = jax.random.key(seed)
    tree = {**states, "rng": jax.random.key_data(base_key)}
    history: list[dict] = []
    evals: list[dict] = []
    start = 0
    if ckpt.latest_step() is not None:
        abstract = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree
        )
        dirs = {"env": env.load_dir} if env.has_dir_state else None
        out = ckpt.restore(abstract, data_iterator=data_it, with_extra=True, dirs=dirs)
        tree = out["state"]
        states = {k: tree[k] for k in states}
        base_key = jax.random.wrap_key_data(tree["rng"])
        history = out["extra"]["history"]
        evals = out["extra"]["evals"]
        if out["extra"].get("env") is not None:
            env.restore_state(out["extra"]["env"])
        start = out["step"]

    # Metrics, plots and the progress bar come from process 0 only; every process checkpoints.
    primary = distributed.is_primary()
    logger = _Logger(workdir) if primary else None
    train_rules = TRAIN_RULES if mesh else None

    def on_rows(fn, params, batch):
        """fn(params, tokens, token_mask) -> [B, T] over this host's rows, as numpy."""
        rows = {k: batch[k] for k in ("tokens", "token_mask")}
        rows = host_batches.to_global(rows, mesh, train_rules)
        out = fn(params, rows["tokens"], rows["token_mask"])
        return host_batches.to_local(out, mesh, train_rules)

    eval_every = int(_get(config, "eval_every", 0))
    ckpt_every = int(_get(config, "checkpoint_every", 0))
    plot_every = int(_get(config, "plot_every", 5))
    stop_after = _get(config, "stop_after", None)  # simulates a crash (tests): no final save

    def evaluate(step):
        eval_generate.params = states["policy"].params
        trajs = run_episodes(
            eval_env or env,
            list(eval_examples),
            1,
            eval_generate,
            jax.random.fold_in(base_key, 2**31 - 1),
            eos_ids,
        )
        r = float(np.mean([t.reward for t in trajs]))
        evals.append({"step": step, "reward": r})
        if logger is not None:
            logger.scalars(step, {"reward": r}, "eval")
        return r

    def save(step, eval_reward=None):
        tree = {**states, "rng": jax.random.key_data(base_key)}
        extra = {"history": history, "evals": evals, "env": env.checkpoint_state()}
        dirs = {"env": env.save_dir} if env.has_dir_state else None
        metrics = {"eval_reward": eval_reward} if eval_reward is not None else None
        ckpt.save(step, tree, data_iterator=data_it, extra=extra, dirs=dirs, metrics=metrics)

    bar = None
    if progress and primary:
        from tqdm import tqdm

        bar = tqdm(total=num_steps, initial=start, desc=f"{algo}", unit="step", dynamic_ncols=True)
    t_start = time.perf_counter()
    try:
        for step in range(start, num_steps):
            if stop_after is not None and step >= int(stop_after):
                return {"interrupted_at": step, "history": history}
            key = jax.random.fold_in(base_key, step)
            np_rng = np.random.default_rng([seed, step])
            examples = [next(data_it) for _ in range(P_local)]
            t0 = time.perf_counter()
            generate.params = states["policy"].params
            trajs = run_episodes(env, examples, G, generate, key, eos_ids)
            t_roll = time.perf_counter() - t0
            batch = pack(trajs, seq_len, pad_id, rows_multiple)
            if host_batches.multi_host():  # a global array takes as many rows from every host
                batch = host_batches.pad_rows(
                    batch, host_batches.max_over_hosts(len(batch["tokens"]))
                )
            rewards = np.array([t.reward for t in trajs], np.float32)
            row_traj = batch.pop("trajectory")
            truncated_rows = int(batch.pop("truncated_rows"))
            real = row_traj >= 0
            if algo == "grpo":
                traj_adv = adv_lib.group_advantages(
                    rewards,
                    G,
                    scaling=adv_cfg.get("scaling", "group"),
                    ddof=int(adv_cfg.get("ddof", 1)),
                    epsilon=float(adv_cfg.get("epsilon", 1e-6)),
                )
                row_adv = np.where(
                    real,
                    np.asarray(adv_lib.broadcast_to_contexts(traj_adv, np.maximum(row_traj, 0))),
                    0.0,
                )
                batch["advantages"] = np.asarray(
                    adv_lib.token_advantages(jnp.asarray(row_adv, jnp.float32), batch["loss_mask"])
                )
            if _get(config, "old_logprobs", "trainer") == "trainer" or algo == "ppo":
                batch["old_logp"] = on_rows(logprob_fn, states["policy"].params, batch)
            else:
                batch["old_logp"] = batch["sampler_logp"]
            if ref_params is not None:
                batch["ref_logp"] = on_rows(logprob_fn, ref_params, batch)
            if algo == "ppo":
                values = on_rows(value_fn, states["critic"].params, batch)
                token_rewards = np.zeros_like(values)
                last_ctx = {}
                for r, i in enumerate(row_traj):
                    if i >= 0:
                        last_ctx[int(i)] = r  # the trajectory's final context gets the reward
                for i, r in last_ctx.items():
                    idx = np.nonzero(batch["loss_mask"][r])[0]
                    if len(idx):
                        token_rewards[r, idx[-1]] = rewards[i]
                a, ret = adv_lib.gae(
                    token_rewards,
                    values,
                    batch["loss_mask"],
                    gamma=float(adv_cfg.get("gamma", 1.0)),
                    lam=float(adv_cfg.get("lam", 0.95)),
                )
                if adv_cfg.get("whiten", True):  # statistics over every host's rows
                    a = host_batches.whiten_global(a, batch["loss_mask"], adv_lib.masked_whiten)
                batch["advantages"] = np.asarray(a)
                batch["old_values"] = values
                batch["returns"] = np.asarray(ret)

            # K epochs over shuffled mini-batches
            B = batch["tokens"].shape[0]
            mb_rows = B // n_mini
            sums: dict[str, float] = {}
            n_updates = 0
            for _epoch in range(epochs):
                perm = np_rng.permutation(B)
                for j in range(n_mini):
                    rows = perm[j * mb_rows : (j + 1) * mb_rows]
                    mb = {k: v[rows] for k, v in batch.items()}
                    pkeys = (
                        "tokens",
                        "token_mask",
                        "loss_mask",
                        "advantages",
                        "old_logp",
                        "ref_logp",
                        "sampler_logp",
                    )
                    pb = host_batches.to_global(
                        {k: mb[k] for k in pkeys if k in mb}, mesh, train_rules
                    )
                    states["policy"], m = policy_step(states["policy"], pb)
                    if algo == "ppo":
                        ckeys = ("tokens", "token_mask", "loss_mask", "old_values", "returns")
                        cb = host_batches.to_global({k: mb[k] for k in ckeys}, mesh, train_rules)
                        states["critic"], cm = critic_step(states["critic"], cb)
                        m = {**m, **cm}
                    for k, v in m.items():
                        sums[k] = sums.get(k, 0.0) + float(v)
                    n_updates += 1
            train_metrics = {k: v / n_updates for k, v in sums.items()}
            # Rollout metrics over every host's trajectories (hosts hold equally many).
            all_rewards = host_batches.gather(rewards).reshape(-1)
            lengths = host_batches.gather([t.completion_tokens for t in trajs])
            contexts = host_batches.gather(real.sum()).sum() / len(all_rewards)
            record = {
                "step": step + 1,
                "reward": float(all_rewards.mean()),
                "reward_std": float(all_rewards.std()),
                "completion_tokens": float(np.mean(lengths)),
                "contexts": float(contexts),
                "truncated_rows": truncated_rows,
                "rollout_s": t_roll,
                "step_s": time.perf_counter() - t0,
                "skipped_total": int(states["policy"].skipped),
            }
            for k in sorted({k for t in trajs for k in t.info}):  # this host's episodes
                record[f"env/{k}"] = float(np.mean([t.info.get(k, 0.0) for t in trajs]))
            history.append(record)
            if logger is not None:
                logger.scalars(
                    step + 1, {k: v for k, v in record.items() if k != "step"}, "rollout"
                )
                logger.scalars(step + 1, train_metrics, "train")
            eval_reward = None
            if eval_generate is not None and eval_every and (step + 1) % eval_every == 0:
                eval_reward = evaluate(step + 1)
            last = step + 1 == num_steps
            if logger is not None and ((plot_every and (step + 1) % plot_every == 0) or last):
                logger.plot(history, evals)
            if (ckpt_every and (step + 1) % ckpt_every == 0) or step + 1 == num_steps:
                save(step + 1, eval_reward)
            if bar is not None:
                bar.set_postfix(
                    reward=f"{record['reward']:.3f}", kl=f"{train_metrics.get('kl', 0):.3f}"
                )
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        ckpt.close()
        if logger is not None:
            logger.close()
    return {
        "history": history,
        "evals": evals,
        "params": states["policy"].params,
        "wall_s": time.perf_counter() - t_start,
        "start_step": start,
    }


def summary_line(result: dict, tail: int = 5) -> str:
    """The one JSON line a recipe prints last."""
    h = result["history"]
    out = {
        "initial_reward": round(h[0]["reward"], 4) if h else None,
        "final_reward": round(float(np.mean([r["reward"] for r in h[-tail:]])), 4) if h else None,
        "steps": h[-1]["step"] if h else 0,
        "wall_s": round(result["wall_s"], 1),
    }
    if result.get("evals"):
        out["eval_reward"] = round(result["evals"][-1]["reward"], 4)
    return json.dumps(out)


__all__ = ["train", "make_generate", "summary_line", "loss_config", "optimizer_config"]
