"""Prompt templates as data: every agent prompt is rendered from a template a config can point at.

    template = load_template(MANAGER_TEMPLATE, "/prompts/mem0_update.txt", "config.prompts.manager")
    text = template.render(current_memory=..., facts=...)

A template is text with named placeholders written `{{name}}`; everything else is literal
(JSON braces included, so an author's prompt can be pasted as it is). Each prompt declares its
placeholders; a template file must use each of them and no other, or loading it raises one
error naming the file, the config field and every offending placeholder. memjax's own wording
is each prompt's default (kept in its module as a `PromptTemplate`); `config.prompts.<name>`
set to a file path replaces it, and only the text changes: parsing, rewards and the episode
logic read the model's output, not the prompt.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

from memjax.errors import ConfigError

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
DEFAULT_SOURCE = "memjax's default"


class TemplateError(ConfigError):
    """A template file whose placeholders do not match its prompt's."""


@dataclasses.dataclass(frozen=True)
class PromptTemplate:
    name: str  # which prompt ("judge", "memsearcher_user", ...): its config.prompts field
    placeholders: tuple[str, ...]  # every one must appear; no other may
    text: str
    source: str = DEFAULT_SOURCE  # the file it came from

    def __post_init__(self):
        problems = placeholder_problems(self.text, self.placeholders)
        if problems:
            raise TemplateError(f"{self.source}: template {self.name!r}: {problems}")

    def render(self, **values: str) -> str:
        if set(values) != set(self.placeholders):
            raise ValueError(
                f"template {self.name!r} takes {sorted(self.placeholders)}, got {sorted(values)}"
            )
        return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.text)


def placeholder_problems(text: str, placeholders: tuple[str, ...]) -> str:
    """'' when `text` uses exactly `placeholders`; else what is unknown and what is missing."""
    used = set(PLACEHOLDER.findall(text))
    braced = lambda names: ", ".join("{{" + n + "}}" for n in names)  # noqa: E731
    unknown = sorted(used - set(placeholders))
    missing = [p for p in placeholders if p not in used]
    parts = []
    if unknown:
        parts.append("unknown placeholder(s) " + braced(unknown))
    if missing:
        parts.append("missing placeholder(s) " + braced(missing))
    if parts:
        takes = braced(placeholders) or "no placeholders"
        parts.append(f"it takes {takes}")
    return "; ".join(parts)


def load_template(default: PromptTemplate, path: str | Path, field: str) -> PromptTemplate:
    """The template in `path` for the prompt `default` describes (`default` when path is
    empty); `field` names the config field in errors."""
    if not path:
        return default
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"{field}={str(path)!r}: no such template file")
    text = file.read_text(encoding="utf-8")
    return PromptTemplate(default.name, default.placeholders, text, f"{field}={str(file)!r}")


def templates_from_config(
    section: Mapping[str, str] | None, defaults: Mapping[str, PromptTemplate], path: str
) -> dict[str, PromptTemplate]:
    """name -> template for every prompt in `defaults`, each from `section[name]` when set.
    An unknown name in the section is an error listing the known ones."""
    section = dict(section or {})
    unknown = sorted(set(section) - set(defaults))
    if unknown:
        raise ConfigError(f"{path}: unknown prompt(s) {unknown}; known: {sorted(defaults)}")
    return {
        name: load_template(default, section.get(name, ""), f"{path}.{name}")
        for name, default in defaults.items()
    }


__all__ = [
    "PLACEHOLDER",
    "PromptTemplate",
    "TemplateError",
    "load_template",
    "placeholder_problems",
    "templates_from_config",
]
