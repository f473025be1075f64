"""Memory-R1 on held-out synthetic conversations, on CPU: one model builds the banks (fact
extractor + manager), answers and judges; the cold start's check of the memory roles.

    python -m memjax.launch --config=configs/memory_r1_synthetic_cpu.py --workdir=/tmp/mr1_syn \
        --config.model.source=<sft workdir>      # or packaged:smollm2 for the base model

The scored conversations are the test part of the held-out seed (seed 1, after its one
validation conversation); the SFT teachers draw from seed 1000 (configs/sft_data_cpu.py), so no
scored conversation, turn or question was trained on. The reports' counters give the
manager's well-formed turns (`construction.manager_turns_well_formed` of `manager_turns`), its
operations by kind, and the answers that wrote the `**Answer:**` marker unprompted
(`answers.has_marker` of `answers.total`: no forced prefix here).
"""

from ml_collections import ConfigDict

from memjax.recipes.memory_r1 import memory_r1_config


def get_config() -> ConfigDict:
    config = memory_r1_config("packaged:smollm2", algo="grpo", locomo_path="synthetic")
    config.job = "memory_r1.eval"
    config.model.param_dtype = "float32"
    # Matmul outputs are kept for the backward pass, the rest recomputed: the answer agent's
    # GRPO step at the reproduction's shapes (16 rows of 2,048 tokens in 4 micro-batches) needs
    # ~8 GiB of temporaries so, against 17-24 GiB with nothing recomputed (the kernel killed it);
    # only elementwise work is done twice. "full" (~4 GiB) recomputes every matmul too.
    # tests/agents/memory_r1/test_cpu_step_memory.py compiles that step and checks.
    config.model.remat = "dots"
    config.teacher.name = "smollm2"
    config.data.split = "test"
    config.data.synthetic = ConfigDict(
        {
            "num_train": 0,
            "num_validation": 1,
            "num_test": 2,
            # As the SFT data's conversations (configs/sft_data_cpu.py), from another seed.
            "sessions_per_conversation": 4,
            "train_seed": 0,
            "held_out_seed": 1,
        }
    )
    config.data.max_questions = 24  # per conversation
    # Budgets cut to CPU size: a 135M model that loops stops at the budget. The oracle's longest
    # manager output in the SFT data fits well inside 256 tokens.
    config.construction.fact_max_new_tokens = 96
    config.construction.manager_max_new_tokens = 256
    config.construction.batch_size = 16
    config.construction.max_prompt_tokens = 4096
    config.answer_agent.max_new_tokens = 64
    config.answer_agent.batch_size = 16
    config.judge.max_new_tokens = 48
    config.rl.mesh = None
    return config
