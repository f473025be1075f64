"""Passage corpora: a jsonl of {"id", "contents"} -> embeddings -> a saved, self-contained index.

    build_corpus_index("wiki.jsonl", embedder, "/data/wiki_index")       # ScaNN by default
    retriever = Retriever.load("/data/wiki_index")                        # encoder from meta
    retriever.search(["who wrote Hamlet?"], k=3)  # [[{"id", "contents", "score"}, ...]]

A saved corpus index is an atomic snapshot (memjax.memory.atomic) holding
    meta.json    encoder source and layout, index kind, dim, document count, corpus path, and
                 the fingerprint of what built it (corpus SHA-256, encoder, index kind)
    docs.jsonl   the corpus rows, so the index answers with documents on its own
    index/       the vector index (memjax.memory.index), keyed by document id
`stale_index(root, corpus, encoder_meta, kind)` says whether a saved index may serve a
corpus and encoder (None) or what differs, for jobs that reuse an index they built earlier.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memjax.errors import DataFileError
from memjax.fingerprint import differences, file_identity
from memjax.memory.atomic import atomic_save, latest_snapshot
from memjax.memory.index import ExactIndex, ScannIndex, ScannParams, read_index
from memjax.text.valid import valid_text

log = logging.getLogger(__name__)


class CorpusError(DataFileError):
    pass


def index_fingerprint(corpus_sha256: str, encoder_meta: dict | None, kind: str) -> dict:
    """What a corpus index is built from: the corpus's content, the encoder, the index kind."""
    encoder = encoder_meta or {}
    return {
        "corpus.sha256": corpus_sha256,
        "encoder.source": encoder.get("source") or "",
        "encoder.layout": encoder.get("layout") or "",
        "index.kind": kind,
    }


def read_index_meta(root: str | Path) -> dict:
    meta_file = latest_snapshot(root) / "meta.json"
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataFileError(f"{meta_file}: unreadable index description ({e})") from None
    if not isinstance(meta, dict):
        raise DataFileError(f"{meta_file}: must hold a JSON object")
    return meta


def stale_index(
    root: str | Path, corpus: str | Path | None, encoder_meta: dict | None, kind: str
) -> list[str] | None:
    """None when the index saved under `root` was built from this corpus (compared by
    content; skipped when `corpus` is None or absent) with this encoder and kind; else what
    differs. [] when nothing is saved there."""
    try:
        meta = read_index_meta(root)
    except FileNotFoundError:
        return []
    saved = meta.get("fingerprint")
    if not isinstance(saved, dict):
        return differences(None, {})
    current = index_fingerprint(saved.get("corpus.sha256", ""), encoder_meta, kind)
    if corpus is not None and Path(corpus).is_file():
        current["corpus.sha256"] = file_identity(corpus, meta.get("corpus_file"))["sha256"]
    return differences(saved, current) or None


def read_corpus(path: str | Path) -> list[dict]:
    """Rows of a jsonl corpus; each needs a unique string-or-int "id" and a string "contents"."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"corpus file {path} does not exist")
    rows, seen = [], set()
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise CorpusError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict) or "id" not in row or "contents" not in row:
                raise CorpusError(f'{path}:{lineno}: a row needs "id" and "contents"')
            if not isinstance(row["contents"], str):
                raise CorpusError(f'{path}:{lineno}: "contents" must be a string')
            row["id"] = str(row["id"])
            if row["id"] in seen:
                raise CorpusError(f"{path}:{lineno}: duplicate id {row['id']!r}")
            seen.add(row["id"])
            rows.append(row)
    if not rows:
        raise CorpusError(f"{path}: the corpus is empty")
    return rows


def embed_corpus(rows: Sequence[dict], embedder, chunk: int = 4096) -> np.ndarray:
    """[N, D] passage vectors, embedded in chunks with a progress bar."""
    from tqdm import tqdm

    out = np.zeros((len(rows), embedder.dim), np.float32)
    with tqdm(total=len(rows), desc="embedding corpus", unit="doc") as bar:
        for start in range(0, len(rows), chunk):
            texts = [r["contents"] for r in rows[start : start + chunk]]
            out[start : start + len(texts)] = embedder.encode(texts, kind="passage")
            bar.update(len(texts))
    return out


def build_corpus_index(
    corpus: str | Path,
    embedder,
    output: str | Path,
    *,
    kind: str = "scann",
    scann: ScannParams = ScannParams(),
    encoder_meta: dict | None = None,
    origin: str = "",
) -> Path:
    """Embeds the corpus, builds the index, and publishes it under `output`; returns the
    snapshot directory. `origin` is recorded in meta.json (what made the index, when a job
    built it as a cache rather than a user with `index.build`)."""
    rows = read_corpus(corpus)
    corpus_file = file_identity(corpus)
    t0 = time.perf_counter()
    vectors = embed_corpus(rows, embedder)
    ids = [r["id"] for r in rows]
    t1 = time.perf_counter()
    if kind == "scann":
        index = ScannIndex.build(ids, vectors, scann)
    elif kind == "exact":
        index = ExactIndex(embedder.dim)
        index.upsert(ids, vectors)
    else:
        raise ValueError(f"index kind {kind!r}; choose 'scann' or 'exact'")
    t2 = time.perf_counter()
    meta = {
        "encoder": encoder_meta or {},
        "kind": kind,
        "dim": embedder.dim,
        "documents": len(rows),
        "corpus": str(Path(corpus).resolve()),
        "corpus_file": corpus_file,
        "fingerprint": index_fingerprint(corpus_file["sha256"], encoder_meta, kind),
        "origin": origin,
        "embed_seconds": round(t1 - t0, 3),
        "build_seconds": round(t2 - t1, 3),
    }

    def write(directory: Path) -> None:
        shutil.copyfile(corpus, directory / "docs.jsonl")
        (directory / "index").mkdir()
        index.save(directory / "index")
        (directory / "meta.json").write_text(json.dumps(meta, indent=2))

    return atomic_save(output, write)


class Retriever:
    """A loaded corpus index: texts in, (document, score) lists out. Thread-safe."""

    def __init__(self, index, docs: dict[str, dict], embedder, meta: dict | None = None):
        self.index, self.docs, self.embedder = index, docs, embedder
        self.meta = meta or {}
        self._lock = threading.Lock()  # one search at a time: ScaNN and XLA use every core
        # Queries that could not be searched (answered with no passages), and queries whose
        # text was repaired by memjax.text.valid_text before embedding.
        self.failed_queries = 0
        self.repaired_queries = 0

    def __len__(self) -> int:
        return len(self.docs)

    @classmethod
    def load(cls, root: str | Path, embedder=None) -> Retriever:
        """From a `build_corpus_index` output; the embedder named in its meta when None."""
        snapshot = latest_snapshot(root)
        meta = json.loads((snapshot / "meta.json").read_text())
        docs = {r["id"]: r for r in read_corpus(snapshot / "docs.jsonl")}
        index = read_index(snapshot / "index")
        if embedder is None:
            from memjax.memory.embedder import Embedder

            enc = meta.get("encoder") or {}
            if "source" not in enc:
                raise ValueError(f"{snapshot}/meta.json names no encoder; pass one explicitly")
            embedder = Embedder.load(enc["source"], layout=enc.get("layout"))
        if embedder.dim != index.dim:
            raise ValueError(
                f"{root}: the index holds {index.dim}-d vectors, the encoder makes {embedder.dim}"
            )
        return cls(index, docs, embedder, meta)

    def search_docs(self, queries: Sequence[str], k: int) -> list[list[tuple[dict, float]]]:
        """Top-k (corpus row, score) per query, best first. A query that cannot be searched
        gets no passages and is counted in `failed_queries`; the rest of the batch is answered."""
        if not len(queries):
            return []
        texts = [valid_text(q) for q in queries]
        with self._lock:
            self.repaired_queries += sum(a is not b for a, b in zip(texts, queries))
            try:
                hits = self.index.search(self.embedder.encode(texts, kind="query"), k)
            except Exception:  # one bad query must not fail the others: search them one by one
                log.warning("a batch of %d queries failed; searching one at a time", len(texts))
                hits = [self._search_one(text, k) for text in texts]
        return [[(self.docs[h.id], h.score) for h in row] for row in hits]

    def _search_one(self, text: str, k: int) -> list:
        try:
            return self.index.search(self.embedder.encode([text], kind="query"), k)[0]
        except Exception:
            self.failed_queries += 1
            log.warning("query %r could not be searched", text[:80], exc_info=True)
            return []

    def search(self, queries: Sequence[str], k: int) -> list[list[dict]]:
        """Top-k passages {"id", "contents", "score"} per query (memjax.agents.retrieval)."""
        return [
            [{"id": d["id"], "contents": d["contents"], "score": s} for d, s in row]
            for row in self.search_docs(queries, k)
        ]


def build_index_job(config, workdir) -> None:
    """The `index.build` job: embed `config.corpus` and save its index to `config.output`."""
    from memjax.memory.embedder import Embedder

    output = config.output or (str(Path(workdir) / "index") if workdir else None)
    if not output:
        raise ValueError("set --config.output or --workdir for the index.build job")
    layout = config.encoder.layout or None
    embedder = Embedder.load(
        config.encoder.source, layout=layout, batch_size=config.encoder.batch_size
    )
    params = ScannParams(
        num_leaves=config.scann.num_leaves or None,
        leaves_to_search=config.scann.leaves_to_search or None,
        reorder=config.scann.reorder,
    )
    snapshot = build_corpus_index(
        config.corpus,
        embedder,
        output,
        kind=config.kind,
        scann=params,
        encoder_meta={"source": config.encoder.source, "layout": layout},
    )
    meta = json.loads((snapshot / "meta.json").read_text())
    print(
        f"indexed {meta['documents']} documents ({meta['kind']}) in {snapshot}: "
        f"embedding {meta['embed_seconds']}s, index build {meta['build_seconds']}s"
    )
