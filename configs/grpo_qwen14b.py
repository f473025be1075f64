"""Memory-R1 GRPO on Qwen2.5-14B-Instruct: 8 x H100-80GB, the paper's hardware for Qwen2.5-14B (App. D).

    python -m memjax.launch --config=configs/grpo_qwen14b.py --workdir=/ckpt/mr1_grpo_qwen14b \
        --config.model.source=/models/Qwen2.5-14B-Instruct

Settings: memjax/recipes/memory_r1.py. Memory per device: python tools/plan_memory.py configs/grpo_qwen14b.py.
"""

from memjax.recipes.memory_r1 import paper_config


def get_config():
    return paper_config(
        "grpo",
        "qwen2.5-14b-instruct",
        accelerator="H100-80GB",
        num_devices=8,
        mesh={"data": 1, "fsdp": 4, "tensor": 2},
        micro_batch_per_device=2,
        decode_batch=128,
    )
