"""Memory-SFT on Qwen2.5-7B-Instruct: the manager, fact extractor and answer agent cloned from
teacher trajectories (Memory-R1's Memory-SFT row; the paper's teacher is GPT-5), before RL.

    python -m memjax.launch --config=configs/sft_data_cpu.py --workdir=/ckpt/sft_data \
        --config.teacher.kind=model --config.teacher.source=/models/Qwen2.5-72B-Instruct
    python -m memjax.launch --config=configs/sft_qwen7b.py --workdir=/ckpt/mr1_sft_qwen7b \
        --config.model.source=/models/Qwen2.5-7B-Instruct \
        --config.data.train=/ckpt/sft_data/trajectories.jsonl
    python -m memjax.launch --config=configs/grpo_qwen7b.py --workdir=/ckpt/mr1_grpo_qwen7b \
        --config.model.source=/ckpt/mr1_sft_qwen7b              # RL from the SFT policy

The paper gives no SFT hyperparameters: these are memjax's (AdamW 1e-5 after 5 warmup steps,
128 rows per update as the RL batch, the RL rows' 4,096 + 2,048 tokens, 3 epochs' worth of
steps for a few thousand trajectories), on the GRPO recipe's 4 x H100-80GB mesh.
"""

from ml_collections import ConfigDict

from memjax.recipes.sft import sft_section


def get_config() -> ConfigDict:
    c = ConfigDict()
    c.job = "sft.train"
    c.model = ConfigDict(
        {
            "source": "/models/Qwen2.5-7B-Instruct",
            "param_dtype": "float32",  # f32 master weights, bf16 matmuls
            "compute_dtype": "bfloat16",
            "remat": "full",
        }
    )
    c.data = ConfigDict(
        {
            "train": "",
            "eval": "",
            "eval_fraction": 0.05,
            "roles": "facts,manager,answer",
            "max_per_role": 0,
        }
    )
    c.sft = sft_section(learning_rate=1e-5, batch_rows=128, max_seq_len=4096 + 2048)
    c.sft.num_steps = 150
    c.sft.micro_batches = 16  # 2 rows per device per micro-step on 4 devices
    c.sft.eval_batch_rows = 8
    c.sft.mesh = ConfigDict({"data": 1, "fsdp": 2, "tensor": 2})
    c.task_eval = ConfigDict({"kind": "none", "config": "", "max_examples": 50})
    c.export = True
    return c
