"""The memory subsystem: embedder, memory bank with an operation log, indexes, retrieval server.

embedder.Embedder        texts -> unit vectors with the JAX BERT encoder (MiniLM, E5, BGE)
bank.MemoryBank          ADD / UPDATE / DELETE / NOOP, rejection counts, per-owner search
bank_io                  atomic save_bank / load_bank
ops, oplog               operations, provenance, the log records
index                    ExactIndex, ScannIndex, AutoIndex; save_index / load_index
corpus                   jsonl corpus -> saved index; Retriever (in-process search)
server, client           the retrieval HTTP server (retriever.serve) and its client

The names below load on first use.
"""

from memjax.lazy_exports import lazy_exports

_EXPORTS = {
    "Embedder": "memjax.memory.embedder",
    "TextEncoder": "memjax.memory.embedder",
    "MemoryBank": "memjax.memory.bank",
    "MemoryEntry": "memjax.memory.bank",
    "MemoryHit": "memjax.memory.bank",
    "MemoryOp": "memjax.memory.ops",
    "OpResult": "memjax.memory.ops",
    "Provenance": "memjax.memory.ops",
    "ADD": "memjax.memory.ops",
    "UPDATE": "memjax.memory.ops",
    "DELETE": "memjax.memory.ops",
    "NOOP": "memjax.memory.ops",
    "OpRecord": "memjax.memory.oplog",
    "save_bank": "memjax.memory.bank_io",
    "load_bank": "memjax.memory.bank_io",
    "ExactIndex": "memjax.memory.index",
    "AutoIndex": "memjax.memory.index",
    "save_index": "memjax.memory.index",
    "load_index": "memjax.memory.index",
    "Retriever": "memjax.memory.corpus",
    "build_corpus_index": "memjax.memory.corpus",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
