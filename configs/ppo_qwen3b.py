"""Memory-R1 PPO on Qwen2.5-3B-Instruct: 4 x H100-80GB, the paper's hardware (App. D).

    python -m memjax.launch --config=configs/ppo_qwen3b.py --workdir=/ckpt/mr1_ppo_qwen3b \
        --config.model.source=/models/Qwen2.5-3B-Instruct

Settings: memjax/recipes/memory_r1.py. Memory per device: python tools/plan_memory.py configs/ppo_qwen3b.py.
"""

from memjax.recipes.memory_r1 import paper_config


def get_config():
    return paper_config(
        "ppo",
        "qwen2.5-3b-instruct",
        accelerator="H100-80GB",
        num_devices=4,
        mesh={"data": 1, "fsdp": 4, "tensor": 1},
        micro_batch_per_device=2,
        decode_batch=128,
    )
