"""MemSearcher on one CPU: the packaged SmolLM2-135M-Instruct over the HotpotQA dev sample,
retrieving from the sample's own paragraphs (a closed corpus) with the packaged MiniLM.

    python -m memjax.launch --config=configs/memsearcher_cpu.py --workdir=/tmp/ms_cpu

The data path points at the shared sample (`../shared/data`); users pass their own copy with
--config.data.train.hotpotqa=PATH. Batch, group and lengths are cut to CPU size; the RL
coefficients stay the paper's.
"""

from ml_collections import ConfigDict

from memjax.agents.memsearcher.recipe import paper_config

HOTPOT_SAMPLE = "../shared/data/hotpotqa_dev_distractor_500.jsonl"


def get_config() -> ConfigDict:
    config = paper_config(model_source="packaged:smollm2")
    config.model.param_dtype = "float32"
    config.mesh = ConfigDict({"data": 1, "fsdp": 1, "tensor": 1})

    config.data.format = "hotpotqa_hf"
    config.data.train = ConfigDict({"hotpotqa": HOTPOT_SAMPLE})
    config.data.eval = ConfigDict({"hotpotqa": HOTPOT_SAMPLE})
    config.data.max_examples = 64

    # The sample's pooled paragraphs, embedded by MiniLM, searched in-process.
    config.retriever.kind = "in_process"
    config.retriever.encoder = ConfigDict({"source": "packaged:minilm", "layout": ""})
    # Written by memjax.data.corpus from the sample (build_corpus(hotpot_paragraphs(...))).
    config.retriever.corpus = "/tmp/memjax_hotpot_sample_corpus.jsonl"
    config.retriever.index_dir = "/tmp/memjax_hotpot_sample_index"
    config.retriever.default_top_n = 3
    config.retriever.max_top_n = 3

    # The paper's memory cap (1024) stays; 5 evaluation turns keep a CPU run short.
    config.agent.max_turns_eval = 5

    config.rollout.group_size = 4
    config.rollout.max_tokens_per_call = 128
    config.rollout.max_prompt_length = 1024
    config.rollout.max_response_length = 1024
    config.eval_sampling.max_tokens_per_call = 128

    config.optimizer.learning_rate = 1e-6
    config.train.batch_size = 4
    config.train.mini_batch_size = 4
    config.train.save_every_steps = 10
    return config
