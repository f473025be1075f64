"""Memory-R1 PPO on Llama-3.1-8B-Instruct: 4 x H100-80GB, the paper's hardware (App. D).

    python -m memjax.launch --config=configs/ppo_llama8b.py --workdir=/ckpt/mr1_ppo_llama8b \
        --config.model.source=/models/Llama-3.1-8B-Instruct

Settings: memjax/recipes/memory_r1.py. Memory per device: python tools/plan_memory.py configs/ppo_llama8b.py.
"""

from memjax.recipes.memory_r1 import paper_config


def get_config():
    return paper_config(
        "ppo",
        "llama-3.1-8b-instruct",
        accelerator="H100-80GB",
        num_devices=4,
        mesh={"data": 1, "fsdp": 1, "tensor": 4},
        micro_batch_per_device=2,
        decode_batch=64,
    )
