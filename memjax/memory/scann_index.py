"""ScaNN (tree partitioning + anisotropic hashing + exact reordering) behind memjax's index API.

Scores are inner products (embeddings are unit vectors, so they are cosines). ScaNN keeps its
own copy of the vectors with string docids; ADD/UPDATE go through `searcher.upsert` and DELETE
through `searcher.delete`, which keep the partitions but not their centroids up to date — the
owner (`AutoIndex`) rebuilds after enough mutations.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memjax.memory.vectors import Hit, check_ids, check_vectors


@dataclasses.dataclass(frozen=True)
class ScannParams:
    """Build and search settings; None means 'derive from the number of points N'."""

    num_leaves: int | None = None  # default: about sqrt(N)
    leaves_to_search: int | None = None  # default: 5% of the leaves, at least 10
    training_sample_size: int = 100_000  # k-means and codebook training points
    dims_per_block: int = 2  # AH: 2 dims per 4-bit code (ScaNN's recommended setting)
    anisotropic_threshold: float = 0.2  # AH's anisotropic quantization threshold (for MIPS)
    reorder: int = 200  # candidates rescored exactly before the top-k is cut
    num_threads: int = 0  # 0: every core

    def leaves_for(self, n: int) -> tuple[int, int]:
        leaves = self.num_leaves or max(2, int(round(math.sqrt(n))))
        leaves = max(1, min(leaves, n))
        # 5% of the leaves, but at least 10: small indexes need a larger share for recall.
        search = self.leaves_to_search or max(math.ceil(0.05 * leaves), 10)
        return leaves, min(search, leaves)


class ScannIndex:
    kind = "scann"

    def __init__(self, searcher, dim: int, params: ScannParams):
        self.searcher = searcher
        self.dim = dim
        self.params = params
        searcher.set_num_threads(params.num_threads or os.cpu_count() or 1)

    @classmethod
    def build(
        cls, ids: Sequence[str], vectors: np.ndarray, params: ScannParams = ScannParams()
    ) -> ScannIndex:
        import scann

        ids = check_ids(ids)
        vectors = check_vectors(vectors, len(ids))
        if len(ids) < 16:
            raise ValueError(f"ScaNN needs at least 16 points to partition, got {len(ids)}")
        leaves, search = params.leaves_for(len(ids))
        searcher = (
            scann.scann_ops_pybind.builder(vectors, 10, "dot_product")
            .tree(
                num_leaves=leaves,
                num_leaves_to_search=search,
                training_sample_size=min(len(ids), params.training_sample_size),
            )
            .score_ah(
                params.dims_per_block,
                anisotropic_quantization_threshold=params.anisotropic_threshold,
            )
            .reorder(params.reorder)
            .build(docids=list(ids))
        )
        return cls(searcher, vectors.shape[1], params)

    def __len__(self) -> int:
        return int(self.searcher.size())

    def __contains__(self, doc_id: str) -> bool:
        return doc_id in self.searcher.docid_to_id

    def upsert(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        ids = check_ids(ids)
        vectors = check_vectors(vectors, len(ids), self.dim)
        if ids:
            self.searcher.upsert(list(ids), vectors)

    def delete(self, ids: Sequence[str]) -> None:
        missing = [i for i in ids if i not in self]
        if missing:
            raise KeyError(f"ids not in the index: {missing[:5]}")
        if ids:
            self.searcher.delete(list(ids))

    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        """Top-k hits per query, best first. queries: [Q, D]."""
        queries = check_vectors(queries, None, self.dim)
        k = int(k)
        if k <= 0 or not len(queries) or not len(self):
            return [[] for _ in range(len(queries))]
        k = min(k, len(self))
        pre = max(self.params.reorder, k)
        if len(queries) > 1:
            ids, scores = self.searcher.search_batched_parallel(
                queries, final_num_neighbors=k, pre_reorder_num_neighbors=pre, batch_size=64
            )
        else:
            ids, scores = self.searcher.search_batched(
                queries, final_num_neighbors=k, pre_reorder_num_neighbors=pre
            )
        scores = np.asarray(scores, np.float32)
        return [
            [Hit(str(d), float(s)) for d, s in zip(row_ids, row_scores) if d is not None]
            for row_ids, row_scores in zip(ids, scores)
        ]

    def save(self, directory: Path) -> None:
        # Relative asset paths: the snapshot directory is renamed after it is written.
        (directory / "scann").mkdir()
        self.searcher.serialize(str(directory / "scann"), relative_path=True)
        meta = {"kind": self.kind, "dim": self.dim, "params": dataclasses.asdict(self.params)}
        (directory / "meta.json").write_text(json.dumps(meta))

    @classmethod
    def load(cls, directory: Path, meta: dict) -> ScannIndex:
        import scann

        searcher = scann.scann_ops_pybind.load_searcher(str(directory / "scann"))
        return cls(searcher, int(meta["dim"]), ScannParams(**meta["params"]))
