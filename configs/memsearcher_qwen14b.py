"""MemSearcher on Qwen2.5-14B-Instruct with the paper's settings (one epoch of NQ + HotpotQA).

    python -m memjax.launch --config=configs/memsearcher_qwen14b.py --workdir=/ckpt/ms14b \
        --config.model.source=/models/Qwen2.5-14B-Instruct \
        --config.retriever.url=http://127.0.0.1:8000

Sized for 2 x 8 H100-80GB (two hosts), the paper's hardware for 14B; memory per device:
python tools/plan_memory.py configs/memsearcher_qwen14b.py
"""

from ml_collections import ConfigDict

from memjax.agents.memsearcher.recipe import paper_config
from memjax.recipes.scale import add_scale_sections


def get_config() -> ConfigDict:
    config = paper_config(model_source="/models/Qwen2.5-14B-Instruct")
    config.train.mini_batch_shards = 16  # the paper's 2 x 8 GPUs, each cutting its own slice
    # The micro-batch per device and the decode wave are not in the paper (verl sizes them with
    # vLLM): memjax's choices for contexts of 695 + 6024 tokens.
    return add_scale_sections(
        config,
        preset="qwen2.5-14b-instruct",
        accelerator="H100-80GB",
        num_devices=16,
        mesh={"data": 1, "fsdp": 8, "tensor": 2},
        micro_batch_per_device=1,
        decode_batch=256,
    )
