"""grain pipelines over QA examples: a random-access source, shuffling, sharding and batching.

Batches are lists of row dicts (answers differ in number, so they cannot be stacked into
arrays); the trainer expands each question into its GRPO group. The loader's iterator state
(`get_state` / `set_state`) goes into checkpoints so a resumed run sees the same questions.
"""

from __future__ import annotations

from collections.abc import Sequence

import grain.python as grain

from memjax.data.qa import QAExample


class QASource(grain.RandomAccessDataSource):
    def __init__(self, examples: Sequence[QAExample]):
        self._rows = [e.to_row() for e in examples]

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: int) -> dict:
        return dict(self._rows[index])

    def __repr__(self) -> str:
        # grain stores repr(source) in the iterator state; keep it free of memory addresses.
        first = self._rows[0]["id"] if self._rows else ""
        return f"QASource(n={len(self._rows)}, first_id={first!r})"


def _as_list(records: Sequence[dict]) -> list[dict]:
    return list(records)


def qa_loader(
    examples: Sequence[QAExample],
    batch_size: int,
    *,
    seed: int = 0,
    shuffle: bool = True,
    num_epochs: int | None = 1,
    drop_remainder: bool = False,
    worker_count: int = 0,
    shard_index: int = 0,
    shard_count: int = 1,
) -> grain.DataLoader:
    """A DataLoader yielding lists of `{"id","question","golden_answers","dataset"}` rows.

    With several hosts, pass `shard_index=jax.process_index()`, `shard_count=jax.process_count()`
    so every host reads a disjoint slice.
    """
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if not examples:
        raise ValueError("qa_loader got no examples")
    source = QASource(examples)
    sampler = grain.IndexSampler(
        num_records=len(source),
        shard_options=grain.ShardOptions(
            shard_index=shard_index, shard_count=shard_count, drop_remainder=drop_remainder
        ),
        shuffle=shuffle,
        num_epochs=num_epochs,
        seed=seed,
    )
    return grain.DataLoader(
        data_source=source,
        sampler=sampler,
        operations=[grain.Batch(batch_size, drop_remainder=drop_remainder, batch_fn=_as_list)],
        worker_count=worker_count,
    )
