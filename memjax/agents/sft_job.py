"""`sft.train`: supervised fine-tuning (`memjax.sft.job`) with, when `config.task_eval.kind`
asks for one, the agent's own evaluation at every eval step.

    kind "none":          held-out trajectories' loss only
    kind "search_agent":  greedy episodes of the agent of the MemSearcher recipe file
                          `task_eval.config` (`memjax.agents.memsearcher.sft_eval`)
"""

from __future__ import annotations

from ml_collections import ConfigDict

from memjax.errors import ConfigError
from memjax.sft import job as sft_job

KINDS = ("none", "search_agent")


def task_evaluation(job: sft_job.SFTJob, model):
    """The evaluation `config.task_eval` asks for, built for the loaded model (or None)."""
    kind = job.task_eval_kind
    if kind not in KINDS:
        raise ConfigError(f"config.task_eval.kind={kind!r}: choose none or search_agent")
    if kind == "none":
        return None
    from memjax.agents.memsearcher.run_settings import MemSearcherEvalRun
    from memjax.agents.memsearcher.sft_eval import load_agent_config, search_agent_eval

    # The agent's own recipe config, read into its typed settings as memsearcher.eval reads it.
    run = MemSearcherEvalRun.from_config(load_agent_config(job.task_eval_config))
    return search_agent_eval(
        run, model.tokenizer, model.cfg, max_examples=job.task_eval_max_examples
    )


def train_job(config: ConfigDict, workdir) -> dict:
    return sft_job.train_job(sft_job.SFTJob.from_config(config), workdir, task_evaluation)


__all__ = ["train_job", "task_evaluation"]
