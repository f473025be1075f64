"""MemSearcher on one CPU: the packaged SmolLM2-135M-Instruct over the HotpotQA dev sample,
retrieving from the sample's own paragraphs (a closed corpus) with the packaged MiniLM.

    python -m memjax.launch --config=configs/memsearcher_cpu.py --workdir=/tmp/ms_cpu

    python -m memjax.launch --config=configs/memsearcher_cpu.py --workdir=/tmp/ms_cpu_eval \
        --config.job=memsearcher.eval --config.data.max_examples=100

Training and evaluation questions are disjoint parts of the sample (400 / 100, cut by question
id); the retrieval corpus pools the paragraphs of all 500. The data path points at the shared sample (`../shared/data`, relative to the working directory
or else to the repository root); users pass their own copy with --config.data.train.hotpotqa=PATH.
The first run writes the pooled-paragraph corpus and its MiniLM index to /tmp; later runs reuse
them. Batch, turns and lengths are cut to CPU size; G and the RL coefficients stay the paper's.
"""

from ml_collections import ConfigDict

from memjax.recipes.memsearcher import memsearcher_config

HOTPOT_SAMPLE = "../shared/data/hotpotqa_dev_distractor_500.jsonl"


def get_config() -> ConfigDict:
    config = memsearcher_config(model_source="packaged:smollm2")
    config.model.param_dtype = "float32"
    config.model.remat = "full"  # recompute activations in the backward pass: fits in a few GiB
    config.mesh = ConfigDict({"data": 1, "fsdp": 1, "tensor": 1})

    config.data.format = "auto"  # read from the file: HotpotQA in its HF layout
    # One file for both: its 500 questions are cut by id into 400 train and 100 eval
    # questions (data.shared_file_eval_fraction, data.split_seed), never the same question.
    config.data.train = ConfigDict({"hotpotqa": HOTPOT_SAMPLE})
    config.data.eval = ConfigDict({"hotpotqa": HOTPOT_SAMPLE})
    config.data.shared_file_eval_fraction = 0.2
    config.data.max_examples = 64

    # The sample's pooled paragraphs, embedded by MiniLM, searched in-process.
    config.retriever.kind = "in_process"
    config.retriever.encoder = ConfigDict({"source": "packaged:minilm", "layout": ""})
    # Written by memjax.data.corpus from the sample (build_corpus(hotpot_paragraphs(...))).
    config.retriever.corpus = "/tmp/memjax_hotpot_sample_corpus.jsonl"
    config.retriever.index_dir = "/tmp/memjax_hotpot_sample_index"
    config.retriever.default_top_n = 3
    config.retriever.max_top_n = 3

    # The paper's memory cap (1024) stays; 3 training and 5 evaluation turns keep a CPU run
    # short (each call writes at most 128 tokens in training, 256 in evaluation, so memories
    # stay far below the cap).
    config.agent.max_turns_train = 3
    config.agent.max_turns_eval = 5

    config.rollout.group_size = 5  # the paper's G
    config.rollout.max_tokens_per_call = 128
    # Every row is padded to prompt + response = 1536 tokens, which bounds a CPU step. A search
    # context holds the system prompt with the tool schema, the question and memory, an action,
    # a tool response (3 passages) and a memory update (<= 128 tokens); a context that outgrows
    # the row less one call ends its trajectory (reward 0, `context_overflow`). The teachers'
    # search contexts (the SFT'd student writes their like) reach the memory update at 904
    # tokens at the median, 1,088 at p90 and 1,357 at p99 (761 contexts of ms_data): rows of
    # 1024 would cut off 53% of them, rows of 1536 about 1%.
    config.rollout.max_prompt_length = 512
    config.rollout.max_response_length = 1024
    # A memory update restates every supporting sentence found so far: the teachers' updates
    # are 85 tokens at the median, and 17% of them outgrow 128 tokens (0.1% outgrow 256), so an
    # evaluation call may write 256. Training calls stay at 128 to keep a row within 1536.
    config.eval_sampling.max_tokens_per_call = 256
    # Growing-context baselines reach a few thousand tokens; a prefill materialises
    # [batch, heads, tokens, tokens] f32 scores, so 10 questions at a time stay within a few GiB.
    config.eval.batch_size = 10
    # MemSearcher's context stays near a thousand tokens, so 20 of its episodes share a batch
    # (20 held-out questions: 7 min on 2 cores in one batch).
    config.eval.agent_batch_sizes = "memsearcher=20"
    config.eval.max_context_tokens = 8192  # SmolLM2's window
    # On the engine (eval.engine): one slot per question of an agent's batch (MemSearcher 20),
    # each 8,192 positions of SmolLM2's KV cache (377 MB a slot, 7.5 GB for 20).
    config.eval.engine_slots = 0

    config.optimizer.learning_rate = 1e-6
    config.train.batch_size = 1  # questions per step (x G rollouts, x contexts = rows)
    config.train.mini_batch_size = 1  # G = 5 rows per update, ~2-3 updates per step
    config.train.mini_batch_shards = 1
    config.train.micro_batches = 2
    config.train.num_steps = 4
    config.train.save_every_steps = 2
    return config
