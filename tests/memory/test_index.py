"""Exact and ScaNN top-k behind one API: agreement, recall, mutation, persistence, errors."""

import numpy as np
import pytest

from memjax.memory.index import (
    AutoIndex,
    ExactIndex,
    ScannIndex,
    ScannParams,
    load_index,
    save_index,
    top_k,
)


def _unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _clustered(n, dim, clusters, rng, noise=0.5):
    """Unit vectors around `clusters` random centres; noise is the offset's expected norm."""
    centres = _unit(rng.standard_normal((clusters, dim)))
    pick = rng.integers(0, clusters, n)
    return _unit(centres[pick] + noise / np.sqrt(dim) * rng.standard_normal((n, dim)))


def _brute(db_ids, db, queries, k):
    scores = queries @ db.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return [[db_ids[j] for j in row] for row in order], np.take_along_axis(scores, order, 1)


def _recall(got, want):
    return np.mean([len({h.id for h in g} & set(w)) / len(w) for g, w in zip(got, want)])


def test_top_k_hand_case():
    scores = np.array([[0.1, 0.9, 0.5, 0.7], [3.0, -1.0, 2.0, 0.0]], np.float32)
    rows, vals = top_k(scores, 2)
    assert rows.tolist() == [[1, 3], [0, 2]]
    np.testing.assert_allclose(vals, [[0.9, 0.7], [3.0, 2.0]])
    rows, _ = top_k(scores, 10)  # k > N returns all, sorted
    assert rows.tolist() == [[1, 3, 2, 0], [0, 2, 3, 1]]


def test_exact_matches_brute_force_under_mutation():
    rng = np.random.default_rng(0)
    index = ExactIndex(16)
    assert index.search(np.ones((2, 16)), 5) == [[], []]
    vecs = _unit(rng.standard_normal((300, 16)))
    ids = [f"m{i}" for i in range(300)]
    index.upsert(ids, vecs)
    truth = dict(zip(ids, vecs))
    index.delete(ids[::3])  # deletions compact rows; the survivors must keep their vectors
    for i in ids[::3]:
        del truth[i]
    new = _unit(rng.standard_normal((50, 16)))
    index.upsert(ids[1:100:2], new)  # updates of live ids and re-adds of deleted ones
    truth.update(zip(ids[1:100:2], new))
    assert len(index) == len(truth) and "m0" not in index and "m1" in index
    q = _unit(rng.standard_normal((7, 16)))
    want_ids, want_scores = _brute(list(truth), np.stack(list(truth.values())), q, 10)
    got = index.search(q, 10)
    assert [[h.id for h in row] for row in got] == want_ids
    np.testing.assert_allclose([[h.score for h in row] for row in got], want_scores, rtol=1e-5)


def test_scann_agrees_with_exact_and_stays_right_under_mutation():
    rng = np.random.default_rng(1)
    n, dim = 20_000, 32
    db = _clustered(n, dim, 100, rng)
    ids = [f"d{i}" for i in range(n)]
    params = ScannParams(leaves_to_search=20, reorder=100)
    scann = ScannIndex.build(ids, db, params)
    auto = AutoIndex(dim, threshold=10_000, scann=params)
    exact = ExactIndex(dim)
    for index in (auto, exact):
        index.upsert(ids, db)
    assert auto.kind == "scann"
    q = _clustered(200, dim, 100, rng)
    want = [[h.id for h in row] for row in exact.search(q, 10)]
    recall = _recall(scann.search(q, 10), want)
    print(f"ScaNN recall@10 vs exact: {recall:.4f}")
    assert recall >= 0.95
    # Mutations: delete 500, update 500 (to the negated vector), add 500 new points.
    dead, moved = ids[:500], ids[500:1000]
    added = [f"new{i}" for i in range(500)]
    new_vecs = _clustered(500, dim, 100, rng)
    for index in (scann, auto, exact):
        index.delete(dead)
        index.upsert(moved, -db[500:1000])
        index.upsert(added, new_vecs)
        assert len(index) == n
    assert auto.kind == "scann" and len(auto.delta) == 1000  # not yet rebuilt
    want = [[h.id for h in row] for row in exact.search(q, 10)]
    probes = np.concatenate([-db[500:520], new_vecs[:20]])
    for index in (scann, auto):
        got = index.search(q, 10)
        assert not {h.id for row in got for h in row} & set(dead)
    # Each updated and each added point is its own best match, at its new position. ScaNN's
    # upsert hashes new points with the old codebook, so through raw ScaNN that only holds
    # when every leaf is searched and every candidate reordered; AutoIndex's exact delta
    # makes it hold at the normal settings.
    ids_, scores = scann.searcher.search_batched(
        probes, final_num_neighbors=1, leaves_to_search=1000, pre_reorder_num_neighbors=n
    )
    assert [row[0] for row in ids_] == moved[:20] + added[:20] and scores.min() > 0.999
    probe = auto.search(probes, 1)
    assert [row[0].id for row in probe] == moved[:20] + added[:20]
    assert min(row[0].score for row in probe) > 0.999
    recall = _recall(auto.search(q, 10), want)
    print(f"AutoIndex (ScaNN + exact delta) recall@10 after mutations: {recall:.4f}")
    assert recall >= 0.95
    auto.upsert([f"more{i}" for i in range(1500)], _clustered(1500, dim, 100, rng))
    assert len(auto.delta) == 0  # the delta passed 10% of the build: ScaNN was rebuilt


def test_auto_index_switches_by_size_and_survives_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    index = AutoIndex(8, threshold=200, scann=ScannParams(num_leaves=8, leaves_to_search=8))
    vecs = _unit(rng.standard_normal((300, 8)))
    ids = [str(i) for i in range(300)]
    index.upsert(ids[:150], vecs[:150])
    assert index.kind == "exact"
    index.upsert(ids[150:], vecs[150:])
    assert index.kind == "scann"
    # every leaf searched + full reorder: ScaNN must equal exact search
    got = index.search(vecs[:20], 5)
    want = index.exact.search(vecs[:20], 5)
    assert [[h.id for h in r] for r in got] == [[h.id for h in r] for r in want]
    for kind_index in (index, index.exact, index.scann):
        save_index(kind_index, tmp_path / kind_index.kind)
        loaded = load_index(tmp_path / kind_index.kind)
        assert loaded.kind == kind_index.kind and len(loaded) == 300
        assert [[h.id for h in r] for r in loaded.search(vecs[:20], 5)] == [
            [h.id for h in r] for r in want
        ]
    index.delete(ids[:250])
    assert index.kind == "exact" and len(index) == 50


def test_index_errors_are_clear():
    index = ExactIndex(4)
    with pytest.raises(ValueError, match="dimension 3"):
        index.upsert(["a"], np.ones((1, 3)))
    with pytest.raises(ValueError, match="NaN"):
        index.upsert(["a"], np.full((1, 4), np.nan))
    with pytest.raises(ValueError, match="repeat"):
        index.upsert(["a", "a"], np.ones((2, 4)))
    with pytest.raises(ValueError, match="2 ids but 1"):
        index.upsert(["a", "b"], np.ones((1, 4)))
    with pytest.raises(KeyError, match="zz"):
        index.delete(["zz"])
    with pytest.raises(FileNotFoundError, match="no saved snapshot"):
        load_index("/nonexistent/memjax-index")
