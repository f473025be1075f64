"""Memory-R1 PPO on Llama-3.1-8B-Instruct: the answer agent (the memory manager with
`--config.job=memory_r1.train_manager`).

    python -m memjax.launch --config=configs/ppo_llama8b.py --workdir=/ckpt/mr1_ppo_llama8b \
        --config.model.source=/models/Llama-3.1-8B-Instruct

Sized for 4 x H100-80GB, the paper's hardware (App. D), with its effective batch: 128 questions
per step, 2 rows per device per micro-batch. The actor and the critic each keep f32 weights and
AdamW moments, so the mesh is tensor-parallel (the sampler's weights and KV cache split by heads).
Settings: memjax/recipes/memory_r1.py. Memory and time: --dry_run, or tools/plan_memory.py.
"""

from memjax.recipes.memory_r1 import paper_config


def get_config():
    return paper_config(
        "ppo",
        "llama-3.1-8b-instruct",
        num_devices=4,
        mesh={"data": 1, "fsdp": 1, "tensor": 4},
        micro_batch_per_device=2,
        decode_batch=32,
    )
