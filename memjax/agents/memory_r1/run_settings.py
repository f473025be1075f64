"""What a Memory-R1 job reads from its config, read once at the job's start into typed settings.

    run = MemoryR1Run.from_config(config)     # eval, build_banks, train_* and demo jobs
    run.model("answer").trained               # a role's model: ModelSpec
    run.data.split, run.construction.batch_size, run.answer_agent.k_per_speaker

Below the job's entry point only these travel: the functions of job_setup, bank_builders,
evaluation and training take a MemoryR1Run or one of its sections, never the config. The
readers keep the config's own leniencies (a field a config may leave out keeps the default the
jobs always gave it) and name the config's fields in their errors, as the jobs did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ml_collections import ConfigDict

from memjax.agents.memory_r1.answer_env import ANSWER_TEMPLATES
from memjax.agents.memory_r1.construction import FACT_TEMPLATES, MANAGER_TEMPLATES
from memjax.agents.memory_r1.sources import source_for
from memjax.eval.judge import JUDGE_TEMPLATE
from memjax.remote.openai_source import OpenAISettings, settings_from_config
from memjax.text.prompt_templates import PromptTemplate, templates_from_config

# The roles that name a model: `model` is the base every other role falls back to.
ROLES = ("model", "manager", "facts", "answer", "teacher", "judge")


PROMPT_DEFAULTS = {
    **FACT_TEMPLATES,
    **MANAGER_TEMPLATES,
    **ANSWER_TEMPLATES,
    JUDGE_TEMPLATE.name: JUDGE_TEMPLATE,
}


def prompt_templates(config: ConfigDict) -> dict[str, PromptTemplate]:
    """Every Memory-R1 prompt's template: `config.prompts.<name>` (a file) or memjax's own;
    a bad file is one error naming it and its placeholders, raised at job start."""
    return templates_from_config(config.get("prompts"), PROMPT_DEFAULTS, "config.prompts")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A role's model: its checkpoint (`source`: 'packaged:smollm2', an HF directory, a .gguf,
    or `openai:MODEL@URL`), the weights a training job exported over it (`trained`, "" for
    none), and how they are held. The tokenizer and chat template always come from `source`."""

    source: str
    param_dtype: str
    trained: str = ""
    remat: str = "none"  # recompute activations in the backward pass

    @property
    def weights(self) -> str:
        """Where the weights come from: the trained directory, else the source."""
        return self.trained or self.source

    @classmethod
    def from_config(cls, config: ConfigDict, role: str) -> ModelSpec:
        """The model of a role (manager, facts, answer, teacher, judge, or `model` itself): its
        own source and dtype if set, else config.model's; its trained weights, if any."""
        own = config[role]
        return cls(
            source=own.source or config.model.source,
            param_dtype=own.param_dtype or config.model.param_dtype,
            trained=own.get("trained", "") or "",
            remat=config.model.get("remat", "") or "none",
        )


@dataclasses.dataclass(frozen=True)
class DataSection:
    """config.data: which conversations a job reads and which of their questions count."""

    path: str  # LoCoMo's locomo10.json, or a registered source's name ("synthetic")
    split: str  # train | validation | test | all (checked where a split is taken)
    conversations: str  # comma-separated ids that override the split; "" for none
    include_adversarial: bool  # category 5 questions
    max_questions: int  # per conversation; 0: all
    # The registered source's own settings (`sources.ConversationSource.settings`, e.g. the
    # synthetic split's sizes and seeds); None for a LoCoMo file.
    source_settings: Any = None

    @property
    def conversation_ids(self) -> list[str]:
        return [i.strip() for i in self.conversations.split(",") if i.strip()]

    @classmethod
    def from_config(cls, data: ConfigDict) -> DataSection:
        source = source_for(str(data.path))
        return cls(
            path=data.path,
            split=str(data.split),
            conversations=str(data.conversations) if data.conversations else "",
            include_adversarial=bool(data.include_adversarial),
            max_questions=int(data.max_questions),
            source_settings=source.settings(data) if source is not None else None,
        )


@dataclasses.dataclass(frozen=True)
class ConstructionSection:
    """config.construction: how banks are built (bank_builders, construction)."""

    related_k: int  # memories of the speaker shown to the manager
    fact_context_turns: int  # preceding turns the fact extractor sees
    fact_max_new_tokens: int
    manager_max_new_tokens: int
    batch_size: int
    max_prompt_tokens: int
    engine_slots: int = 0  # 0: lock-step batches, else a continuous-batching engine's slots
    builder: str = "policy"  # checked by bank_builders.builder, where a bank is built
    facts_dir: str = ""  # "": <banks_dir>/.facts
    checkpoint_every: int = 10  # manager calls between saves of a build; 0: never

    @classmethod
    def from_config(cls, c: ConfigDict) -> ConstructionSection:
        return cls(
            related_k=int(c.related_k),
            fact_context_turns=int(c.fact_context_turns),
            fact_max_new_tokens=int(c.fact_max_new_tokens),
            manager_max_new_tokens=int(c.manager_max_new_tokens),
            batch_size=int(c.batch_size),
            max_prompt_tokens=int(c.max_prompt_tokens),
            engine_slots=int(c.get("engine_slots", 0) or 0),
            builder=str(c.get("builder", "policy")),
            facts_dir=str(c.get("facts_dir") or ""),
            checkpoint_every=int(c.get("checkpoint_every", 10)),
        )


@dataclasses.dataclass(frozen=True)
class AnswerAgentSection:
    """config.answer_agent: the answer agent's memories, prompt, reward and decoding."""

    k_per_speaker: int  # memories retrieved per speaker
    distill: bool
    style: str
    metric: str  # the reward: em, f1 or f1_short (rewards.py)
    answer_prefix: str  # the assistant turn's first words
    max_new_tokens: int
    batch_size: int

    @classmethod
    def from_config(cls, a: ConfigDict) -> AnswerAgentSection:
        return cls(
            k_per_speaker=int(a.k_per_speaker),
            distill=bool(a.distill),
            style=str(a.style),
            metric=str(a.metric),
            answer_prefix=str(a.get("answer_prefix", "")),
            max_new_tokens=int(a.max_new_tokens),
            batch_size=int(a.batch_size),
        )


@dataclasses.dataclass(frozen=True)
class EmbedderSpec:
    source: str  # 'packaged:minilm' or a directory
    layout: str  # "": the embedder's own

    @classmethod
    def from_config(cls, e: ConfigDict) -> EmbedderSpec:
        return cls(source=e.source, layout=e.layout or "")


@dataclasses.dataclass(frozen=True)
class SnapshotSection:
    """The manager's training snapshots: who builds them and over how many turns."""

    teacher_name: str  # names the snapshot cache (config.teacher.name)
    window: int  # turns a snapshot replays before its evidence turn
    cache_dir: str  # "": <workdir>/snapshots


@dataclasses.dataclass(frozen=True)
class MemoryR1Run:
    """Every setting a Memory-R1 job reads below its entry point."""

    seed: int
    data: DataSection
    construction: ConstructionSection
    answer_agent: AnswerAgentSection
    models: Mapping[str, ModelSpec]  # role (ROLES) -> its model, for the roles the config has
    # The role whose model extracts facts: "facts" when config.facts names its own source or
    # trained weights, else "manager" (one memory model writes the facts and manages them).
    fact_role: str
    embedder: EmbedderSpec
    openai: OpenAISettings  # how `openai:MODEL@URL` sources are reached
    templates: Mapping[str, PromptTemplate]  # every prompt's, by name (prompt_templates)
    judge_max_new_tokens: int
    teacher_source: str  # config.teacher.source as written: "oracle" or a model's
    snapshots: SnapshotSection
    banks_dir: str  # "": <workdir>/banks

    def model(self, role: str) -> ModelSpec:
        return self.models[role]

    @classmethod
    def from_config(cls, config: ConfigDict) -> MemoryR1Run:
        facts = config.get("facts")
        own_extractor = facts is not None and (facts.get("source") or facts.get("trained"))
        return cls(
            seed=int(config.seed),
            data=DataSection.from_config(config.data),
            construction=ConstructionSection.from_config(config.construction),
            answer_agent=AnswerAgentSection.from_config(config.answer_agent),
            models={r: ModelSpec.from_config(config, r) for r in ROLES if r in config},
            fact_role="facts" if own_extractor else "manager",
            embedder=EmbedderSpec.from_config(config.embedder),
            openai=settings_from_config(config.get("openai")),
            templates=prompt_templates(config),
            judge_max_new_tokens=int(config.judge.max_new_tokens),
            teacher_source=str(config.teacher.source),
            snapshots=SnapshotSection(
                teacher_name=config.teacher.name,
                window=int(config.snapshots.window),
                cache_dir=config.snapshots.cache_dir or "",
            ),
            banks_dir=config.banks_dir or "",
        )


__all__ = [
    "AnswerAgentSection",
    "ConstructionSection",
    "DataSection",
    "EmbedderSpec",
    "MemoryR1Run",
    "ModelSpec",
    "PROMPT_DEFAULTS",
    "SnapshotSection",
    "prompt_templates",
]
