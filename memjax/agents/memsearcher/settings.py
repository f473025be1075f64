"""MemSearcher's episode settings and prompt templates, read from a config
(memjax.recipes.memsearcher states the settings)."""

from __future__ import annotations

from ml_collections import ConfigDict

from memjax.agents.memsearcher import prompts
from memjax.agents.memsearcher.episode import MemSearcherSettings
from memjax.agents.search_r1.episode import INSTRUCTION_TEMPLATE
from memjax.agents.search_tool import SearchSettings
from memjax.text.prompt_templates import PromptTemplate, templates_from_config

PROMPT_DEFAULTS = {**prompts.TEMPLATES, INSTRUCTION_TEMPLATE.name: INSTRUCTION_TEMPLATE}


def prompt_templates(config: ConfigDict) -> dict[str, PromptTemplate]:
    """Every prompt's template: `config.prompts.<name>` (a file) or memjax's own; a bad file is
    one error naming it and its placeholders."""
    return templates_from_config(config.get("prompts"), PROMPT_DEFAULTS, "config.prompts")


def settings_from_config(config: ConfigDict, evaluation: bool = False) -> MemSearcherSettings:
    """The episode settings a config asks for (turn limit: training or evaluation)."""
    agent, retriever = config.agent, config.retriever
    templates = prompt_templates(config)
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
