"""Memory-R1 PPO on Qwen2.5-14B-Instruct: the answer agent (the memory manager with
`--config.job=memory_r1.train_manager`).

    python -m memjax.launch --config=configs/ppo_qwen14b.py --workdir=/ckpt/mr1_ppo_qwen14b \
        --config.model.source=/models/Qwen2.5-14B-Instruct

The paper trained on 8 x H100-80GB (App. D). That does not fit memjax's trainer: f32 master
weights and AdamW moments for the actor and again for the critic need 75.1 GiB per device at best
there (72 usable), so this config is sized for 16 x H100-80GB, the fewest H100s it fits;
8 x H200 fits too (`--config.hardware.accelerator=H200 --config.hardware.num_devices=8`
with a mesh over 8). Same effective batch: 128 questions per step, 2 rows per device per
micro-batch.
Settings: memjax/recipes/memory_r1.py. Memory and time: --dry_run, or tools/plan_memory.py.
"""

from memjax.recipes.memory_r1 import paper_config


def get_config():
    return paper_config(
        "ppo",
        "qwen2.5-14b-instruct",
        num_devices=16,
        mesh={"data": 1, "fsdp": 8, "tensor": 2},
        micro_batch_per_device=2,
        decode_batch=64,
        paper_num_devices=8,
    )
