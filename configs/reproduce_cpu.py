"""Both papers' claims at CPU scale: base -> SFT -> GRPO for Memory-R1's roles and MemSearcher,
every stage evaluated on held-out data, the tables in the papers' shapes.

    make reproduce            # = python -m memjax.launch --config=configs/reproduce_cpu.py \
                              #       --workdir=/tmp/memjax_reproduce
    --config.papers=memsearcher                 # one paper
    --config.stages=ms_data,ms_sft              # some stages (the others must have finished)
    --config.memory_r1.algos=grpo,ppo           # PPO beside GRPO for the Memory-R1 roles
    --config.extra="mr1_eval_*:answer_agent.max_new_tokens=128"   # any stage's own fields

Each stage is a memjax job run in <workdir>/<stage> (its log in stage.log); a stopped
reproduction started again skips the stages that finished and resumes the one that stopped.
<workdir>/reproduction.{md,json} hold the tables, the stages' wall times, and plots/ the
SFT loss and GRPO reward curves. Sizes are cut to fit a 2-core CPU; the paper-scale configs
(configs/grpo_qwen*.py, ppo_*.py, memsearcher_qwen*.py) train the papers' models.
"""

from ml_collections import ConfigDict

HOTPOT_SAMPLE = "../shared/data/hotpotqa_dev_distractor_500.jsonl"
LOCOMO = "../shared/data/locomo10.json"


def _sft_fields(section: ConfigDict, *, max_seq_len: int, max_per_role: int) -> None:
    """The SFT stage's fields (memjax.experiments.reproduce.pipelines reads them): 40 steps of 8
    rows in 4 micro-batches at lr 1e-4; a role's fixed instructions (the rows' common prefix of 256
    tokens or more) run once per micro-batch. `sft_oversample` (a regex over the trained text)
    repeats the matching training contexts `sft_oversample_times` times."""
    section.sft_steps = 40
    section.sft_batch_rows = 8
    section.sft_micro_batches = 4
    section.sft_max_seq_len = max_seq_len
    section.sft_max_per_role = max_per_role
    section.sft_learning_rate = 1e-4
    section.sft_shared_prefix = 256
    section.sft_oversample = ""
    section.sft_oversample_times = 1


def get_config() -> ConfigDict:
    c = ConfigDict()
    c.job = "reproduce.run"
    c.papers = "memsearcher,memory_r1"
    c.stages = ""  # "": all; or comma-separated stage names
    c.model_source = "packaged:smollm2"
    c.grpo_seeds = "0,1"  # one GRPO run per seed: the run-to-run spread
    c.judge = "the policy model itself (SmolLM2-135M)"  # named in the Memory-R1 table
    # More overrides for the stages whose names match a glob, "GLOB:field=value;...", e.g.
    # "mr1_eval_*:answer_agent.max_new_tokens=128;ms_*:retriever.default_top_n=5".
    c.extra = ""

    ms = ConfigDict()
    ms.hotpotqa = HOTPOT_SAMPLE  # 400 train / 100 eval questions, cut by id
    ms.teacher_questions = 0  # 0: all 400 training questions
    _sft_fields(ms, max_seq_len=1792, max_per_role=0)
    # The measured MemSearcher cold start (README, SFT E): 120 steps of 4 rows, one row per
    # micro-batch (with two, rows up to 1,792 tokens outgrew 24 GiB), the contexts that stop
    # to answer twice. 40 steps of 8 rows left a student that searched but rarely stopped.
    ms.sft_steps, ms.sft_batch_rows, ms.sft_micro_batches = 120, 4, 4
    ms.sft_oversample, ms.sft_oversample_times = "That is all the question needs", 2
    ms.grpo_steps = 4
    ms.grpo_questions_per_step = 1  # x G = 5 rollouts
    ms.grpo_train_questions = 64
    # The paper's 1e-6 is for 256 questions a step; over 4 steps of one question Adam moves
    # each weight by ~4e-6 and no greedy answer can change. 1e-5, as the Memory-R1 answer
    # agent's stage, whose 12 steps changed 9 of 70 held-out answers. 4 steps keep the stage
    # near 25 min; the run that beat SFT on held-out EM by 2.15 se (docs/results.md) took 24
    # steps at 2e-5, ~2 hours here.
    ms.grpo_learning_rate = 1e-5
    ms.grpo_shared_prefix = 256  # a micro-batch's common opening runs once (rl.shared_prefix)
    ms.eval_questions = 20  # held-out questions per agent
    ms.eval_max_turns = 5
    ms.baselines = "search_r1,react,rag"  # evaluated with the base model beside MemSearcher
    c.memsearcher = ms

    mr1 = ConfigDict()
    mr1.teacher_conversations = 48  # synthetic, seed 1000
    mr1.answer_data = "synthetic,locomo"  # LoCoMo: conv-26, the paper's training conversation
    mr1.locomo = LOCOMO
    # The measured cold start whose manager writes operations (README, SFT B): every manager
    # trajectory of 48 conversations (one per conversation, ~500 rows) beside 120 fact and 120
    # answer ones, the DELETE decisions three times, 80 steps of 4 rows. An even mix (200 per
    # role of 16 conversations, 40 steps of 8 rows) left a manager whose every output listed
    # NONE until the token limit (0 of 74 turns well-formed, no memory written).
    _sft_fields(mr1, max_seq_len=1344, max_per_role=120)
    mr1.sft_steps, mr1.sft_batch_rows, mr1.sft_micro_batches = 80, 4, 2
    mr1.sft_oversample, mr1.sft_oversample_times = '"event": "DELETE"', 3
    mr1.algos = "grpo"  # or "grpo,ppo"
    # Who builds the manager's training snapshots (the paper: GPT-4o-mini): "oracle", the
    # synthetic data's ground truth; "" the policy model; or a model path.
    mr1.snapshot_teacher = "oracle"
    mr1.rl_steps = 4
    mr1.rl_shared_prefix = 256  # a group's prompt runs once per micro-batch (rl.shared_prefix)
    mr1.rl_prompts_per_step = 4
    mr1.rl_group_size = 4
    mr1.rl_seq_len = 2048
    mr1.rl_micro_batches = 4
    mr1.rl_max_new_tokens = 128
    mr1.rl_temperature = 0.7
    mr1.rl_learning_rate = 1e-5
    mr1.rl_train_conversations = 2  # synthetic, seed 0
    # The answer agent's GRPO (README, "GRPO after SFT: the answer agent"): 12 on-policy steps
    # (the sampler's log-probs as the old ones) at temperature 1.0. 4 steps at 0.7 left its
    # greedy answers unchanged on all 70 held-out questions: few groups had a reward spread.
    mr1.answer_rl_steps = 12
    mr1.answer_rl_temperature = 1.0
    mr1.answer_old_logprobs = "sampler"
    # Synthetic, held-out seed 1 (after its validation one): 6 conversations, 70 questions. Two
    # (24 questions) left a standard error of ~9 EM points, too wide to tell a trained manager's
    # banks from the SFT one's; bank building batches conversations, so 6 cost ~2.2x of 2
    # (16 min against 7.4 for Memory-SFT's evaluation on 2 cores).
    mr1.test_conversations = 6
    mr1.max_questions = 24  # per conversation
    mr1.no_distill_ablation = True
    # LoCoMo test conversations ("conv-49,conv-50": the two shortest, 1,077 turns, 314 scored
    # questions and 86 adversarial) evaluated with Memory-SFT and the first seed's RL models,
    # banks built by the models: hours on 2 cores (README). "": none.
    mr1.locomo_test = ""
    c.memory_r1 = mr1
    return c
