"""The stages of each paper's reproduction: base -> SFT -> GRPO, each evaluated on held-out data.

    stages = memsearcher_stages(config.memsearcher, config.model_source, seeds=(0, 1))
    stages = memory_r1_stages(config.memory_r1, config.model_source, seeds=(0,))

Each stage is an existing job with an existing config file (configs/*.py) and the overrides
that chain it to the stages before it, so every number in the tables is one a user gets by
running that job alone. Training draws from the training splits only (synthetic seed 1000 for
the teachers and seed 0 for RL, HotpotQA's 400 training questions); every eval stage scores
the held-out split (synthetic seed 1's test conversations, HotpotQA's 100 eval questions).

MemSearcher: teachers -> SFT; the base model with MemSearcher and the three baselines
(Search-R1-style, ReAct, RAG), the SFT model, and multi-context GRPO from SFT (one run per seed)
each evaluated.

Memory-R1, the paper's alternating schedule: teachers -> one SFT model for the fact extractor,
manager and answer agent; per seed and algorithm, the manager trained with the frozen SFT answer
agent rewarding it (over snapshot banks a teacher built: on synthetic data by default the
ground-truth oracle, standing in for the paper's GPT-4o-mini), then the answer agent trained
over the trained manager's banks (their facts always the SFT extractor's); evaluated are the
base model, Memory-SFT, the trained manager with the SFT answer agent (the manager's own
effect), both trained agents, and (optionally) both trained agents without distillation. The
stages that need the banks one pair of models builds share them (<root>/banks/<builders>), as
every manager stage shares the teacher's snapshots (<root>/snapshots). With
`memory_r1.locomo_test` (LoCoMo test conversation ids), Memory-SFT and the first seed's RL
models are evaluated on those conversations too, every question, banks built by the models.
"""

from __future__ import annotations

from memjax.experiments.reproduce.stages import Stage

SFT_CONFIG = "configs/sft_cpu.py"
DATA_CONFIG = "configs/sft_data_cpu.py"
MEMSEARCHER_CONFIG = "configs/memsearcher_cpu.py"
MEMORY_R1_CONFIG = "configs/memory_r1_synthetic_cpu.py"
CORPUS = "corpus"  # a pseudo-stage: the workdir where the HotpotQA corpus and index live
# Pseudo-stages for Memory-R1's model-built artefacts, shared by the stages that would build
# the same ones: banks (one folder per pair of models that build them) and the manager's
# training snapshots. Both caches are keyed by what built them (bank_store, snapshots), so a
# stage whose builders differ rebuilds rather than reads another's.
BANKS = "banks"
SNAPSHOTS = "snapshots"


def _sft_overrides(section, data_stage: str, roles: str, model_source: str) -> tuple[str, ...]:
    steps = int(section.sft_steps)
    return (
        f"model.source={model_source}",
        f"data.train={{{data_stage}}}/trajectories.jsonl",
        f"data.roles={roles}",
        f"data.max_per_role={int(section.sft_max_per_role)}",
        f"sft.num_steps={steps}",
        f"sft.batch_rows={int(section.sft_batch_rows)}",
        f"sft.micro_batches={int(section.sft_micro_batches)}",
        f"sft.max_seq_len={int(section.sft_max_seq_len)}",
        f"sft.optimizer.learning_rate={float(section.sft_learning_rate)}",
        f"sft.shared_prefix={int(section.sft_shared_prefix)}",
        "sft.optimizer.warmup_steps=2",
        f"sft.eval_every={steps}",
        f"sft.checkpoint_every={max(1, steps // 4)}",
        *_oversample(section),
    )


def _oversample(section) -> tuple[str, ...]:
    pattern = str(section.get("sft_oversample", "") or "")
    if not pattern:
        return ()
    times = int(section.get("sft_oversample_times", 1))
    return (f"data.oversample={pattern}", f"data.oversample_times={times}")


# --- MemSearcher -------------------------------------------------------------------------


def _search_data() -> tuple[str, ...]:
    """The retriever's corpus and index, built once and shared by every MemSearcher stage."""
    return (
        f"retriever.corpus={{{CORPUS}}}/corpus.jsonl",
        f"retriever.index_dir={{{CORPUS}}}/index",
    )


def _search_job_data(section) -> tuple[str, ...]:
    path = str(section.hotpotqa)
    return (f"data.train.hotpotqa={path}", f"data.eval.hotpotqa={path}", *_search_data())


def _search_eval(name: str, label: str, source: str, agents: str, section) -> Stage:
    overrides = (
        "job=memsearcher.eval",
        f"model.source={source}",
        f"eval.agents={agents}",
        f"data.max_examples={int(section.eval_questions)}",
        f"agent.max_turns_eval={int(section.eval_max_turns)}",
        *_search_job_data(section),
    )
    return Stage(name, MEMSEARCHER_CONFIG, overrides, report="memsearcher_eval", label=label)


def memsearcher_stages(section, model_source: str, seeds: tuple[int, ...]) -> list[Stage]:
    data = Stage(
        "ms_data",
        DATA_CONFIG,
        (
            "roles=memsearcher",
            f"hotpotqa.path={section.hotpotqa}",
            f"hotpotqa.max_examples={int(section.teacher_questions)}",
            *_search_data(),
        ),
    )
    sft_overrides = _sft_overrides(section, "ms_data", "memsearcher", model_source)
    sft = Stage("ms_sft", SFT_CONFIG, (*sft_overrides, "sft.bucket=256"), report="sft")
    stages = [data, sft]
    base_agents = ",".join(["memsearcher", *_names(section.baselines)])
    stages.append(_search_eval("ms_eval_base", "base", model_source, base_agents, section))
    # ReAct by the SFT model beside MemSearcher: the context-per-turn contrast with a model
    # that searches (the base model's episodes end at turn 1).
    stages.append(_search_eval("ms_eval_sft", "SFT", "{ms_sft}", "memsearcher,react", section))
    for seed in seeds:
        grpo = f"ms_grpo_s{seed}"
        train = (
            "job=memsearcher.train",
            "model.source={ms_sft}",
            f"seed={seed}",
            f"train.num_steps={int(section.grpo_steps)}",
            f"train.batch_size={int(section.grpo_questions_per_step)}",
            f"train.save_every_steps={max(1, int(section.grpo_steps) // 2)}",
            f"optimizer.learning_rate={float(section.grpo_learning_rate)}",
            f"train.shared_prefix={int(section.grpo_shared_prefix)}",
            f"data.max_examples={int(section.grpo_train_questions)}",
            *_search_job_data(section),
        )
        label = f"GRPO (seed {seed})"
        stages.append(Stage(grpo, MEMSEARCHER_CONFIG, train, report="rl_curve", label=label))
        policy = f"{{{grpo}}}/policy"
        stages.append(_search_eval(f"ms_eval_{grpo[3:]}", label, policy, "memsearcher", section))
    return stages


# --- Memory-R1 ---------------------------------------------------------------------------


def _mr1_held_out(section) -> tuple[str, ...]:
    return (
        f"data.synthetic.num_test={int(section.test_conversations)}",
        f"data.max_questions={int(section.max_questions)}",
    )


def _banks(builders: str) -> tuple[str, str]:
    """Where the banks that `builders` (a name for the fact extractor and manager) keep live.
    Bank building is most of a Memory-R1 evaluation on a CPU, and the evaluations of one trained
    manager (with the SFT answer agent, with the trained one, without distillation) answer over
    the same banks: the first builds them, the others load them. Extracted facts are kept in
    one place for all: the trained managers keep the SFT extractor, whose facts Memory-SFT's
    evaluation extracted (the cache is keyed by the extractor, so the base model's are its
    own)."""
    return f"banks_dir={{{BANKS}}}/{builders}", f"construction.facts_dir={{{BANKS}}}/facts"


def _mr1_eval(name: str, label: str, section, *agents: str) -> Stage:
    overrides = ("job=memory_r1.eval", *agents, *_mr1_held_out(section))
    return Stage(name, MEMORY_R1_CONFIG, overrides, report="memory_r1_eval", label=label)


def _mr1_rl(section, algo: str, seed: int, role: str) -> tuple[str, ...]:
    """One Memory-R1 RL stage's overrides; `role` "manager" or "answer" (which has its own
    steps, temperature and source of old log-probs)."""
    answer = role == "answer"
    steps = int(section.answer_rl_steps if answer else section.rl_steps)
    temperature = float(section.answer_rl_temperature if answer else section.rl_temperature)
    old_logprobs = (f"rl.old_logprobs={section.answer_old_logprobs}",) if answer else ()
    return (
        "model.source={mr1_sft}",
        f"rl.algo={algo}",
        f"rl.seed={seed}",
        f"rl.num_steps={steps}",
        f"rl.prompts_per_step={int(section.rl_prompts_per_step)}",
        f"rl.group_size={int(section.rl_group_size) if algo == 'grpo' else 1}",
        f"rl.seq_len={int(section.rl_seq_len)}",
        f"rl.micro_batches={int(section.rl_micro_batches)}",
        f"rl.shared_prefix={int(section.rl_shared_prefix)}",
        f"rl.sampling.max_new_tokens={int(section.rl_max_new_tokens)}",
        f"rl.sampling.temperature={temperature}",
        *old_logprobs,
        f"rl.optimizer.learning_rate={float(section.rl_learning_rate)}",
        f"rl.eval_every={steps}",
        "rl.eval_before=True",  # the validation point before RL, beside the one after
        f"rl.checkpoint_every={max(1, steps // 2)}",
        f"data.synthetic.num_train={int(section.rl_train_conversations)}",
        f"data.max_questions={int(section.max_questions)}",
    )


def memory_r1_stages(section, model_source: str, seeds: tuple[int, ...]) -> list[Stage]:
    data = Stage(
        "mr1_data",
        DATA_CONFIG,
        (
            "roles=facts,manager,answer",
            f"synthetic.num_conversations={int(section.teacher_conversations)}",
            f"answer_data={section.answer_data}",
            f"locomo.path={section.locomo}",
        ),
    )
    sft_overrides = _sft_overrides(section, "mr1_data", "facts,manager,answer", model_source)
    stages = [data, Stage("mr1_sft", SFT_CONFIG, sft_overrides, report="sft")]
    base = (f"model.source={model_source}", *_banks("base"))
    stages.append(_mr1_eval("mr1_eval_base", "base", section, *base))
    sft = ("model.source={mr1_sft}", *_banks("sft"))
    stages.append(_mr1_eval("mr1_eval_sft", "Memory-SFT", section, *sft))
    # The floor: the SFT answer agent over empty banks. Synthetic questions are partly
    # guessable ("Should Rosa avoid cheese pizza?" yes); a manager's worth is its distance
    # above this.
    stages.append(
        _mr1_eval(
            "mr1_eval_no_memory",
            "no memory (Memory-SFT answer agent, empty banks)",
            section,
            "model.source={mr1_sft}",
            "construction.builder=empty",
        )
    )
    for algo in _names(section.algos):
        for seed in seeds:
            stages += _mr1_rl_stages(section, algo, seed, ablation=seed == seeds[0])
    if _names(section.locomo_test):
        stages += _mr1_locomo_stages(section, seeds[0])
    return stages


def _mr1_locomo_stages(section, seed: int) -> list[Stage]:
    """Memory-SFT and the seed's RL models on whole LoCoMo test conversations (every
    question, the adversarial ones for the official protocol), banks built by the models with
    the held-out evaluations' generation settings; the RL manager's banks built once for both
    of its rows, the SFT extractor's facts extracted once for all."""
    data = (
        "job=memory_r1.eval",
        f"data.path={section.locomo}",
        f"data.conversations={','.join(_names(section.locomo_test))}",
        "data.include_adversarial=True",
        "data.max_questions=0",
    )

    def stage(name: str, label: str, *agents: str) -> Stage:
        return Stage(name, MEMORY_R1_CONFIG, (*data, *agents), "memory_r1_locomo", label)

    sft_model = "model.source={mr1_sft}"
    stages = [stage("mr1_locomo_sft", "Memory-SFT", sft_model, *_banks("sft"))]
    for algo in _names(section.algos):
        tag, name = f"{algo}_s{seed}", f"Memory-R1-{algo.upper()} (seed {seed})"
        manager = _trained_manager(tag)
        stages += [
            stage(f"mr1_locomo_{tag}_manager", f"{name}: manager", sft_model, *manager),
            stage(
                f"mr1_locomo_{tag}",
                name,
                sft_model,
                *manager,
                f"answer.trained={{mr1_{tag}_answer}}/policy",
            ),
        ]
    return stages


def _mr1_rl_stages(section, algo: str, seed: int, *, ablation: bool) -> list[Stage]:
    """The alternating schedule for one algorithm and seed, and its evaluations."""
    tag, name = f"{algo}_s{seed}", f"Memory-R1-{algo.upper()} (seed {seed})"
    manager, answer = f"mr1_{tag}_manager", f"mr1_{tag}_answer"
    sft_model = "model.source={mr1_sft}"
    # RL trains the manager's operations only; the facts it manages stay the SFT extractor's,
    # so every evaluation below differs from Memory-SFT's in the trained agents alone.
    trained_manager = _trained_manager(tag)
    trained_answer = f"answer.trained={{{answer}}}/policy"
    teacher = str(section.snapshot_teacher)
    snapshots = (f"teacher.source={teacher}", f"teacher.name={teacher}") if teacher else ()
    # Every seed's and algorithm's manager trains on the same teacher's snapshots: built once.
    snapshots += (f"snapshots.cache_dir={{{SNAPSHOTS}}}",)
    manager_job = (
        "job=memory_r1.train_manager",
        *snapshots,
        *_mr1_rl(section, algo, seed, "manager"),
    )
    stages = [
        Stage(manager, MEMORY_R1_CONFIG, manager_job, "rl_curve"),
        Stage(
            answer,
            MEMORY_R1_CONFIG,
            (
                "job=memory_r1.train_answer",
                *trained_manager,
                *_mr1_rl(section, algo, seed, "answer"),
            ),
            "rl_curve",
        ),
        _mr1_eval(
            f"mr1_eval_{tag}_manager",
            f"{name}: manager, SFT answer agent",
            section,
            sft_model,
            *trained_manager,
        ),
        _mr1_eval(f"mr1_eval_{tag}", name, section, sft_model, *trained_manager, trained_answer),
    ]
    if ablation and bool(section.no_distill_ablation):
        stages.append(
            _mr1_eval(
                f"mr1_eval_{tag}_no_distill",
                f"{name} w/o distillation",
                section,
                sft_model,
                *trained_manager,
                trained_answer,
                "answer_agent.distill=False",
            )
        )
    return stages


def _trained_manager(tag: str) -> tuple[str, ...]:
    """The overrides that build banks with the `tag` run's trained manager over the SFT
    extractor's facts, in that manager's banks folder."""
    return (
        f"manager.trained={{mr1_{tag}_manager}}/policy",
        "facts.source={mr1_sft}",
        *_banks(f"{tag}_manager"),
    )


def _names(value) -> list[str]:
    return [v.strip() for v in str(value).split(",") if v.strip()]


__all__ = ["memsearcher_stages", "memory_r1_stages"]
