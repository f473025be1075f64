"""The Search-R1 baseline (Jin et al., arXiv 2503.09516): `<search>` / `<information>` /
`<answer>` tags in one growing assistant turn, rewarded by exact match."""

from memjax.agents.search_r1.episode import SearchR1Episode, SearchR1Settings, search_r1_settings
from memjax.agents.search_r1.format import (
    extract_answer,
    format_information,
    parse_action,
    prompt,
    reward,
)

__all__ = [
    "SearchR1Episode",
    "SearchR1Settings",
    "extract_answer",
    "format_information",
    "parse_action",
    "prompt",
    "reward",
    "search_r1_settings",
]
