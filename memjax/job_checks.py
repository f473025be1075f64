"""Each job's config checked at launch, before anything loads: a bad value fails in the first
second with its field and the allowed range, not minutes later with an unrelated error.

    check_job_config("memory_r1.train_answer", config)     # raises memjax.errors.ConfigError

The trainer sections are read into their typed configs (`RLRunConfig`, `SFTRunConfig`), which
check their own bounds; the other sections' sizes are checked here by dotted path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from memjax.errors import ConfigError


def _lookup(config, dotted: str):
    node = config
    for key in dotted.split("."):
        if not hasattr(node, "keys") or key not in node:
            return None
        node = node[key]
    return node


def at_least(config, low: int, paths: Iterable[str]) -> None:
    """Every present field of `paths` is an integer >= low."""
    for path in paths:
        v = _lookup(config, path)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or float(v) != int(v):
            raise ConfigError(f"config.{path}={v!r}: expected an integer >= {low}")
        if v < low:
            raise ConfigError(f"config.{path}={v!r}: must be >= {low}")


def one_of(config, path: str, choices: Iterable[str]) -> None:
    """The field at `path`, when present, is one of `choices`."""
    v, choices = _lookup(config, path), tuple(choices)
    if v is not None and v not in choices:
        raise ConfigError(f"config.{path}={v!r}: expected one of {', '.join(choices)}")


def _memory_r1_sections(config) -> None:
    at_least(
        config,
        1,
        (
            "construction.related_k",
            "construction.fact_max_new_tokens",
            "construction.manager_max_new_tokens",
            "construction.batch_size",
            "construction.max_prompt_tokens",
            "answer_agent.k_per_speaker",
            "answer_agent.max_new_tokens",
            "answer_agent.batch_size",
            "judge.max_new_tokens",
            "snapshots.window",
            "data.synthetic.num_conversations",
            "data.synthetic.sessions_per_conversation",
        ),
    )
    at_least(
        config,
        0,
        ("construction.fact_context_turns", "construction.checkpoint_every", "data.max_questions"),
    )
    from memjax.agents.memory_r1.bank_builders import builder
    from memjax.agents.memory_r1.rewards import REWARD_METRICS

    one_of(config, "answer_agent.metric", REWARD_METRICS)

    builder(config)


def _paper_recipe_fields(config) -> None:
    """A paper-recipe file (configs/grpo_qwen7b.py ...) in its own terms, before translation."""
    if "construction" in config:
        return
    at_least(
        config,
        1,
        (
            "train.batch_size",
            "train.mini_batch_size",
            "train.ppo_epochs",
            "train.micro_batch_per_device",
            "rollout.group_size",
            "rollout.max_prompt_length",
            "rollout.max_response_length",
            "agent.memories_per_speaker",
            "agent.manager_top_k",
            "agent.snapshot_window",
        ),
    )


def _memory_r1_train(config) -> None:
    from memjax.agents.memory_r1.recipe import from_paper_recipe
    from memjax.rl.run_config import RLRunConfig

    _paper_recipe_fields(config)
    config = from_paper_recipe(config)
    _memory_r1_sections(config)
    RLRunConfig.from_section(config.rl, "config.rl")


def _memory_r1_eval(config) -> None:
    from memjax.agents.memory_r1.recipe import from_paper_recipe

    _paper_recipe_fields(config)
    _memory_r1_sections(from_paper_recipe(config))


def _memory_r1_demo(config) -> None:
    _memory_r1_train(config)
    at_least(
        config,
        1,
        ("demo.train_conversations", "demo.eval_conversations", "demo.sessions_per_conversation"),
    )
    at_least(config, 0, ("demo.max_eval_examples",))


def _memsearcher(config) -> None:
    at_least(
        config,
        1,
        (
            "agent.memory_cap_tokens",
            "agent.max_turns_train",
            "agent.max_turns_eval",
            "rollout.group_size",
            "rollout.max_tokens_per_call",
            "rollout.max_prompt_length",
            "rollout.max_response_length",
            "eval_sampling.max_tokens_per_call",
            "eval.batch_size",
            "eval.max_context_tokens",
            "retriever.default_top_n",
            "retriever.max_top_n",
            "train.batch_size",
            "train.mini_batch_size",
            "train.ppo_epochs",
            "train.micro_batches",
            "train.vocab_chunk",
        ),
    )
    at_least(config, 0, ("data.max_examples", "train.num_steps"))
    if _lookup(config, "eval.batch_size") is not None:
        from memjax.agents.memsearcher.agent_factory import eval_batch_sizes

        eval_batch_sizes(config.eval)  # "agent=N,..." well formed


def _memsearcher_train(config) -> None:
    from memjax.agents.memsearcher.train_job import trainer_config
    from memjax.rl.run_config import RLRunConfig

    _memsearcher(config)
    RLRunConfig.from_section(trainer_config(config, int(config.train.batch_size)), "config.train")


def _toy_rl(config) -> None:
    from memjax.rl.run_config import RLRunConfig

    at_least(
        config,
        1,
        ("model.vocab_size", "model.embed_dim", "model.mlp_dim", "model.num_layers")
        + ("model.num_heads", "model.num_kv_heads", "task.num_targets", "task.length"),
    )
    RLRunConfig.from_section(config)


def _sft(config) -> None:
    from memjax.sft.run_config import SFTRunConfig

    if not str(_lookup(config, "data.train") or ""):
        raise ConfigError("config.data.train: the trajectory jsonl to train on is required")
    SFTRunConfig.from_section(config.sft, "config.sft")
    kind = _lookup(config, "task_eval.kind")
    if kind not in (None, "none", "search_agent"):
        raise ConfigError(f"config.task_eval.kind={kind!r}: choose none or search_agent")
    at_least(config, 1, ("task_eval.max_examples",))
    at_least(config, 0, ("data.max_per_role",))


CHECKS: dict[str, Callable] = {
    "rl.train": _toy_rl,
    "sft.train": _sft,
    "memory_r1.build_banks": _memory_r1_eval,
    "memory_r1.eval": _memory_r1_eval,
    "memory_r1.train_manager": _memory_r1_train,
    "memory_r1.train_answer": _memory_r1_train,
    "memory_r1.demo": _memory_r1_demo,
    "memsearcher.train": _memsearcher_train,
    "memsearcher.eval": _memsearcher,
}


def check_job_config(job: str, config) -> None:
    """Raises ConfigError for the first bad field of `job`'s config; jobs without a schema
    here check their own few fields when they start."""
    check = CHECKS.get(job)
    if check is not None:
        check(config)


__all__ = ["check_job_config", "at_least", "CHECKS"]
