"""grain pipelines that feed QA examples to training and evaluation.

A source is anything random-access of QA records: a TFDS array_record source
(`tfds_locomo.locomo_qa_source`, records decoded here) or a plain sequence of LocomoExample
(e.g. the Memory-R1 split of a synthetic file). Batches are lists of LocomoExample: examples are
text, and the environment turns them into token ids itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grain

from memjax.data.splits import LocomoExample
from memjax.data.tfds_locomo import record_to_example


def to_example(record: Any) -> LocomoExample:
    """A source element -> LocomoExample (LocomoExample passes through; TFDS dicts are decoded)."""
    if isinstance(record, LocomoExample):
        return record
    if isinstance(record, dict):
        return record_to_example(record)
    raise TypeError(f"expected a LocomoExample or a TFDS record dict, got {type(record).__name__}")


def _as_list(batch: Sequence[LocomoExample]) -> list[LocomoExample]:
    return list(batch)


def qa_dataset(
    source: Sequence[Any],
    *,
    batch_size: int | None = None,
    shuffle: bool = True,
    seed: int = 0,
    num_epochs: int | None = 1,
    drop_remainder: bool = False,
) -> grain.MapDataset:
    """Random-access pipeline: (shuffle per epoch) -> decode -> (repeat) -> (batch as lists).

    num_epochs=None repeats forever (training); shuffle order differs between epochs because
    grain reseeds the shuffle per epoch.
    """
    ds = grain.MapDataset.source(source)
    if shuffle:
        ds = ds.shuffle(seed=seed)
    ds = ds.map(to_example)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    if batch_size is not None:
        ds = ds.batch(batch_size, drop_remainder=drop_remainder, batch_fn=_as_list)
    return ds


class _ToExample(grain.transforms.Map):
    def map(self, element: Any) -> LocomoExample:
        return to_example(element)


def qa_data_loader(
    source: Sequence[Any],
    *,
    batch_size: int,
    shuffle: bool = True,
    seed: int = 0,
    num_epochs: int | None = 1,
    drop_remainder: bool = False,
    worker_count: int = 0,
    shard_options: grain.sharding.ShardOptions | None = None,
) -> grain.DataLoader:
    """A checkpointable grain.DataLoader over the same examples (get_state/set_state resume).

    Shard by host with `grain.sharding.ShardByJaxProcess()` on multi-host runs.
    """
    sampler = grain.samplers.IndexSampler(
        num_records=len(source),
        shard_options=shard_options or grain.sharding.NoSharding(),
        shuffle=shuffle,
        num_epochs=num_epochs,
        seed=seed,
    )
    return grain.DataLoader(
        data_source=source,
        sampler=sampler,
        operations=[
            _ToExample(),
            grain.transforms.Batch(batch_size, drop_remainder=drop_remainder, batch_fn=_as_list),
        ],
        worker_count=worker_count,
    )
