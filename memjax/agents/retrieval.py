"""The retriever every search agent talks to, as a Protocol, and a scripted fake for tests.

The real retrievers (an in-process index and an HTTP client for the retrieval server) live in
`memjax.memory`; agents only need `search`, batched so a whole rollout step makes one call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, TypedDict, runtime_checkable


class Passage(TypedDict):
    id: str
    contents: str  # '"Title"\ntext', the wiki-18 / FlashRAG layout
    score: float


@runtime_checkable
class Retriever(Protocol):
    def search(self, queries: list[str], k: int) -> list[list[Passage]]:
        """The top-k passages for each query, best first."""
        ...


class ScriptedRetriever:
    """Answers from a fixed table `query -> passages` (or `default` for unknown queries) and logs
    every call, so tests can check what an agent asked for and in what batches."""

    def __init__(
        self,
        table: Mapping[str, Sequence[Passage]] | None = None,
        default: Sequence[Passage] = (),
    ):
        self.table = dict(table or {})
        self.default = list(default)
        self.calls: list[tuple[list[str], int]] = []

    def search(self, queries: list[str], k: int) -> list[list[Passage]]:
        self.calls.append((list(queries), k))
        return [list(self.table.get(q, self.default))[:k] for q in queries]


def passage(doc_id: str, title: str, text: str, score: float = 1.0) -> Passage:
    return Passage(id=doc_id, contents=f'"{title}"\n{text}', score=score)
