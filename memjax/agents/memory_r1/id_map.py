"""Small prompt ids for real memory ids, so the model can neither see nor corrupt real ids.

The manager is shown memories as "0", "1", ...; whatever it writes back is looked up here, and
an id it invents (or mangles) resolves to nothing and the operation is rejected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from memjax.bounded_input import ascii_int


@dataclasses.dataclass(frozen=True)
class IdMap:
    real_ids: tuple[str, ...]  # position i is shown to the model as str(i)
    texts: tuple[str, ...]

    @classmethod
    def from_memories(cls, memories: Sequence[tuple[str, str]]) -> IdMap:
        """[(real_id, text), ...] in the order the prompt should list them."""
        real_ids = tuple(str(real_id) for real_id, _ in memories)
        if len(set(real_ids)) != len(real_ids):
            raise ValueError(f"IdMap: duplicate real memory ids in {real_ids}")
        return cls(real_ids, tuple(text for _, text in memories))

    def __len__(self) -> int:
        return len(self.real_ids)

    def prompt_entries(self) -> list[dict[str, str]]:
        """[{"id": "0", "text": ...}, ...] for the manager prompt."""
        return [{"id": str(i), "text": t} for i, t in enumerate(self.texts)]

    def index_of(self, prompt_id: object) -> int | None:
        """The position a model-written id names, or None. Accepts "3", " 3 " and 3, not
        "03", "3.0", "²" or True, so only ids the model was shown resolve."""
        index = ascii_int(prompt_id)
        if index is None or index >= len(self.real_ids):
            return None
        if isinstance(prompt_id, str) and str(index) != prompt_id.strip():
            return None  # "03": not how the prompt wrote any id
        return index

    def real_id(self, prompt_id: object) -> str | None:
        i = self.index_of(prompt_id)
        return None if i is None else self.real_ids[i]

    def text(self, prompt_id: object) -> str | None:
        i = self.index_of(prompt_id)
        return None if i is None else self.texts[i]
