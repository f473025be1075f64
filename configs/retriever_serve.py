"""Serve a corpus index (built by configs/index_build.py) over HTTP on 127.0.0.1.

    python -m memjax.launch --config=configs/retriever_serve.py \
        --config.index_dir=/tmp/memjax_index --config.port=8000
"""

from ml_collections import ConfigDict


def get_config() -> ConfigDict:
    config = ConfigDict()
    config.job = "retriever.serve"
    config.index_dir = "/tmp/memjax_index"
    config.host = "127.0.0.1"  # loopback only; set 0.0.0.0 deliberately to expose it
    config.port = 8000
    config.topk = 3  # Search-R1's default for /retrieve
    config.top_n = 10  # MemSearcher's server default for /search and /batch_search
    config.max_k = 1000
    # Any batch is answered (Search-R1 sends 2,560 queries at once), this many at a time.
    config.query_chunk = 256
    config.max_body_bytes = 1 << 20
    config.deadline = 30.0  # seconds from a request's first byte to its answer
    config.workers = 4  # search threads; more than max_pending waiting requests get 503
    config.max_pending = 64
    # The answer's size: queries x k, and the characters of its passages (413 beyond).
    config.max_results = 20_000
    config.max_answer_chars = 32 << 20
    # Empty source: the encoder recorded in the index's meta.json.
    config.encoder = ConfigDict({"source": "", "layout": "", "batch_size": 64})
    return config
