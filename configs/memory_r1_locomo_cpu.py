"""Memory-R1 evaluation on CPU: SmolLM2-135M-Instruct builds one LoCoMo test conversation's
bank (fact extractor + manager), answers its questions and judges them; both protocols.

    python -m memjax.launch --config=configs/memory_r1_locomo_cpu.py --workdir=/tmp/mr1_locomo

One model plays every role (fact extractor, manager, answer agent, judge), decoding greedily.
conv-49 is the shortest test conversation (509 turns, 156 scored questions, 40 adversarial).
Output budgets are cut to CPU size (a 135M model that loops stops at the budget); the
retrieval sizes (top-10 related, 30 memories per speaker) stay the paper's.

Building banks with the model costs hours on 2 cores (one batched manager call per turn of a
speaker; a stopped build resumes from its last save; README, "LoCoMo with banks the models
build"). The answer agent alone, on whole conversations, over banks no model builds:
    --config.construction.builder=observations   # LoCoMo's annotated facts per session
    --config.construction.builder=raw_turns      # every turn as said (LoCoMo's RAG memory)
    --config.construction.builder=empty          # no memory: the floor of the question alone
"""

from ml_collections import ConfigDict

from memjax.recipes.memory_r1 import memory_r1_config

LOCOMO = "../shared/data/locomo10.json"


def get_config() -> ConfigDict:
    config = memory_r1_config("packaged:smollm2", algo="grpo", locomo_path=LOCOMO)
    config.job = "memory_r1.eval"
    config.model.param_dtype = "float32"
    config.teacher.name = "smollm2"
    config.data.conversations = "conv-49"
    config.data.include_adversarial = True  # scored by the official protocol only
    config.construction.fact_max_new_tokens = 64
    config.construction.manager_max_new_tokens = 128
    config.construction.batch_size = 16
    config.construction.max_prompt_tokens = 2048
    config.answer_agent.max_new_tokens = 96
    config.answer_agent.batch_size = 16
    config.judge.max_new_tokens = 64
    config.rl.mesh = None
    return config
