"""Memory-R1 GRPO on Qwen2.5-3B-Instruct: the answer agent (the memory manager with
`--config.job=memory_r1.train_manager`).

    python -m memjax.launch --config=configs/grpo_qwen3b.py --workdir=/ckpt/mr1_grpo_qwen3b \
        --config.model.source=/models/Qwen2.5-3B-Instruct

Sized for 4 x H100-80GB, the paper's hardware (App. D), with its effective batch: 128 questions
per step, 2 rows per device per micro-batch.
Settings: memjax/recipes/memory_r1.py. Memory and time: --dry_run, or tools/plan_memory.py.
"""

from memjax.recipes.memory_r1 import paper_config


def get_config():
    return paper_config(
        "grpo",
        "qwen2.5-3b-instruct",
        num_devices=4,
        mesh={"data": 1, "fsdp": 4, "tensor": 1},
        micro_batch_per_device=2,
        decode_batch=128,
    )
