"""The MemSearcher jobs' typed settings, read once from the config at the job boundary.

    run = MemSearcherTrainRun.from_config(config)     # memsearcher.train
    run = MemSearcherEvalRun.from_config(config)      # memsearcher.eval (and SFT's task eval)

Both share a `SearchSetup` (seed, QA files, retriever, policy model, episode settings); training
adds the rollout and trainer sections, evaluation the `eval` and `eval_sampling` sections. Below
the entry points only these objects travel, never the config.

Values that decide what a check or cache sees keep the config's own value (no coercion), so
errors and cache keys read as they did when the functions took the config.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ml_collections import ConfigDict

from memjax.agents.memsearcher.agent_factory import eval_batch_sizes, parse_agents
from memjax.agents.memsearcher.job_setup import PolicyModel, RetrieverSettings
from memjax.agents.memsearcher.qa_sets import QAData
from memjax.agents.memsearcher.settings import EpisodeSettings
from memjax.agents.sampler_adapter import sampling_params
from memjax.errors import ConfigError
from memjax.sampling.sampling_params import SamplingParams, run_options

if TYPE_CHECKING:
    from memjax.remote.openai_source import OpenAISettings


@dataclasses.dataclass(frozen=True)
class SearchSetup:
    """What both MemSearcher jobs read: questions, retriever, policy and episode settings."""

    seed: int
    agent: str  # config.agent.name: the agent trained (and SFT's task evaluation runs)
    data: QAData
    retriever: RetrieverSettings
    model: PolicyModel
    episodes: EpisodeSettings

    @classmethod
    def from_config(cls, config: ConfigDict) -> SearchSetup:
        return cls(
            seed=int(config.seed),
            agent=str(config.agent.name),
            data=QAData.from_section(config.data),
            retriever=RetrieverSettings.from_section(config.retriever),
            model=PolicyModel.from_section(config.model),
            episodes=EpisodeSettings.from_config(config),
        )


@dataclasses.dataclass(frozen=True)
class RolloutSettings:
    """`config.rollout`: G rollouts per question, their lengths and sampling."""

    group_size: int
    temperature: float
    top_k: int
    top_p: float
    max_tokens_per_call: int
    max_prompt_length: int
    max_response_length: int
    decode_batch: int
    engine: object  # as given: the trainer checks it is a bool, naming the field
    engine_slots: object  # as given: the trainer checks it
    run_options: Mapping[str, object]  # the sampler's (weight_dtype, compaction, ...)

    @classmethod
    def from_section(cls, rollout: ConfigDict) -> RolloutSettings:
        return cls(
            group_size=int(rollout.group_size),
            temperature=float(rollout.temperature),
            top_k=int(rollout.top_k),
            top_p=float(rollout.top_p),
            max_tokens_per_call=int(rollout.max_tokens_per_call),
            max_prompt_length=int(rollout.max_prompt_length),
            max_response_length=int(rollout.max_response_length),
            decode_batch=int(rollout.get("decode_batch", 0)),
            engine=rollout.get("engine", False),
            engine_slots=rollout.get("engine_slots", 0),
            run_options=run_options(rollout),
        )

    def sampling(self) -> SamplingParams:
        """The sampler's parameters for rollouts (never greedy). Built when the rollouts start:
        the trainer's config checks the same values first, naming them as config.train.sampling."""
        section = {
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "max_tokens_per_call": self.max_tokens_per_call,
            **self.run_options,
        }
        return sampling_params(section, greedy=False)

    @property
    def seq_len(self) -> int:
        """Tokens per training row: prompt + response."""
        return self.max_prompt_length + self.max_response_length


@dataclasses.dataclass(frozen=True)
class TrainSettings:
    """`config.train` in the paper's terms, with the sections the trainer takes over whole.
    `loss`, `optimizer`, `lora` stay plain dicts here: the trainer's config validates them
    (`memjax.agents.memsearcher.train_job.trainer_config`) once the step count is known, which
    needs the size of the training set."""

    seed: int
    algorithm: str
    batch_size: int  # questions per step
    mini_batch_size: int
    num_steps: int  # 0: total_epochs over the training sets
    total_epochs: int
    ppo_epochs: int
    mini_batch_mode: str
    mini_batch_shards: int
    micro_batches: int
    micro_batch_per_device: int | None  # set by the scale sections: micro_batches derive from it
    num_devices: int | None  # config.hardware.num_devices, with micro_batch_per_device
    vocab_chunk: int
    shared_prefix: int
    advantage_eps: float
    save_every_steps: int
    loss: Mapping
    optimizer: Mapping
    lora: Mapping | None  # None: the config has no lora section
    mesh: Mapping

    @classmethod
    def from_config(cls, config: ConfigDict) -> TrainSettings:
        train = config.train
        per_device = train.get("micro_batch_per_device")
        return cls(
            seed=int(config.seed),
            algorithm=train.algorithm,
            batch_size=train.batch_size,
            mini_batch_size=train.mini_batch_size,
            num_steps=int(train.num_steps),
            total_epochs=int(train.total_epochs),
            ppo_epochs=int(train.ppo_epochs),
            mini_batch_mode=str(train.get("mini_batch_mode", "shuffled")),
            mini_batch_shards=int(train.get("mini_batch_shards", 1)),
            micro_batches=int(train.micro_batches),
            micro_batch_per_device=None if per_device is None else int(per_device),
            num_devices=None if per_device is None else int(config.hardware.num_devices),
            vocab_chunk=int(train.vocab_chunk),
            shared_prefix=int(train.get("shared_prefix", 0)),
            advantage_eps=train.advantage_eps,
            save_every_steps=int(train.save_every_steps),
            loss=config.loss.to_dict(),
            optimizer=config.optimizer.to_dict(),
            lora=config.lora.to_dict() if "lora" in config else None,
            mesh=dict(config.mesh),
        )


@dataclasses.dataclass(frozen=True)
class EvalSettings:
    """`config.eval` and `config.eval_sampling`: the agents compared and how they run."""

    agents: tuple[str, ...]
    policy_source: str  # "" samples config.model in process; else openai:MODEL@URL
    batch_sizes: Mapping[str, int]  # questions per lock-step batch, per agent
    sampling: SamplingParams  # greedy at temperature 0, as the papers' eval scripts
    max_context_tokens: int
    engine: bool  # episodes as clients of the continuous-batching engine
    engine_slots: int  # 0: the agent's batch size
    openai: OpenAISettings | None  # the endpoint's client settings, with a policy_source

    @classmethod
    def from_config(cls, config: ConfigDict) -> EvalSettings:
        """Checked in the order the eval job always checked them."""
        from memjax.remote import openai_source

        section = config.eval
        agents = parse_agents(section.agents)
        source = str(section.get("policy_source", "") or "")
        if source and not source.startswith("openai:"):
            raise ConfigError(
                f"config.eval.policy_source={source!r}: expected openai:MODEL@URL or ''"
            )
        batch_sizes = eval_batch_sizes(section)
        openai = openai_source.settings_from_config(config.get("openai")) if source else None
        return cls(
            agents=tuple(agents),
            policy_source=source,
            batch_sizes=batch_sizes,
            sampling=sampling_params(config.eval_sampling),
            max_context_tokens=int(section.max_context_tokens),
            engine=bool(section.get("engine", False)),
            engine_slots=int(section.get("engine_slots", 0) or 0),
            openai=openai,
        )


@dataclasses.dataclass(frozen=True)
class MemSearcherTrainRun:
    """memsearcher.train's settings."""

    setup: SearchSetup
    rollout: RolloutSettings
    train: TrainSettings

    @classmethod
    def from_config(cls, config: ConfigDict) -> MemSearcherTrainRun:
        return cls(
            setup=SearchSetup.from_config(config),
            rollout=RolloutSettings.from_section(config.rollout),
            train=TrainSettings.from_config(config),
        )


@dataclasses.dataclass(frozen=True)
class MemSearcherEvalRun:
    """memsearcher.eval's settings (and those of SFT's search-agent evaluation)."""

    eval: EvalSettings
    setup: SearchSetup

    @classmethod
    def from_config(cls, config: ConfigDict) -> MemSearcherEvalRun:
        # The eval section first: a bad agent list fails before any file is looked at.
        return cls(eval=EvalSettings.from_config(config), setup=SearchSetup.from_config(config))


__all__ = [
    "EvalSettings",
    "MemSearcherEvalRun",
    "MemSearcherTrainRun",
    "RolloutSettings",
    "SearchSetup",
    "TrainSettings",
]
