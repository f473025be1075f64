"""`sft.train`: supervised fine-tuning (`memjax.sft.job`) with, when `config.task_eval.kind`
asks for one, the agent's own evaluation at every eval step.

    kind "none":          held-out trajectories' loss only
    kind "search_agent":  greedy episodes of the agent of the MemSearcher recipe file
                          `task_eval.config` (`memjax.agents.memsearcher.sft_eval`)
"""

from __future__ import annotations

from memjax.errors import ConfigError
from memjax.sft import job as sft_job

KINDS = ("none", "search_agent")


def task_evaluation(config, model):
    """The evaluation `config.task_eval` asks for, built for the loaded model (or None)."""
    section = config.get("task_eval")
    kind = str(section.kind) if section is not None else "none"
    if kind not in KINDS:
        raise ConfigError(f"config.task_eval.kind={kind!r}: choose none or search_agent")
    if kind == "none":
        return None
    from memjax.agents.memsearcher.sft_eval import load_agent_config, search_agent_eval

    agent_config = load_agent_config(str(section.config))
    return search_agent_eval(
        agent_config, model.tokenizer, model.cfg, max_examples=int(section.max_examples)
    )


def train_job(config, workdir) -> dict:
    return sft_job.train_job(config, workdir, task_evaluation=task_evaluation)


__all__ = ["train_job", "task_evaluation"]
