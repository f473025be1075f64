"""The one place jobs register.

A config names its job (`config.job = "model.generate"`); `memjax.launch` looks it up here and
calls `fn(config, workdir)`. Entries are "module:function" strings, so the launcher imports only
the job it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from memjax.errors import ConfigError

JOBS: dict[str, str] = {
    "model.generate": "memjax.sampling.demo:generate_job",
    "rl.train": "memjax.rl.toy:train_job",
    "index.build": "memjax.memory.corpus:build_index_job",
    "retriever.serve": "memjax.memory.server:serve_job",
    "memory.serve": "memjax.serving.memory_job:serve_job",
    "memory_r1.build_banks": "memjax.agents.memory_r1.evaluation:build_banks_job",
    "memory_r1.eval": "memjax.agents.memory_r1.evaluation:eval_job",
    "memory_r1.train_manager": "memjax.agents.memory_r1.training:train_manager_job",
    "memory_r1.train_answer": "memjax.agents.memory_r1.training:train_answer_job",
    "memory_r1.demo": "memjax.experiments.demo:demo_job",
    "memsearcher.train": "memjax.agents.memsearcher.train_job:train_job",
    "memsearcher.eval": "memjax.agents.memsearcher.eval_job:eval_job",
    "sft.make_data": "memjax.experiments.teachers.job:make_data_job",
    "sft.train": "memjax.agents.sft_job:train_job",
    "reproduce.run": "memjax.experiments.reproduce.job:reproduce_job",
    "serve.openai": "memjax.serving.openai_job:serve_job",
}


# Jobs whose every workdir file goes through memjax.workdir, so their --workdir may be gs://.
# The others keep local working files there (memory banks, ScaNN indexes, call caches).
REMOTE_WORKDIR_JOBS = frozenset({"rl.train", "sft.train", "memsearcher.train"})


def check_workdir(name: str, workdir: str | None) -> None:
    """Refuses a gs:// workdir for a job that writes it with local file APIs."""
    from memjax import workdir as workdir_lib

    workdir_lib.check(workdir)
    if workdir and workdir_lib.is_remote(workdir) and name not in REMOTE_WORKDIR_JOBS:
        raise ConfigError(
            f"--workdir={workdir}: job {name} keeps local files in its workdir; give it a "
            f"local or mounted path (gs:// workdirs: {', '.join(sorted(REMOTE_WORKDIR_JOBS))})"
        )


class UnknownJobError(ConfigError):
    """config.job names no registered job."""


def resolve(name: str) -> Callable:
    if name not in JOBS:
        raise UnknownJobError(
            f"config.job={name!r}: unknown job; valid jobs: {', '.join(sorted(JOBS))}"
        )
    register_sources()
    module, fn = JOBS[name].split(":")
    return getattr(importlib.import_module(module), fn)


def register_sources() -> None:
    """The laboratory's data sources (`config.data.path="synthetic"` for the Memory-R1 jobs),
    registered where the layers below look them up: they never import the laboratory."""
    from memjax.experiments import sources

    sources.register()
