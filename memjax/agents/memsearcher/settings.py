"""MemSearcher's episode settings and prompt templates, read from a config
(memjax.recipes.memsearcher states the settings)."""

from __future__ import annotations

import dataclasses

from ml_collections import ConfigDict

from memjax.agents.memsearcher import prompts
from memjax.agents.memsearcher.episode import MemSearcherSettings
from memjax.agents.search_r1 import SearchR1Settings, search_r1_settings
from memjax.agents.search_r1.episode import INSTRUCTION_TEMPLATE
from memjax.agents.search_tool import SearchSettings
from memjax.text.prompt_templates import PromptTemplate, templates_from_config

PROMPT_DEFAULTS = {**prompts.TEMPLATES, INSTRUCTION_TEMPLATE.name: INSTRUCTION_TEMPLATE}


def prompt_templates(config: ConfigDict) -> dict[str, PromptTemplate]:
    """Every prompt's template: `config.prompts.<name>` (a file) or memjax's own; a bad file is
    one error naming it and its placeholders."""
    return templates_from_config(config.get("prompts"), PROMPT_DEFAULTS, "config.prompts")


def _memsearcher_settings(agent, retriever, templates, evaluation: bool) -> MemSearcherSettings:
    """From the config's `agent` and `retriever` sections."""
    return MemSearcherSettings(
        templates={k: v for k, v in templates.items() if k in prompts.TEMPLATES},
        max_turns=agent.max_turns_eval if evaluation else agent.max_turns_train,
        memory_cap_tokens=agent.memory_cap_tokens,
        search=SearchSettings(
            default_top_n=retriever.default_top_n,
            max_top_n=retriever.max_top_n,
            passage_separator=retriever.passage_separator,
        ),
    )


@dataclasses.dataclass(frozen=True)
class EpisodeSettings:
    """What every agent's episodes are built from (`agent_factory`): all agents share the
    retriever settings and turn limits, and differ only in how they keep context."""

    train: MemSearcherSettings  # MemSearcher's, with the training turn limit
    eval: MemSearcherSettings  # ... with the evaluation turn limit
    search_r1: SearchR1Settings | None  # None: the config has no `search_r1` section
    rag_top_k: int  # plain RAG's passages: retriever.default_top_n

    @classmethod
    def from_config(cls, config: ConfigDict) -> EpisodeSettings:
        templates = prompt_templates(config)  # the template files are read once
        search_r1 = None
        if "search_r1" in config:
            instruction = templates[INSTRUCTION_TEMPLATE.name]
            search_r1 = search_r1_settings(config.search_r1, instruction)
        return cls(
            train=_memsearcher_settings(config.agent, config.retriever, templates, False),
            eval=_memsearcher_settings(config.agent, config.retriever, templates, True),
            search_r1=search_r1,
            rag_top_k=int(config.retriever.default_top_n),
        )

    def memsearcher(self, evaluation: bool) -> MemSearcherSettings:
        return self.eval if evaluation else self.train
