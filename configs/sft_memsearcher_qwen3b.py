"""MemSearcher-SFT on Qwen2.5-3B-Instruct: the search agent cloned from teacher trajectories
(MemSearcher's SFT baseline distils Qwen2.5-72B), one row per rebuilt context, before
multi-context GRPO.

    python -m memjax.launch --config=configs/sft_memsearcher_qwen3b.py --workdir=/ckpt/ms_sft3b \
        --config.model.source=/models/Qwen2.5-3B-Instruct \
        --config.data.train=/ckpt/sft_data/trajectories.jsonl
    python -m memjax.launch --config=configs/memsearcher_qwen3b.py --workdir=/ckpt/ms3b \
        --config.model.source=/ckpt/ms_sft3b                  # RL from the SFT policy

The paper gives no SFT hyperparameters: memjax's are AdamW 1e-5, 256 rows per update (the RL
batch of questions), contexts of at most 695 + 6,024 tokens as in RL, on the RL recipe's
8 x H100-80GB mesh (fsdp 8).
"""

from ml_collections import ConfigDict

from memjax.recipes.sft import sft_section


def get_config() -> ConfigDict:
    c = ConfigDict()
    c.job = "sft.train"
    c.model = ConfigDict(
        {
            "source": "/models/Qwen2.5-3B-Instruct",
            "param_dtype": "float32",
            "compute_dtype": "bfloat16",
            "remat": "full",
        }
    )
    c.data = ConfigDict(
        {"train": "", "eval": "", "eval_fraction": 0.05, "roles": "memsearcher", "max_per_role": 0}
    )
    c.sft = sft_section(learning_rate=1e-5, batch_rows=256, max_seq_len=695 + 6024)
    c.sft.num_steps = 100
    c.sft.micro_batches = 32  # 1 row per device per micro-step on 8 devices
    c.sft.eval_batch_rows = 8
    c.sft.mesh = ConfigDict({"data": 1, "fsdp": 8, "tensor": 1})
    c.task_eval = ConfigDict(
        {"kind": "search_agent", "config": "configs/memsearcher_qwen3b.py", "max_examples": 100}
    )
    c.export = True
    return c
