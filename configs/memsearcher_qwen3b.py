"""MemSearcher on Qwen2.5-3B-Instruct with the paper's settings (one epoch of NQ + HotpotQA).

    python -m memjax.launch --config=configs/memsearcher_qwen3b.py --workdir=/ckpt/ms3b \
        --config.model.source=/models/Qwen2.5-3B-Instruct \
        --config.retriever.url=http://127.0.0.1:8000

Sized for 8 x H100-80GB, the paper's hardware for this size. Settings:
memjax/recipes/memsearcher.py. Memory and time: --dry_run, or tools/plan_memory.py.
"""

from memjax.recipes.memsearcher import paper_config


def get_config():
    return paper_config(
        "qwen2.5-3b-instruct",
        num_devices=8,
        mesh={"data": 1, "fsdp": 8, "tensor": 1},
        micro_batch_per_device=1,
        decode_batch=240,
    )
