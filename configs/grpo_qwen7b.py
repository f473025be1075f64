"""Memory-R1 GRPO on Qwen2.5-7B-Instruct: 4 x H100-80GB, the paper's hardware (App. D).

    python -m memjax.launch --config=configs/grpo_qwen7b.py --workdir=/ckpt/mr1_grpo_qwen7b \
        --config.model.source=/models/Qwen2.5-7B-Instruct

Settings: memjax/recipes/memory_r1.py. Memory per device: python tools/plan_memory.py configs/grpo_qwen7b.py.
"""

from memjax.recipes.memory_r1 import paper_config


def get_config():
    return paper_config(
        "grpo",
        "qwen2.5-7b-instruct",
        accelerator="H100-80GB",
        num_devices=4,
        mesh={"data": 1, "fsdp": 2, "tensor": 2},
        micro_batch_per_device=2,
        decode_batch=128,
    )
