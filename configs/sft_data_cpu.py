"""SFT trajectories on one CPU: the scripted teachers over the training splits, every
trajectory replayed through memjax's environments and kept only at full reward.

    python -m memjax.launch --config=configs/sft_data_cpu.py --workdir=/tmp/sft_data

Roles: the Memory-R1 fact extractor and manager (synthetic conversations of seed 1000), its
answer agent (the same synthetic conversations and LoCoMo's conv-26), and MemSearcher and the
Search-R1 baseline (the first 80% of the HotpotQA dev sample, over its pooled paragraphs).
A model teacher instead of the oracles:
    --config.teacher.kind=model --config.teacher.source=/models/Qwen2.5-7B-Instruct
The agent settings are those of configs/memsearcher_cpu.py and the Memory-R1 recipe (top-10
related memories, 30 per speaker for the answer agent, the paper's answer prompt), so the
rows are the prompts the agents see when they train and run.
"""

from ml_collections import ConfigDict

from memjax.agents.memsearcher.episode import TRAIN_MAX_TURNS
from memjax.recipes.memsearcher import memsearcher_config
from memjax.remote import openai_source

LOCOMO = "../shared/data/locomo10.json"
HOTPOT_SAMPLE = "../shared/data/hotpotqa_dev_distractor_500.jsonl"


def get_config() -> ConfigDict:
    config = ConfigDict()
    config.job = "sft.make_data"
    config.roles = "facts,manager,answer,memsearcher,search_r1"
    config.split = "train"  # or "heldout" (never for training data)
    config.output_dir = ""  # default: the workdir
    config.tokenizer = "packaged:smollm2"  # the student's: memory caps and token counts

    config.teacher = ConfigDict()
    config.teacher.kind = "oracle"  # or "model"
    config.teacher.source = ""
    config.teacher.param_dtype = "float32"
    config.teacher.temperature = 0.7
    config.teacher.top_p = 1.0
    config.teacher.max_new_tokens = 256
    # A teacher at an OpenAI-compatible endpoint: --config.teacher.source=openai:MODEL@URL
    config.teacher.openai = openai_source.default_config()
    config.teacher.batch_size = 8
    config.teacher.max_prompt_tokens = 8192
    config.teacher.attempts = 1  # samples per item: an item is kept at its first full reward
    config.teacher.seed = 0

    config.embedder = ConfigDict({"source": "packaged:minilm", "layout": ""})
    config.synthetic = ConfigDict(
        {"seed": 1000, "num_conversations": 16, "sessions_per_conversation": 4}
    )
    config.locomo = ConfigDict({"path": LOCOMO})
    config.answer_data = "synthetic,locomo"
    config.memory = ConfigDict(
        {
            "related_k": 10,
            "fact_context_turns": 1,
            "k_per_speaker": 30,
            "answer_style": "paper",
            "distill": True,
            "metric": "em",
            "locomo_date_only": False,
        }
    )

    config.hotpotqa = ConfigDict({"path": HOTPOT_SAMPLE, "max_examples": 0})
    # The retriever of configs/memsearcher_cpu.py: the sample's pooled paragraphs, embedded by
    # MiniLM, searched in-process, 3 passages per search (corpus and index shared with it).
    search = memsearcher_config(model_source="packaged:smollm2")
    config.retriever = search.retriever
    config.retriever.kind = "in_process"
    config.retriever.encoder = ConfigDict({"source": "packaged:minilm", "layout": ""})
    config.retriever.corpus = "/tmp/memjax_hotpot_sample_corpus.jsonl"
    config.retriever.index_dir = "/tmp/memjax_hotpot_sample_index"
    config.retriever.default_top_n = 3
    config.retriever.max_top_n = 3
    config.agent = ConfigDict(
        {
            # The paper's training limit (5); the CPU RL config trains with 3, evaluates with 5.
            "max_turns": TRAIN_MAX_TURNS,
            "memory_cap_tokens": search.agent.memory_cap_tokens,
            # What one call may write in configs/memsearcher_cpu.py's evaluation: a teacher's
            # completion longer than that is one the student could never write (rejected).
            "max_call_tokens": 256,
        }
    )
    return config
