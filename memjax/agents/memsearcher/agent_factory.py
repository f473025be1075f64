"""Episodes of MemSearcher and of its baselines, built from one config's settings
(`EpisodeSettings`) so that all agents share the retriever settings (top-n) and the turn limit,
and differ only in how they keep context.

Search-R1 runs with its own settings from the config's `search_r1` section (3 passages per
search, 4 search rounds, observations cut at 500 tokens), ReAct uses MemSearcher's tool and
settings, and plain RAG retrieves `retriever.default_top_n` passages once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ml_collections import ConfigDict

from memjax.agents.episode import Episode
from memjax.agents.memsearcher.episode import MemSearcherEpisode
from memjax.agents.memsearcher.react import ReActEpisode, ReActSettings
from memjax.agents.memsearcher.settings import EpisodeSettings
from memjax.agents.rag import RagSettings, make_rag_episodes
from memjax.agents.retrieval import Retriever
from memjax.agents.search_r1 import SearchR1Episode
from memjax.errors import ConfigError

AGENTS = ("memsearcher", "search_r1", "react", "rag")
SEQUENTIAL = ("memsearcher", "search_r1", "react")  # the multi-turn agents


def parse_agents(names: str) -> list[str]:
    agents = [a.strip() for a in str(names).split(",") if a.strip()]
    unknown = [a for a in agents if a not in AGENTS]
    if unknown or not agents:
        raise ConfigError(f"config.eval.agents={names!r}: choose from {', '.join(AGENTS)}")
    return agents


def parse_batch_sizes(spec: str, default: int) -> dict[str, int]:
    """`eval.agent_batch_sizes` ("memsearcher=20,react=10") -> questions per lock-step batch for
    every agent; an agent the spec leaves out gets `default` (`eval.batch_size`).

    Per agent because their contexts differ by an order of magnitude: MemSearcher's stays near a
    thousand tokens, ReAct's and Search-R1's grow to thousands, and a prefill holds
    [batch, heads, tokens, tokens] scores.
    """
    sizes = dict.fromkeys(AGENTS, int(default))
    field = f"config.eval.agent_batch_sizes={spec!r}"
    for item in (part.strip() for part in str(spec or "").split(",")):
        if not item:
            continue
        name, sep, value = (x.strip() for x in item.partition("="))
        if not sep or name not in AGENTS:
            raise ConfigError(f"{field}: expected agent=N with agent one of {', '.join(AGENTS)}")
        if not value.isdigit() or int(value) < 1:
            raise ConfigError(f"{field}: {name}'s batch size {value!r} must be an integer >= 1")
        sizes[name] = int(value)
    return sizes


def eval_batch_sizes(eval_section: ConfigDict) -> dict[str, int]:
    """A config's `eval` section -> questions per lock-step batch for every agent."""
    spec = eval_section.get("agent_batch_sizes", "")
    return parse_batch_sizes(spec, int(eval_section.batch_size))


def episode_factory(
    agent: str,
    episodes: EpisodeSettings,
    count_tokens: Callable[[str], int],
    evaluation: bool,
) -> Callable[[str], Episode]:
    """question -> a fresh episode of a multi-turn agent."""
    settings = episodes.memsearcher(evaluation)
    if agent == "memsearcher":
        return lambda q: MemSearcherEpisode(q, count_tokens, settings)
    if agent == "search_r1":
        sr1 = episodes.search_r1
        if sr1 is None:
            raise ConfigError("config.search_r1: missing; the search_r1 agent runs with it")
        return lambda q: SearchR1Episode(q, sr1, count_tokens)
    if agent == "react":
        react = ReActSettings(max_turns=settings.max_turns, search=settings.search)
        return lambda q: ReActEpisode(q, react)
    raise ValueError(f"no multi-turn episode for agent {agent!r}; choose from {SEQUENTIAL}")


def make_episodes(
    agent: str,
    questions: Sequence[str],
    episodes: EpisodeSettings,
    retriever: Retriever,
    count_tokens: Callable[[str], int],
    evaluation: bool = True,
) -> list[Episode]:
    if agent == "rag":
        return make_rag_episodes(questions, retriever, RagSettings(top_k=episodes.rag_top_k))
    factory = episode_factory(agent, episodes, count_tokens, evaluation)
    return [factory(q) for q in questions]
