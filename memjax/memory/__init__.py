"""The memory subsystem: embedder, memory bank with an operation log, indexes, retrieval server.

embedder.Embedder        texts -> unit vectors with the JAX BERT encoder (MiniLM, E5, BGE)
bank.MemoryBank          ADD / UPDATE / DELETE / NOOP, rejection counts, per-owner search
bank_io                  atomic save_bank / load_bank
ops, oplog               operations, provenance, the log records
index                    ExactIndex, ScannIndex, AutoIndex; save_index / load_index
corpus                   jsonl corpus -> saved index; Retriever (in-process search)
server, client           the retrieval HTTP server (retriever.serve) and its client
"""
