"""Embed a jsonl corpus ({"id", "contents"} per line) and save a ScaNN index of it.

    python -m memjax.launch --config=configs/index_build.py \
        --config.corpus=/data/wiki-18.jsonl --config.output=/data/wiki_index \
        --config.encoder.source=/models/e5-base-v2 --config.encoder.layout=e5
"""

from ml_collections import ConfigDict


def get_config() -> ConfigDict:
    config = ConfigDict()
    config.job = "index.build"
    config.corpus = "/tmp/memjax_corpus.jsonl"
    config.output = "/tmp/memjax_index"  # empty: WORKDIR/index
    config.kind = "scann"  # or "exact"
    config.encoder = ConfigDict({"source": "packaged:minilm", "layout": "", "batch_size": 64})
    # 0: derive from the corpus size (about sqrt(N) leaves; 5% of them, at least 10, searched).
    config.scann = ConfigDict({"num_leaves": 0, "leaves_to_search": 0, "reorder": 200})
    return config
