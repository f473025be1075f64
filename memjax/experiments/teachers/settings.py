"""The `sft.make_data` job's settings, read once from its config before anything loads.

    run = MakeDataRun.from_config(config)     # every ValueError names its field

Values and files are checked here (roles, split, teacher kind, answer data, the data files the
chosen roles read), so a bad one fails before a model, an embedder or an index loads. The
search roles' settings are read only when a search role is asked for.
"""

from __future__ import annotations

import dataclasses

from memjax.agents.memory_r1.answer_env import AnswerSettings
from memjax.agents.memory_r1.construction import ConstructionSettings
from memjax.agents.memsearcher.job_setup import RetrieverSettings, resolve_path
from memjax.errors import ConfigError
from memjax.experiments.teachers.data_split import SPLITS
from memjax.experiments.teachers.memory_world import MemorySettings
from memjax.experiments.teachers.search_roles import AGENTS as SEARCH_ROLES
from memjax.experiments.teachers.trajectory import ROLES
from memjax.remote.openai_source import OpenAISettings, settings_from_config

MEMORY_ROLES = ("facts", "manager", "answer")
TEACHERS = ("oracle", "model")
ANSWER_DATA = ("synthetic", "locomo")


def parse_roles(names: str) -> list[str]:
    roles = [r.strip() for r in str(names).split(",") if r.strip()]
    bad = [r for r in roles if r not in ROLES]
    if bad or not roles:
        raise ConfigError(f"config.roles={names!r}: choose from {', '.join(ROLES)}")
    return roles


def _answer_data(value: str) -> list[str]:
    data = [d.strip() for d in str(value).split(",") if d.strip()]
    unknown = [d for d in data if d not in ANSWER_DATA]
    if unknown or not data:
        raise ConfigError(f"config.answer_data={value!r}; choose from {ANSWER_DATA}")
    return data


@dataclasses.dataclass(frozen=True)
class TeacherSpec:
    """`config.teacher`: the scripted oracles, or a model (weights or an `openai:` endpoint)
    sampled at these settings."""

    kind: str
    source: str = ""
    param_dtype: str = "float32"
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 256
    batch_size: int = 8
    max_prompt_tokens: int = 8192
    attempts: int = 1  # samples per item (a model teacher's; the oracles make one)
    seed: int = 0
    openai: OpenAISettings = OpenAISettings()

    @classmethod
    def from_section(cls, t) -> TeacherSpec:
        if t.kind not in TEACHERS:
            raise ConfigError(f"config.teacher.kind={t.kind!r}; choose from {TEACHERS}")
        model = t.kind == "model"
        return cls(
            kind=str(t.kind),
            source=str(t.source or ""),
            param_dtype=str(t.param_dtype),
            temperature=float(t.temperature),
            top_p=float(t.top_p),
            max_new_tokens=int(t.max_new_tokens),
            batch_size=int(t.batch_size),
            max_prompt_tokens=int(t.max_prompt_tokens),
            attempts=max(1, int(t.attempts)) if model else 1,
            seed=int(t.seed),
            openai=settings_from_config(t.get("openai")),
        )


@dataclasses.dataclass(frozen=True)
class SyntheticSpec:
    """`config.synthetic`: the generated conversations the memory roles learn from."""

    seed: int
    num_conversations: int
    sessions_per_conversation: int


@dataclasses.dataclass(frozen=True)
class SearchSpec:
    """What the search roles read: the HotpotQA file, its retriever and the agents' limits."""

    hotpotqa_path: str  # resolved: an existing file
    max_examples: int  # 0: every question of the split
    retriever: RetrieverSettings
    default_top_n: int
    max_top_n: int
    passage_separator: str
    max_turns: int
    memory_cap_tokens: int
    max_call_tokens: int  # 0: no cap

    @classmethod
    def from_config(cls, config) -> SearchSpec:
        r, a = config.retriever, config.agent
        return cls(
            hotpotqa_path=str(resolve_path(config.hotpotqa.path, "hotpotqa.path")),
            max_examples=int(config.hotpotqa.max_examples),
            retriever=RetrieverSettings.from_section(r),
            default_top_n=int(r.default_top_n),
            max_top_n=int(r.max_top_n),
            passage_separator=str(r.passage_separator),
            max_turns=int(a.max_turns),
            memory_cap_tokens=int(a.memory_cap_tokens),
            max_call_tokens=int(a.get("max_call_tokens", 0)),
        )


@dataclasses.dataclass(frozen=True)
class MakeDataRun:
    roles: list[str]
    split: str  # "train" | "heldout"
    output_dir: str  # "": the workdir
    tokenizer: str  # the student's: memory caps and token counts
    teacher: TeacherSpec
    answer_data: list[str]  # the answer role's conversations: "synthetic", "locomo"
    embedder_source: str
    embedder_layout: str | None
    memory: MemorySettings
    synthetic: SyntheticSpec
    locomo_path: str  # resolved when the answer role reads LoCoMo, else as given
    search: SearchSpec | None  # None: no search role asked for

    @classmethod
    def from_config(cls, config) -> MakeDataRun:
        roles = parse_roles(config.roles)
        if config.split not in SPLITS:
            raise ConfigError(f"config.split={config.split!r}; choose from {SPLITS}")
        teacher = TeacherSpec.from_section(config.teacher)
        answer_data = _answer_data(config.answer_data) if "answer" in roles else []
        locomo = str(config.locomo.path)
        if "locomo" in answer_data:
            locomo = str(resolve_path(config.locomo.path, "locomo.path"))
        search = None
        if any(r in SEARCH_ROLES for r in roles):
            search = SearchSpec.from_config(config)
        s = config.synthetic
        return cls(
            roles=roles,
            split=str(config.split),
            output_dir=str(config.output_dir or ""),
            tokenizer=str(config.tokenizer),
            teacher=teacher,
            answer_data=answer_data,
            embedder_source=str(config.embedder.source),
            embedder_layout=config.embedder.layout or None,
            memory=_memory_settings(config.memory),
            synthetic=SyntheticSpec(
                int(s.seed), int(s.num_conversations), int(s.sessions_per_conversation)
            ),
            locomo_path=locomo,
            search=search,
        )


def _memory_settings(m) -> MemorySettings:
    """`config.memory` as the memory world's settings (the agents' own dataclasses)."""
    return MemorySettings(
        construction=ConstructionSettings(int(m.related_k), int(m.fact_context_turns)),
        answer=AnswerSettings(
            distill=bool(m.distill), metric=str(m.metric), style=str(m.answer_style)
        ),
        k_per_speaker=int(m.k_per_speaker),
        locomo_date_only=bool(m.locomo_date_only),
    )


__all__ = [
    "ANSWER_DATA",
    "MEMORY_ROLES",
    "TEACHERS",
    "MakeDataRun",
    "SearchSpec",
    "SyntheticSpec",
    "TeacherSpec",
    "parse_roles",
]
