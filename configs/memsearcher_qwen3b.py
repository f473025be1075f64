"""MemSearcher on Qwen2.5-3B-Instruct with the paper's settings (one epoch of NQ + HotpotQA).

    python -m memjax.launch --config=configs/memsearcher_qwen3b.py --workdir=/ckpt/ms3b \
        --config.model.source=/models/Qwen2.5-3B-Instruct \
        --config.retriever.url=http://127.0.0.1:8000
"""

from ml_collections import ConfigDict

from memjax.agents.memsearcher.recipe import paper_config


def get_config() -> ConfigDict:
    return paper_config(model_source="/models/Qwen2.5-3B-Instruct")
