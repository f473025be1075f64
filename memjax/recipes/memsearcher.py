"""MemSearcher's training and evaluation settings, stated once: one schema for both jobs, on
CPU or at scale.

    config = memsearcher_config("/models/Qwen2.5-7B-Instruct")        # any size
    config = paper_config("qwen2.5-7b-instruct", num_devices=8,        # + the scale sections
                          mesh={"data": 1, "fsdp": 8, "tensor": 1})

The numbers are those of the paper's code (`train.sh`, `ppo_trainer.yaml`, `eval.sh`): 3B and 7B
trained on 8 x H100-80GB, 14B on 2 x 8. Sections `optimizer` and `loss` carry the field names of `memjax.training.optimizer.OptimizerConfig` and
`memjax.rl.losses.PolicyLossConfig`, so the trainer builds them with
`OptimizerConfig(**config.optimizer)`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ml_collections import ConfigDict

from memjax.agents.memsearcher.episode import EVAL_MAX_TURNS, TRAIN_MAX_TURNS
from memjax.agents.search_tool import SearchSettings
from memjax.recipes.scale import add_scale_sections
from memjax.recipes.sections import lora_section, optimizer_section, policy_loss_section
from memjax.remote import openai_source

PAPER_ACCELERATOR = "H100-80GB"
HF_NAMES = {
    "qwen2.5-3b-instruct": "Qwen2.5-3B-Instruct",
    "qwen2.5-7b-instruct": "Qwen2.5-7B-Instruct",
    "qwen2.5-14b-instruct": "Qwen2.5-14B-Instruct",
}

# FlashRAG_datasets splits MemSearcher evaluates on: test for four, dev for the multi-hop three.
EVAL_SPLITS = {
    "nq": "test",
    "triviaqa": "test",
    "popqa": "test",
    "hotpotqa": "dev",
    "2wikimultihopqa": "dev",
    "musique": "dev",
    "bamboogle": "test",
}


def memsearcher_config(model_source: str, data_root: str = "/data/FlashRAG_datasets") -> ConfigDict:
    config = ConfigDict()
    config.job = "memsearcher.train"  # "memsearcher.eval" for evaluation
    config.seed = 0
    config.model = ConfigDict({"source": model_source, "param_dtype": "bfloat16"})
    # 8 GPUs per node: weights sharded over fsdp, everything else over data.
    config.mesh = ConfigDict({"data": 1, "fsdp": -1, "tensor": 1})

    config.data = _data_section(data_root)
    config.retriever = _retriever_section()

    config.agent = ConfigDict()
    config.agent.name = "memsearcher"
    config.agent.memory_cap_tokens = 1024
    config.agent.max_turns_train = TRAIN_MAX_TURNS
    config.agent.max_turns_eval = EVAL_MAX_TURNS

    config.rollout = ConfigDict()
    config.rollout.group_size = 5  # G rollouts per question
    config.rollout.temperature = 1.0
    config.rollout.top_p = 0.99
    config.rollout.top_k = 10000
    config.rollout.max_tokens_per_call = 512
    config.rollout.max_prompt_length = 695
    config.rollout.max_response_length = 6024  # per context
    config.rollout.decode_batch = 0  # rows decoded at once over the mesh; 0: a step's all
    # True: training rollouts on the continuous-batching engine (one device), engine_slots
    # rows at once (0: decode_batch, else 8); docs/training.md.
    config.rollout.engine = False
    config.rollout.engine_slots = 0

    # Prompt template files with {{placeholders}} (memjax.text.prompt_templates); "" keeps
    # memjax's own wording. Point one at the authors' exact text to reproduce their setup.
    config.prompts = ConfigDict(
        {
            "memsearcher_system": "",  # no placeholders
            "memsearcher_user": "",  # {{question}}, {{memory}}
            "memsearcher_tool_response": "",  # {{call}}, {{result}} (one per tool call)
            "search_r1_instruction": "",  # {{question}}
        }
    )

    config.eval_sampling = ConfigDict()
    config.eval_sampling.temperature = 0.0  # greedy
    config.eval_sampling.max_tokens_per_call = 512

    # The Search-R1 baseline runs with Search-R1's own settings, not MemSearcher's
    # (PeterGriffinJin/Search-R1 @ a14dc3a, scripts/nq_hotpotqa/v0.2/train_ppo.sh and
    # search_r1/llm_agent/generation.py): 3 passages per search (`retriever.topk=3`), at most
    # 4 search rounds and then one final call (`max_turns=4`), and each observation cut to its
    # first 500 tokens (`max_obs_length=500`).
    config.search_r1 = ConfigDict({"top_k": 3, "max_turns": 4, "max_observation_tokens": 500})

    # memsearcher.eval: MemSearcher against the growing-context baselines and plain RAG.
    config.openai = openai_source.default_config()
    config.eval = ConfigDict()
    config.eval.agents = "memsearcher,search_r1,react,rag"
    config.eval.batch_size = 64  # questions whose episodes run in lock-step
    config.eval.agent_batch_sizes = ""  # "memsearcher=128,react=32": per agent, else batch_size
    # Episodes as clients of the continuous-batching engine (memjax.engine): each model call a
    # request, each search run beside decoding. Greedy scores equal the lock-step batches'
    # (engine=False). engine_slots: requests decoded at once (0: the agent's batch size); each
    # slot holds max_context_tokens of KV cache on one device (Qwen2.5-7B at 32,768 positions:
    # 1.9 GB a slot), so the paper configs' default is 16 slots, not their batch of 64.
    config.eval.engine = True
    config.eval.engine_slots = 16
    # "" samples config.model in process; openai:MODEL@URL sends every call to that endpoint
    # (reached as config.openai says; tokens are still counted with config.model's tokenizer).
    config.eval.policy_source = ""
    config.eval.max_context_tokens = 32768  # Qwen2.5's window; a longer context fails its call

    config.optimizer = optimizer_section(learning_rate=1e-6)
    config.lora = lora_section()
    config.loss = policy_loss_section(kl_coef=0.001, entropy_coef=0.001)

    config.train = ConfigDict()
    config.train.algorithm = "multi_context_grpo"
    config.train.batch_size = 256  # questions per step
    config.train.mini_batch_size = 128
    # How a step's context rows become updates (memjax.rl.minibatches). MemSearcher's trainer
    # cuts all context rows, in rollout order, into mini-batches of mini_batch_size x G rows
    # (verl's ppo_mini_batch_size x rollout.n), so a step makes about 2 x (mean contexts per
    # trajectory) updates; "shuffled" is memjax's fixed batch_size / mini_batch_size updates
    # over shuffled rows. The shards are train.sh's 8 GPUs, each cutting its own slice.
    config.train.mini_batch_mode = "in_order"
    config.train.mini_batch_shards = 8
    config.train.ppo_epochs = 1
    config.train.total_epochs = 1
    config.train.num_steps = 0  # 0: total_epochs over the training sets
    # Per mini-batch; more saves activation memory. A config with scale sections
    # (train.micro_batch_per_device) derives it from that instead, so the memory plan and the
    # run use the same micro-batch.
    config.train.micro_batches = 1
    config.train.vocab_chunk = 4096  # log-probs computed over the vocabulary in chunks
    # > 0 (e.g. 256): the rows of a micro-batch run the opening they share (a group's first
    # context, the instructions and question of the later ones) once (memjax.rl.shared_prefix).
    config.train.shared_prefix = 0
    config.train.advantage_eps = 1e-6  # A = (R - mean_G) / (std_G + eps), unbiased std
    config.train.save_every_steps = 20
    return config


def _data_section(data_root: str) -> ConfigDict:
    """The question files: NQ + HotpotQA to train on, the seven benchmarks to evaluate."""
    data = ConfigDict()
    # Any QA layout, read from each file (memjax.data.qa_formats); or name one to insist on it.
    data.format = "auto"
    # NQ + HotpotQA train, as Search-R1; `?` appended to questions that lack it.
    data.train = ConfigDict(
        {name: f"{data_root}/{name}/train.jsonl" for name in ("nq", "hotpotqa")}
    )
    data.eval = ConfigDict(
        {name: f"{data_root}/{name}/{split}.jsonl" for name, split in EVAL_SPLITS.items()}
    )
    # "name=path,..." replaces data.train / data.eval from the command line (any names).
    data.train_files = ""
    data.eval_files = ""
    data.add_question_mark = True
    # A file named in both train and eval is cut by question id only when asked: this fraction
    # evaluates (0: never cut; naming one file for both is then an error).
    data.shared_file_eval_fraction = 0.0
    data.split_seed = 0
    data.shuffle = True
    data.worker_count = 0
    return data


def _retriever_section() -> ConfigDict:
    """The search tool: an HTTP retriever or an index in process, and its passages."""
    retriever = ConfigDict()
    retriever.kind = "http"  # or "in_process" over retriever.index_dir
    retriever.url = "http://127.0.0.1:8000"
    retriever.index_dir = ""
    # E5-base-v2, flat index over wiki-18 (2018 Wikipedia), as the paper's serving config;
    # the same fields as configs/index_build.py.
    retriever.encoder = ConfigDict({"source": "/models/e5-base-v2", "layout": "e5"})
    retriever.corpus = "/data/wiki-18.jsonl"
    retriever.index_kind = "exact"
    search = SearchSettings()
    retriever.default_top_n = search.default_top_n
    retriever.max_top_n = search.max_top_n
    retriever.passage_separator = search.passage_separator
    return retriever


def paper_config(
    preset: str,
    *,
    num_devices: int,
    mesh: Mapping[str, int],
    accelerator: str = PAPER_ACCELERATOR,
    micro_batch_per_device: int = 1,
    decode_batch: int = 240,
    remat: str = "full",
) -> ConfigDict:
    """`memsearcher_config` at the paper's scale: the model's shape (`model.preset`), its
    weights under /models/<the Hugging Face name>, the hardware, mesh and rules sections. The
    micro-batch per device and the decode wave are not in the paper (verl sizes them with
    vLLM): memjax's choices for contexts of 695 + 6024 tokens. verl's data-parallel ranks, each
    cutting its own slice of a step's contexts into mini-batches, are the paper's GPUs."""
    config = memsearcher_config(f"/models/{HF_NAMES.get(preset.lower(), preset)}")
    add_scale_sections(
        config, preset=preset, accelerator=accelerator, num_devices=num_devices, remat=remat
    )
    config.mesh = ConfigDict({axis: int(mesh.get(axis, 1)) for axis in ("data", "fsdp", "tensor")})
    config.train.mini_batch_shards = int(num_devices)
    # Rows per data x fsdp shard per micro-batch; the job derives train.micro_batches from it.
    config.train.micro_batch_per_device = int(micro_batch_per_device)
    # Rows the sampler decodes at once over the whole mesh (the memory plan's KV cache).
    config.rollout.decode_batch = int(decode_batch)
    return config


__all__ = ["EVAL_SPLITS", "memsearcher_config", "paper_config"]
