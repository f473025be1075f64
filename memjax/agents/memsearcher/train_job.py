"""The `memsearcher.train` job: multi-context GRPO through the RL core's trainer.

Every context of a trajectory is a training row (`EpisodeEnv` closes a context whenever
MemSearcher rebuilds it from question + memory); the reward comes from the final context; the
trajectory's advantage (R - group mean) / (unbiased group std + 1e-6) over G rollouts is copied
to all its contexts; only the model's own tokens are trained (tool responses, prompts and
rebuilt contexts are masked); token-mean aggregation, k3 KL 0.001 and entropy 0.001 from the
config's `loss` section. Updates follow MemSearcher's trainer: all context rows of a step, in
rollout order, cut into mini-batches of mini_batch_size x G rows (`train.mini_batch_mode`
"in_order"; memjax.rl.minibatches), each split into micro-batches of
`train.micro_batch_per_device` rows per data-parallel device when the config has scale
sections, the size tools/plan_memory.py plans for.

The recipe config (memjax.recipes.memsearcher) speaks the paper's terms (questions per
batch, mini-batch, rollouts per question, lengths); the job reads them once
(`run_settings.MemSearcherTrainRun`) and `trainer_config` translates them into the trainer's
typed config.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ml_collections import ConfigDict

from memjax import workdir as workdir_lib
from memjax.agents.episode_env import EpisodeEnv
from memjax.agents.memsearcher import job_setup
from memjax.agents.memsearcher.agent_factory import SEQUENTIAL, episode_factory
from memjax.agents.memsearcher.run_settings import (
    MemSearcherTrainRun,
    RolloutSettings,
    TrainSettings,
)
from memjax.agents.sampler_adapter import make_rollout_generate
from memjax.errors import ConfigError

if TYPE_CHECKING:
    from memjax.rl.run_config import RLRunConfig


def trainer_config(
    train: TrainSettings, rollout: RolloutSettings, num_train_examples: int
) -> RLRunConfig:
    """The trainer's typed config (see memjax.rl.trainer) for this recipe and training-set
    size. The paper's terms become the trainer's fields in a section that RLRunConfig reads,
    so a bad value is named as the trainer's field under config.train."""
    from memjax.rl.run_config import RLRunConfig

    if train.batch_size % train.mini_batch_size:
        raise ConfigError(
            f"config.train.batch_size={train.batch_size} is not a multiple of "
            f"config.train.mini_batch_size={train.mini_batch_size}"
        )
    if train.algorithm != "multi_context_grpo":
        raise ConfigError(f"config.train.algorithm={train.algorithm!r}; only multi_context_grpo")
    steps = train.num_steps or max(
        1, train.total_epochs * num_train_examples // int(train.batch_size)
    )
    mini_batch_rows = int(train.mini_batch_size) * rollout.group_size
    c = {
        "algo": "grpo",
        "seed": train.seed,
        "num_steps": steps,
        "prompts_per_step": int(train.batch_size),
        "group_size": rollout.group_size,
        "epochs": train.ppo_epochs,
        "mini_batch_mode": train.mini_batch_mode,
        # "shuffled": a fixed number of updates per step, one per mini-batch of questions.
        "mini_batches": int(train.batch_size) // int(train.mini_batch_size),
        # "in_order": consecutive chunks of rows, verl's ppo_mini_batch_size x rollout.n.
        "mini_batch_rows": mini_batch_rows,
        "mini_batch_shards": train.mini_batch_shards,
        "micro_batches": micro_batches(train, mini_batch_rows),
        "seq_len": rollout.seq_len,
        "vocab_chunk": train.vocab_chunk,
        "shared_prefix": train.shared_prefix,
        "decode_batch": rollout.decode_batch,  # rows decoded at once (0: a step's)
        "rollout_engine": rollout.engine,  # checked (a bool) by RLRunConfig
        "engine_slots": rollout.engine_slots,
        "old_logprobs": "trainer",  # recomputed; the sampler's are logged as the gap metric
        "sampling": {
            "temperature": rollout.temperature,
            "top_k": rollout.top_k,
            "top_p": rollout.top_p,
            "max_new_tokens": rollout.max_tokens_per_call,
        },
        "loss": dict(train.loss),
        "advantage": {"scaling": "group", "ddof": 1, "epsilon": train.advantage_eps},
        "optimizer": dict(train.optimizer),
        "eval_every": 0,
        "eval_before": False,
        "checkpoint_every": train.save_every_steps,
        "keep_last": 2,
        "keep_best": 0,
        "plot_every": 1,
        "mesh": None if _single_device(train.mesh) else dict(train.mesh),
        "stop_after": None,
    }
    if train.lora is not None:  # rank 0: full fine-tuning
        c["lora"] = dict(train.lora)
    return RLRunConfig.from_section(c, "config.train")


def micro_batches(train: TrainSettings, mini_batch_rows: int) -> int:
    """Micro-batches per update. With scale sections, `train.micro_batch_per_device` rows on
    each data x fsdp shard (what tools/plan_memory.py plans for); else `train.micro_batches`."""
    if train.micro_batch_per_device is None:
        return train.micro_batches
    from memjax.planning import micro_batches_for

    return micro_batches_for(
        mini_batch_rows, train.micro_batch_per_device, dict(train.mesh), train.num_devices
    )


def _single_device(mesh: Mapping[str, int]) -> bool:
    import jax

    return jax.device_count() == 1 or all(int(v) == 1 for v in mesh.values())


def memsearcher_env(
    run: MemSearcherTrainRun, tokenizer, retriever, agent: str = "memsearcher"
) -> EpisodeEnv:
    """The training environment: MemSearcher (or a growing-context baseline) episodes over
    token ids, with the training turn limit."""
    if agent not in SEQUENTIAL:
        raise ValueError(f"cannot train agent {agent!r}; choose from {SEQUENTIAL}")
    count = lambda text: len(tokenizer.encode(text))
    episodes = run.setup.episodes
    factory = episode_factory(agent, episodes, count, evaluation=False)
    turns = int(episodes.train.max_turns)
    return EpisodeEnv(
        lambda example: factory(example["question"]),
        tokenizer,
        retriever,
        # MemSearcher makes two calls per context (action, memory update); one spare call so
        # the episode's own turn limit, not the rollout loop's, ends it.
        max_calls=2 * turns + 1,
        max_context_tokens=run.rollout.seq_len - run.rollout.max_tokens_per_call,
    )


def train_memsearcher(
    run: MemSearcherTrainRun,
    workdir: str | Path,
    *,
    params,
    cfg,
    tokenizer,
    retriever,
    train_rows: list[dict],
    generate=None,
    progress: bool = True,
) -> dict:
    """Multi-context GRPO of `params` on `train_rows` (QA row dicts); `generate` defaults to
    memjax's sampler through the adapter. Writes workdir/reward_curve.{png,json}."""
    from memjax.parallel import make_mesh
    from memjax.rl.trainer import train

    workdir = workdir_lib.path(workdir)  # a local folder or gs://
    env = memsearcher_env(run, tokenizer, retriever, run.setup.agent)
    rc = trainer_config(run.train, run.rollout, len(train_rows))
    if generate is None:
        mesh = make_mesh(rc.mesh) if rc.mesh is not None else None
        # The agent's own stop strings (Search-R1 stops after </search>; MemSearcher on EOS).
        stop = env.make_episode({"question": "?"}).current_call().stop
        generate = make_rollout_generate(
            cfg, tokenizer, run.rollout.sampling(), stop=stop, mesh=mesh
        )
    result = train(
        rc,
        workdir,
        env=env,
        params=params,
        cfg=cfg,
        train_examples=train_rows,
        eos_ids=tokenizer.eos_ids,
        pad_id=tokenizer.pad_id,
        generate=generate,
        progress=progress,
    )
    write_reward_curve(result["history"], workdir / "reward_curve.json")
    return result


def train_job(config: ConfigDict, workdir: str | None) -> dict:
    """The job: data, retriever and model from the config; exports the trained weights with
    their tokenizer to <workdir>/policy (`--config.model.source=<workdir>/policy` evaluates
    them); prints a JSON summary line last."""
    from memjax.checkpoints.decoder_io import export_hf_decoder
    from memjax.training.reporting import summary_line

    if not workdir:
        raise ConfigError("--workdir: memsearcher.train needs a directory (checkpoints, curves)")
    run = MemSearcherTrainRun.from_config(config)
    setup = run.setup
    sets = job_setup.load_qa_sets(setup.data, "train")
    print(job_setup.qa_split_summary(setup.data, "train").line(), flush=True)
    rows = [e.to_row() for examples in sets.values() for e in examples]
    model = job_setup.load_policy_model(setup.model)  # a wrong path fails before any embedding
    retriever = job_setup.make_retriever(setup.retriever, setup.data, "train")
    result = train_memsearcher(
        run,
        workdir,
        params=model.params,
        cfg=model.cfg,
        tokenizer=model.tokenizer,
        retriever=retriever,
        train_rows=rows,
    )
    policy_dir = workdir_lib.path(workdir) / "policy"
    export_hf_decoder(result["params"], model.cfg, policy_dir, tokenizer=model.tokenizer)
    print(f"trained weights: {policy_dir}", flush=True)
    print(summary_line(result), flush=True)  # last: the JSON line tools read
    return result


def write_reward_curve(history: list[dict], path: Path) -> None:
    """The per-step numbers behind reward_curve.png (reward, its std, contexts per trajectory,
    and the environment's counts)."""
    keep = ("step", "reward", "reward_std", "contexts", "completion_tokens", "step_s")
    rows = [{k: v for k, v in h.items() if k in keep or k.startswith("env/")} for h in history]
    workdir_lib.write_text(path, json.dumps(rows, indent=1))
