"""Memory-R1's settings, stated once: one schema for every Memory-R1 job, on CPU or at scale.

    config = memory_r1_config("/models/Qwen2.5-7B-Instruct", algo="grpo")     # any size
    config = paper_config("grpo", "qwen2.5-7b-instruct", num_devices=4,      # + the scale
                          mesh={"data": 1, "fsdp": 4, "tensor": 1})          # sections

Paper facts (the paper's App. D): actor lr 1e-6, critic lr 1e-5, both
constant with no warmup (verl's `warmup_style: constant`, `lr_warmup_steps_ratio: 0`), total
batch 128, micro-batch 2 per GPU on 4 x H100-80GB (8 for Qwen2.5-14B), prompt 4096 and response
2048 tokens, temperature 1.0 in training and greedy decoding at test, EM reward, 60 retrieved
memories (30 per speaker), snapshots by a teacher (GPT-4o-mini in the paper) over the preceding
24 turns (App. B.2's text; its Alg. 1 says 50). Not in the paper, and memjax's choice: GRPO
group size 8 (verl's `rollout.n` defaults to 1), KL coefficient 0.001 with the k3 estimator for
GRPO (PPO's objective has no KL term, so no reference model), clip 0.2 with dual clip 3.0,
token-mean aggregation, one epoch, one update per step, weight decay 0.01, gradient clip 1.0,
GAE gamma = lambda = 1, value clip 0.5, top-10 related memories for the manager, one preceding
turn of context for fact extraction, and the number of training steps (`TRAINING_STEPS`).

`model` is the base policy; `manager`, `answer`, `teacher` and `judge` each use it unless their
own `source` is set, and `trained` points an agent at weights a training job exported. `facts`,
the fact extractor, uses the manager's model unless its own `source` or `trained` is set. The
trainer's settings are `rl` (memjax.rl.run_config.RLRunConfig reads it as `config.rl`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ml_collections import ConfigDict

from memjax.recipes.scale import add_scale_sections, micro_batches_for
from memjax.recipes.sections import lora_section, optimizer_section, policy_loss_section
from memjax.remote import openai_source

PAPER_BATCH = 128  # questions per step (App. D "total batch 128")
PAPER_MICRO_BATCH = 2  # rows per GPU per micro-step
PAPER_ACCELERATOR = "H100-80GB"  # 4 of them (8 for Qwen2.5-14B)
# The paper states no number of steps. verl, which it ran, trains `trainer.total_epochs: 30`
# (ppo_trainer.yaml) over a dataloader that drops the last incomplete batch: conv-26's 152
# training questions at 128 per step are one step per epoch, so 30 steps.
VERL_TOTAL_EPOCHS = 30
TRAINING_STEPS = VERL_TOTAL_EPOCHS * (152 // PAPER_BATCH)


def _agent(source: str = "", trained: str = "") -> ConfigDict:
    return ConfigDict({"source": source, "param_dtype": "", "trained": trained})


def rl_config(algo: str, group_size: int, prompts_per_step: int, seq_len: int) -> ConfigDict:
    """The trainer's section (memjax.rl.trainer.train reads these names)."""
    if algo not in ("grpo", "ppo"):
        raise ValueError(f"algo={algo!r}; choose grpo or ppo")
    rl = ConfigDict()
    rl.algo = algo
    rl.seed = 0
    rl.num_steps = TRAINING_STEPS
    rl.prompts_per_step = prompts_per_step
    rl.group_size = group_size
    rl.epochs = 1
    rl.mini_batches = 1
    rl.micro_batches = 1
    rl.decode_batch = 0  # rows the sampler decodes at once over the mesh; 0: a step's all
    # True: rollouts on the continuous-batching engine (one device), engine_slots rows at once
    # (0: decode_batch, else 8); docs/training.md.
    rl.rollout_engine = False
    rl.engine_slots = 0
    rl.shared_prefix = 0  # e.g. 256: a group's rows run their prompt once (memjax.rl.shared_prefix)
    rl.seq_len = seq_len
    rl.vocab_chunk = 4096
    rl.old_logprobs = "trainer"
    rl.sampling = ConfigDict(
        {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "max_new_tokens": 2048, "greedy": False}
    )
    rl.loss = policy_loss_section(kl_coef=0.001 if algo == "grpo" else 0.0, entropy_coef=0.0)
    rl.advantage = ConfigDict(
        {"scaling": "group", "ddof": 1, "epsilon": 1e-6, "gamma": 1.0, "lam": 1.0, "whiten": True}
    )
    # Constant rates with no warmup for actor and critic, as the paper and verl (critic_warmup
    # 0: the actor also updates from the first step).
    rl.optimizer = optimizer_section(learning_rate=1e-6)
    rl.critic_optimizer = optimizer_section(learning_rate=1e-5)
    rl.lora = lora_section()  # rank 0: every weight trains, as the paper
    rl.value_clip = 0.5
    rl.eval_every = 10
    rl.eval_before = False  # True: also the starting weights, as step 0
    rl.checkpoint_every = 10
    rl.keep_last = 2
    rl.keep_best = 1
    rl.export_from = "last"  # "best": export the step that scored best on validation
    rl.plot_every = 5
    rl.mesh = None
    rl.stop_after = None
    return rl


def memory_r1_config(
    model_source: str, algo: str = "grpo", locomo_path: str = "/data/locomo10.json"
) -> ConfigDict:
    config = ConfigDict()
    config.job = "memory_r1.train_manager"
    config.seed = 0
    config.model = ConfigDict({"source": model_source, "param_dtype": "bfloat16", "remat": "full"})
    config.manager = _agent()
    # The fact extractor: the manager's model unless its own source or trained weights are set.
    config.facts = _agent()
    config.answer = _agent()
    config.teacher = _agent()
    config.teacher.name = "base"  # names the snapshot cache; GPT-4o-mini in the paper
    config.judge = _agent()
    config.judge.max_new_tokens = 128
    config.embedder = ConfigDict({"source": "packaged:minilm", "layout": ""})
    # How `openai:MODEL@URL` sources (any role above) are reached: key variable, retries, cache.
    config.openai = openai_source.default_config()

    config.data = ConfigDict()
    config.data.path = locomo_path  # or "synthetic"
    # Synthetic data: training conversations and held-out ones (validation, then test) come
    # from different seeds, so no held-out conversation repeats a training one.
    config.data.synthetic = ConfigDict(
        {
            "num_train": 4,
            "num_validation": 1,
            "num_test": 3,
            "sessions_per_conversation": 4,
            "train_seed": 0,
            "held_out_seed": 1,
        }
    )
    config.data.split = "test"  # build_banks / eval: train | validation | test | all
    config.data.conversations = ""  # comma-separated ids; overrides the split
    config.data.include_adversarial = False  # category 5 (the official protocol scores it)
    config.data.max_questions = 0  # 0: all

    config.construction = ConfigDict()
    config.construction.related_k = 10
    config.construction.fact_context_turns = 1
    config.construction.fact_max_new_tokens = 256
    config.construction.manager_max_new_tokens = 1024
    config.construction.batch_size = 32
    config.construction.max_prompt_tokens = 4096
    # Local models' calls (fact extractor, manager, answer agent) as requests to a
    # continuous-batching engine of this many slots (memjax.engine), each slot holding
    # max_prompt_tokens + the call's max_new_tokens of KV cache; 0: lock-step batches of the
    # role's batch_size. Greedy answers are the same either way.
    config.construction.engine_slots = 0
    # Who builds the banks: "policy" (the fact extractor and manager models); on synthetic
    # data "oracle" (the ground truth's facts and operations: the answer agent alone);
    # "raw_turns", "observations" (LoCoMo's annotations) or "empty" (bank_builders).
    config.construction.builder = "policy"
    # Extracted facts are kept here, keyed by the extractor ("": <banks_dir>/.facts); banks
    # built by different managers over one extractor share them (fact_cache).
    config.construction.facts_dir = ""
    # A model-built construction is saved every this many batched manager calls and resumed
    # from there when stopped (0: never; build_checkpoints).
    config.construction.checkpoint_every = 10

    config.answer_agent = ConfigDict()
    config.answer_agent.k_per_speaker = 30  # 60 memories in all
    config.answer_agent.distill = True
    config.answer_agent.style = "paper"
    config.answer_agent.metric = "em"  # the reward: em (the paper's), f1 or f1_short (rewards.py)
    config.answer_agent.answer_prefix = ""  # the assistant turn's first words (CPU demo only)
    config.answer_agent.max_new_tokens = 2048
    config.answer_agent.batch_size = 32

    config.snapshots = ConfigDict()
    config.snapshots.window = 24  # App. B.2's text; Alg. 1 says 50
    config.snapshots.cache_dir = ""  # default: <workdir>/snapshots

    config.banks_dir = ""  # built banks to reuse (default: <workdir>/banks)

    # Prompt template files with {{placeholders}} (memjax.text.prompt_templates); "" keeps
    # memjax's own wording. Point one at the authors' exact text to reproduce their setup.
    config.prompts = ConfigDict(
        {
            name: ""
            for name in (
                "fact_system",  # {{date}}
                "fact_user",  # {{dialogue}}
                "manager",  # {{current_memory}}, {{facts}}
                "manager_memory",  # {{memories}}
                "manager_empty_memory",  # no placeholders
                "answer",  # {{speaker_a}} {{memories_a}} {{speaker_b}} {{memories_b}} {{question}}
                "answer_no_distill",  # the same
                "answer_short",  # the same
                "judge",  # {{question}}, {{gold_answer}}, {{generated_answer}}
            )
        }
    )

    group = 8 if algo == "grpo" else 1
    config.rl = rl_config(algo, group, PAPER_BATCH, seq_len=4096 + 2048)
    return config


def paper_config(
    algorithm: str,
    preset: str,
    *,
    num_devices: int,
    mesh: Mapping[str, int],
    accelerator: str = PAPER_ACCELERATOR,
    micro_batch_per_device: int = PAPER_MICRO_BATCH,
    decode_batch: int = 128,
    remat: str = "full",
    paper_num_devices: int = 0,
) -> ConfigDict:
    """`memory_r1_config` at the paper's scale: the model's shape (`model.preset`), its
    weights under /models/<the Hugging Face name>, and the hardware, mesh and rules sections of
    `memjax.recipes.scale`. `rl.micro_batches` is what `micro_batch_per_device` rows on each
    data x fsdp shard make of the step's rows. Trains the answer agent;
    `--config.job=memory_r1.train_manager` trains the memory manager with the same settings
    (the paper trains the two separately, same hyperparameters). `paper_num_devices`: the
    paper's device count where this config needs more."""
    if algorithm not in ("grpo", "ppo"):
        raise ValueError(f"algorithm={algorithm!r}; choose grpo or ppo")
    config = memory_r1_config(f"/models/{_hf_dir(preset)}", algorithm, "/data/locomo10.json")
    config.job = "memory_r1.train_answer"
    config.data.split = "train"
    add_scale_sections(
        config,
        preset=preset,
        accelerator=accelerator,
        num_devices=num_devices,
        remat=remat,
        paper_num_devices=paper_num_devices,
    )
    rl = config.rl
    rl.mesh = ConfigDict({axis: int(mesh.get(axis, 1)) for axis in ("data", "fsdp", "tensor")})
    rows = rl.prompts_per_step * rl.group_size // rl.mini_batches
    rl.micro_batches = micro_batches_for(rows, micro_batch_per_device, dict(rl.mesh), num_devices)
    rl.checkpoint_every = 20
    # Rows the sampler decodes at once over the whole mesh (the memory plan's KV cache).
    rl.decode_batch = int(decode_batch)
    return config


def _hf_dir(preset: str) -> str:
    """The Hugging Face directory name of a preset (where users usually keep the weights)."""
    names = {
        "qwen2.5-3b-instruct": "Qwen2.5-3B-Instruct",
        "qwen2.5-7b-instruct": "Qwen2.5-7B-Instruct",
        "qwen2.5-14b-instruct": "Qwen2.5-14B-Instruct",
        "llama-3.1-8b-instruct": "Llama-3.1-8B-Instruct",
    }
    return names.get(preset.lower(), preset)


__all__ = [
    "PAPER_BATCH",
    "TRAINING_STEPS",
    "memory_r1_config",
    "paper_config",
    "rl_config",
]
