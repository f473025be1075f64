"""grain loader over QA examples: batching, shuffling, sharding and resuming."""

import pytest

from memjax.data.qa import QAExample
from memjax.data.qa_pipeline import qa_loader


def examples(n):
    return [QAExample(f"q{i}", f"question {i}?", (f"a{i}",) * (1 + i % 3), "toy") for i in range(n)]


def ids(batches):
    return [[row["id"] for row in batch] for batch in batches]


def test_one_epoch_in_order():
    batches = list(qa_loader(examples(7), 3, shuffle=False, worker_count=0))
    assert ids(batches) == [["q0", "q1", "q2"], ["q3", "q4", "q5"], ["q6"]]
    assert batches[0][2]["golden_answers"] == ["a2", "a2", "a2"]


def test_shuffle_is_a_seeded_permutation():
    first = ids(qa_loader(examples(10), 10, seed=3))
    again = ids(qa_loader(examples(10), 10, seed=3))
    other = ids(qa_loader(examples(10), 10, seed=4))
    assert first == again and first != other
    assert sorted(first[0]) == sorted(f"q{i}" for i in range(10))


def test_shards_are_disjoint_and_cover():
    shards = [
        {
            row["id"]
            for batch in qa_loader(examples(8), 2, shard_index=i, shard_count=2)
            for row in batch
        }
        for i in range(2)
    ]
    assert not shards[0] & shards[1]
    assert shards[0] | shards[1] == {f"q{i}" for i in range(8)}


def test_resume_from_saved_state():
    loader = qa_loader(examples(12), 2, seed=1, num_epochs=2)
    uninterrupted = ids(loader)
    it = iter(loader)
    seen = [next(it) for _ in range(3)]
    state = it.get_state()
    fresh = iter(qa_loader(examples(12), 2, seed=1, num_epochs=2))
    fresh.set_state(state)
    assert ids(seen) + ids(fresh) == uninterrupted


def test_bad_arguments():
    with pytest.raises(ValueError, match="batch_size"):
        qa_loader(examples(2), 0)
    with pytest.raises(ValueError, match="no examples"):
        qa_loader([], 2)
