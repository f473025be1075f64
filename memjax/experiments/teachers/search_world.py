"""The HotpotQA questions, retriever and agent settings the search teachers and replays share.

The question an agent sees is HotpotQA's with `?` appended where it lacks one (as the
MemSearcher jobs load it), and the gold answer is the file's `answer`. `settings_dict` goes
into every trajectory's source, so a replay under other settings is refused, not misjudged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memjax.agents.memsearcher.episode import MemSearcherSettings
from memjax.agents.retrieval import Passage, Retriever
from memjax.agents.search_r1 import SearchR1Settings
from memjax.data.hotpotqa import HotpotExample


class SearchWorld:
    def __init__(
        self,
        examples: Sequence[HotpotExample],
        retriever: Retriever,
        count_tokens: Callable[[str], int],
        data_path: str,
        memsearcher: MemSearcherSettings = MemSearcherSettings(),
        search_r1: SearchR1Settings = SearchR1Settings(),
        max_call_tokens: int = 0,
    ):
        self.examples = {e.id: e for e in examples}
        self.retriever = retriever
        self.count_tokens = count_tokens
        self.data_path = str(data_path)
        self.memsearcher = memsearcher
        self.search_r1 = search_r1
        # The most tokens (with the closing EOS) one model call may write, as the agent's
        # sampler allows; 0: no limit. A teacher's completion over it is one the student could
        # never write, and its trajectory is rejected.
        self.max_call_tokens = int(max_call_tokens)
        self._searched: dict[tuple[str, int], list[Passage]] = {}

    def search(self, queries: list[str], k: int) -> list[list[Passage]]:
        """The retriever's passages, remembered per (query, k): a batched query embeds a
        hair differently from a single one (padding), so a replay that asks again one query
        at a time sees the passages the trajectory saw, not a near-tie reordering."""
        todo = list(dict.fromkeys(q for q in queries if (q, k) not in self._searched))
        if todo:
            for query, passages in zip(todo, self.retriever.search(todo, k)):
                self._searched[(query, k)] = list(passages)
        return [list(self._searched[(q, k)]) for q in queries]

    def example(self, question_id: str) -> HotpotExample:
        if question_id not in self.examples:
            raise KeyError(f"question {question_id!r} is not in {self.data_path}")
        return self.examples[question_id]

    @staticmethod
    def question(example: HotpotExample) -> str:
        return example.to_qa(add_question_mark=True).question

    @staticmethod
    def golden(example: HotpotExample) -> tuple[str, ...]:
        return (example.answer,)

    def settings_dict(self, agent: str) -> dict:
        if agent == "memsearcher":
            s = self.memsearcher
            return {
                "max_turns": s.max_turns,
                "memory_cap_tokens": s.memory_cap_tokens,
                "default_top_n": s.search.default_top_n,
                "max_top_n": s.search.max_top_n,
                "passage_separator": s.search.passage_separator,
                "max_call_tokens": self.max_call_tokens,
            }
        if agent == "search_r1":
            r1 = self.search_r1
            return {
                "max_turns": r1.max_turns,
                "top_k": r1.top_k,
                "max_call_tokens": self.max_call_tokens,
            }
        raise ValueError(f"no search agent {agent!r}; valid: memsearcher, search_r1")

    def over_budget(self, completion: str) -> bool:
        """Whether one call's completion (and its EOS) outgrows what the sampler lets it write."""
        limit = self.max_call_tokens
        return bool(limit) and self.count_tokens(completion) + 1 > limit
