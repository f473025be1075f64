"""Where Memory-R1's conversations come from when `config.data.path` is not a file: a source
registered by name.

    register_source("synthetic", source)     # memjax.experiments.sources does this
    source = source_for(config.data.path)    # None: data.path is LoCoMo's locomo10.json

A source reads its own settings from the data section once, at the job's start
(`run_settings.DataSection.source_settings`). From them it gives the conversations and their
train / validation / test parts, says how it split them (for the reports), and, when it knows
the ground truth, the per-conversation oracles that build a perfect bank
(`construction.builder=oracle`, `teacher.source=oracle`). The laboratory's synthetic
conversations (`memjax.experiments`) register from the job registry (`memjax.jobs`) before a
job runs, so the agents never import the laboratory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ml_collections import ConfigDict

from memjax.data.locomo_types import Conversation
from memjax.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class ConversationSource:
    # data section (a ConfigDict) -> the source's own typed settings; the callables below
    # take what it returns
    settings: Callable[[ConfigDict], Any]
    # settings -> every conversation (train, then validation, then test)
    conversations: Callable[[Any], list[Conversation]]
    # (conversation ids, "train" | "validation" | "test", settings) -> that part's ids
    split_ids: Callable[[list[str], str, Any], list[str]]
    # settings -> how the parts were made, in a report's words
    how: Callable[[Any], str]
    # settings -> conversation id -> its ground truth (None: the source has none)
    truth: Callable[[Any], dict] | None = None
    # (truth of one conversation, its turn stream, fact context, windows) -> (facts, manager)
    # chat callables that answer the construction's prompts from that truth
    oracles: Callable[..., tuple] | None = None


_SOURCES: dict[str, ConversationSource] = {}


def register_source(name: str, source: ConversationSource) -> None:
    _SOURCES[name] = source


def registered() -> tuple[str, ...]:
    return tuple(sorted(_SOURCES))


def source_for(path: str) -> ConversationSource | None:
    """The registered source `config.data.path` names, or None when it names none (a LoCoMo
    file)."""
    return _SOURCES.get(str(path))


def require_truth(path: str, field: str, value: str) -> ConversationSource:
    """The source `config.data.path` names, which must know its ground truth for
    `config.field=value`."""
    source = source_for(path)
    if source is None or source.truth is None:
        with_truth = [n for n, s in sorted(_SOURCES.items()) if s.truth is not None]
        names = " or ".join(with_truth) or "registered"
        paths = " or ".join(f"config.data.path={n!r}" for n in with_truth) or "none registered"
        raise ConfigError(
            f"config.{field}={value!r}: only {names} data ({paths}) carries the facts and "
            f"operations an oracle reads; got {path!r}"
        )
    return source


__all__ = ["ConversationSource", "register_source", "registered", "source_for", "require_truth"]
