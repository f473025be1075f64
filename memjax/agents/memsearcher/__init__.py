"""MemSearcher (Yuan et al., arXiv 2511.02805): a search agent whose every context is rebuilt
from (question, compact memory), trained with multi-context GRPO."""

from memjax.agents.memsearcher.episode import MemSearcherEpisode, MemSearcherSettings
from memjax.agents.memsearcher.prompts import SYSTEM_PROMPT, context_messages
from memjax.agents.memsearcher.reward import FormatCheck, RewardResult, reward, validate_format

__all__ = [
    "SYSTEM_PROMPT",
    "FormatCheck",
    "MemSearcherEpisode",
    "MemSearcherSettings",
    "RewardResult",
    "context_messages",
    "reward",
    "validate_format",
]
