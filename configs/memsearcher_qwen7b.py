"""MemSearcher on Qwen2.5-7B-Instruct with the paper's settings (one epoch of NQ + HotpotQA).

    python -m memjax.launch --config=configs/memsearcher_qwen7b.py --workdir=/ckpt/ms7b \
        --config.model.source=/models/Qwen2.5-7B-Instruct
"""

from ml_collections import ConfigDict

from memjax.agents.memsearcher.recipe import paper_config


def get_config() -> ConfigDict:
    return paper_config(model_source="/models/Qwen2.5-7B-Instruct")
