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
batch, mini-batch, rollouts per question, lengths); `trainer_config` translates them into the
trainer's fields.
"""

from __future__ import annotations

import json
from pathlib import Path

from ml_collections import ConfigDict

from memjax import workdir as workdir_lib
from memjax.agents.episode_env import EpisodeEnv
from memjax.agents.memsearcher import job_setup
from memjax.agents.memsearcher.agent_factory import SEQUENTIAL, episode_factory
from memjax.agents.sampler_adapter import make_rollout_generate, sampling_params
from memjax.errors import ConfigError


def trainer_config(config: ConfigDict, num_train_examples: int) -> ConfigDict:
    """The trainer's config (see memjax.rl.trainer) for this recipe and training-set size."""
    train, rollout = config.train, config.rollout
    if train.batch_size % train.mini_batch_size:
        raise ConfigError(
            f"config.train.batch_size={train.batch_size} is not a multiple of "
            f"config.train.mini_batch_size={train.mini_batch_size}"
        )
    if train.algorithm != "multi_context_grpo":
        raise ConfigError(f"config.train.algorithm={train.algorithm!r}; only multi_context_grpo")
    steps = int(train.num_steps) or max(
        1, int(train.total_epochs) * num_train_examples // int(train.batch_size)
    )
    c = ConfigDict()
    c.algo = "grpo"
    c.seed = int(config.seed)
    c.num_steps = steps
    c.prompts_per_step = int(train.batch_size)
    c.group_size = int(rollout.group_size)
    c.epochs = int(train.ppo_epochs)
    c.mini_batch_mode = str(train.get("mini_batch_mode", "shuffled"))
    # "shuffled": a fixed number of updates per step, one per mini-batch of questions.
    c.mini_batches = int(train.batch_size) // int(train.mini_batch_size)
    # "in_order": consecutive chunks of rows, verl's ppo_mini_batch_size x rollout.n.
    c.mini_batch_rows = int(train.mini_batch_size) * int(rollout.group_size)
    c.mini_batch_shards = int(train.get("mini_batch_shards", 1))
    c.micro_batches = micro_batches(config, c.mini_batch_rows)
    c.seq_len = int(rollout.max_prompt_length) + int(rollout.max_response_length)
    c.vocab_chunk = int(train.vocab_chunk)
    c.shared_prefix = int(train.get("shared_prefix", 0))
    c.decode_batch = int(rollout.get("decode_batch", 0))  # rows decoded at once (0: a step's)
    c.rollout_engine = rollout.get("engine", False)  # checked (a bool) by RLRunConfig
    c.engine_slots = rollout.get("engine_slots", 0)
    c.old_logprobs = "trainer"  # recomputed; the sampler's are logged as the gap metric
    c.sampling = ConfigDict(
        {
            "temperature": float(rollout.temperature),
            "top_k": int(rollout.top_k),
            "top_p": float(rollout.top_p),
            "max_new_tokens": int(rollout.max_tokens_per_call),
        }
    )
    c.loss = ConfigDict(config.loss.to_dict())
    c.advantage = ConfigDict({"scaling": "group", "ddof": 1, "epsilon": train.advantage_eps})
    c.optimizer = ConfigDict(config.optimizer.to_dict())
    if "lora" in config:  # rank 0: full fine-tuning
        c.lora = ConfigDict(config.lora.to_dict())
    c.eval_every = 0
    c.eval_before = False
    c.checkpoint_every = int(train.save_every_steps)
    c.keep_last = 2
    c.keep_best = 0
    c.plot_every = 1
    c.mesh = None if _single_device(config.mesh) else ConfigDict(config.mesh.to_dict())
    c.stop_after = None
    return c


def micro_batches(config: ConfigDict, mini_batch_rows: int) -> int:
    """Micro-batches per update. With scale sections, `train.micro_batch_per_device` rows on
    each data x fsdp shard (what tools/plan_memory.py plans for); else `train.micro_batches`."""
    train = config.train
    if "micro_batch_per_device" not in train:
        return int(train.micro_batches)
    from memjax.planning import micro_batches_for

    return micro_batches_for(
        mini_batch_rows,
        int(train.micro_batch_per_device),
        dict(config.mesh),
        int(config.hardware.num_devices),
    )


def _single_device(mesh: ConfigDict) -> bool:
    import jax

    return jax.device_count() == 1 or all(int(v) == 1 for v in mesh.values())


def memsearcher_env(config: ConfigDict, tokenizer, retriever, agent: str = "memsearcher"):
    """The training environment: MemSearcher (or a growing-context baseline) episodes over
    token ids, with the training turn limit."""
    if agent not in SEQUENTIAL:
        raise ValueError(f"cannot train agent {agent!r}; choose from {SEQUENTIAL}")
    count = lambda text: len(tokenizer.encode(text))
    factory = episode_factory(agent, config, count, evaluation=False)
    turns = int(config.agent.max_turns_train)
    rollout = config.rollout
    seq_len = int(rollout.max_prompt_length) + int(rollout.max_response_length)
    return EpisodeEnv(
        lambda example: factory(example["question"]),
        tokenizer,
        retriever,
        # MemSearcher makes two calls per context (action, memory update); one spare call so
        # the episode's own turn limit, not the rollout loop's, ends it.
        max_calls=2 * turns + 1,
        max_context_tokens=seq_len - int(rollout.max_tokens_per_call),
    )


def train_memsearcher(
    config: ConfigDict,
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
    from memjax.rl.run_config import RLRunConfig
    from memjax.rl.trainer import train

    workdir = workdir_lib.path(workdir)  # a local folder or gs://
    env = memsearcher_env(config, tokenizer, retriever, config.agent.name)
    tconfig = trainer_config(config, len(train_rows))
    if generate is None:
        mesh = make_mesh(tconfig.mesh.to_dict()) if tconfig.mesh is not None else None
        sampling = sampling_params(config.rollout, greedy=False)
        # The agent's own stop strings (Search-R1 stops after </search>; MemSearcher on EOS).
        stop = env.make_episode({"question": "?"}).current_call().stop
        generate = make_rollout_generate(cfg, tokenizer, sampling, stop=stop, mesh=mesh)
    result = train(
        RLRunConfig.from_section(tconfig, "config.train"),
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
    sets = job_setup.load_qa_sets(config.data, "train")
    print(job_setup.qa_split_summary(config.data, "train").line(), flush=True)
    rows = [e.to_row() for examples in sets.values() for e in examples]
    model = job_setup.load_policy_model(config)  # a wrong path fails before any embedding
    retriever = job_setup.make_retriever(config, "train")
    result = train_memsearcher(
        config,
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
