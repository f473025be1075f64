"""Memory-R1's settings as an ml_collections ConfigDict: one schema for all four jobs.

    config = memory_r1_config("/models/Qwen2.5-7B-Instruct", algo="grpo")
    config.job = "memory_r1.train_manager"

Paper facts (Memory-R1, arXiv v5, Appendix D): actor lr 1e-6, critic lr 1e-5, both
constant with no warmup (verl's `warmup_style: constant`, `lr_warmup_steps_ratio: 0`), total
batch 128, micro-batch 2 per GPU on 4 GPUs, prompt 4096
and response 2048 tokens, temperature 1.0 in training and greedy decoding at test, EM reward,
60 retrieved memories (30 per speaker), snapshots by a teacher (GPT-4o-mini in the paper) over
the preceding 24 turns (App. B.2's text; its Alg. 1 says 50). Not in the paper, and memjax's
choice: GRPO group size 8, KL coefficient 0.001 (k3), clip 0.2, one epoch, top-10 related
memories for the manager, one preceding turn of context for fact extraction, and the number of
training steps (`TRAINING_STEPS`, below).

`model` is the base policy; `manager`, `answer`, `teacher` and `judge` each use it unless their
own `source` is set, and `trained` points an agent at weights a training job exported. `facts`,
the fact extractor, uses the manager's model unless its own `source` or `trained` is set.
"""

from __future__ import annotations

from ml_collections import ConfigDict

from memjax.remote import openai_source

PAPER_BATCH = 128  # questions per step (App. D "total batch 128")
PAPER_GPUS = 4  # 4xH100 (8 for the 14B model)
PAPER_MICRO_BATCH = 2  # rows per GPU per micro-step
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
    rl.shared_prompt = 0  # e.g. 256: a group's rows run their prompt once (memjax.rl.shared_prompt)
    rl.seq_len = seq_len
    rl.vocab_chunk = 4096
    rl.old_logprobs = "trainer"
    rl.sampling = ConfigDict(
        {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "max_new_tokens": 2048, "greedy": False}
    )
    rl.loss = ConfigDict(
        {
            "eps_low": 0.2,
            "eps_high": 0.2,
            "dual_clip": 3.0,
            "kl_coef": 0.001 if algo == "grpo" else 0.0,
            "kl_kind": "k3",
            "entropy_coef": 0.0,
            "agg_mode": "token-mean",
        }
    )
    rl.advantage = ConfigDict(
        {"scaling": "group", "ddof": 1, "epsilon": 1e-6, "gamma": 1.0, "lam": 1.0, "whiten": True}
    )
    # Constant rates with no warmup for actor and critic, as the paper and verl (critic_warmup
    # 0: the actor also updates from the first step).
    rl.optimizer = ConfigDict(
        {"learning_rate": 1e-6, "warmup_steps": 0, "schedule": "constant", "weight_decay": 0.01}
    )
    rl.critic_optimizer = ConfigDict(
        {"learning_rate": 1e-5, "warmup_steps": 0, "schedule": "constant", "weight_decay": 0.01}
    )
    rl.value_clip = 0.2
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
    rows = PAPER_BATCH * group
    config.rl.micro_batches = max(1, rows // (PAPER_MICRO_BATCH * PAPER_GPUS))
    config.rl.mesh = ConfigDict({"data": 1, "fsdp": -1, "tensor": 1})
    config.rl.sampling.max_new_tokens = 2048
    return config


def from_paper_recipe(config: ConfigDict) -> ConfigDict:
    """The jobs' schema from a `memjax.recipes.memory_r1.paper_config` file (configs/
    grpo_qwen7b.py, ppo_llama8b.py, ...): the paper's numbers there, the rest memjax's
    defaults here. A config that already has this schema (a `construction` section) passes
    through unchanged."""
    if "construction" in config:
        return config
    # Here, not at the top: `memjax.sampling` imports JAX, which a config file need not.
    from memjax.sampling.sampling_params import run_options

    train, rollout, agent = config.train, config.rollout, config.agent
    algo = str(train.algorithm)
    out = memory_r1_config(str(config.model.source), algo, str(config.data.locomo))
    out.job = str(config.job)
    out.seed = int(config.seed)
    out.model.param_dtype = str(config.model.get("param_dtype", "bfloat16"))
    out.model.remat = str(config.model.get("remat", "full"))
    out.data.include_adversarial = bool(config.data.include_adversarial)
    out.answer_agent.k_per_speaker = int(agent.memories_per_speaker)
    out.answer_agent.distill = bool(agent.distillation)
    out.answer_agent.metric = str(agent.reward)
    out.answer_agent.max_new_tokens = int(rollout.max_response_length)
    out.construction.related_k = int(agent.manager_top_k)
    out.construction.max_prompt_tokens = int(rollout.max_prompt_length)
    out.snapshots.window = int(agent.snapshot_window)

    rl = out.rl
    rl.group_size = int(rollout.group_size)
    rl.prompts_per_step = int(train.batch_size)
    rl.mini_batches = max(1, int(train.batch_size) // int(train.mini_batch_size))
    rl.epochs = int(train.ppo_epochs)
    rl.seq_len = int(rollout.max_prompt_length) + int(rollout.max_response_length)
    rl.sampling.temperature = float(rollout.temperature)
    rl.sampling.top_p = float(rollout.top_p)
    rl.sampling.top_k = int(rollout.top_k)
    rl.sampling.max_new_tokens = int(rollout.max_response_length)
    # The sampler's run options (prefill_chunk, weight_dtype, ...) where the rollout sets them:
    # the memory planner reads them there too.
    rl.sampling.update(run_options(rollout))
    rl.advantage.epsilon = float(train.advantage_eps)
    rl.checkpoint_every = int(train.save_every_steps)
    rl.num_steps = int(train.num_steps)
    for key in config.optimizer:
        rl.optimizer[key] = config.optimizer[key]
    for key in config.loss:
        rl.loss[key] = config.loss[key]
    if algo == "ppo":
        for key in config.critic_optimizer:
            rl.critic_optimizer[key] = config.critic_optimizer[key]
        rl.advantage.gamma = float(config.gae.gamma)
        rl.advantage.lam = float(config.gae.lam)
        rl.value_clip = float(config.value_clip)
    if "mesh" in config:
        rl.mesh = ConfigDict(dict(config.mesh))
        devices = int(config.hardware.num_devices) if "hardware" in config else 1
        per_device = int(train.get("micro_batch_per_device", PAPER_MICRO_BATCH))
        rows = int(train.batch_size) * rl.group_size // rl.mini_batches
        rl.micro_batches = max(1, rows // (per_device * devices))
    if "vocab_chunk" in train:
        rl.vocab_chunk = int(train.vocab_chunk)
    if "lora" in config:  # rank 0: full fine-tuning
        rl.lora = ConfigDict(config.lora.to_dict())
    return out
