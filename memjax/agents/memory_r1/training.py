"""`memory_r1.train_manager` and `memory_r1.train_answer`: the two agents, trained separately.

The paper's alternating schedule (MR1-v5 §3; App. E) is two runs:

    # 1. the manager, rewarded by a frozen answer agent (the base model) over its banks
    python -m memjax.launch --config=configs/grpo_qwen7b.py --workdir=/ckpt/manager \
        --config.job=memory_r1.train_manager
    # 2. the answer agent, over banks that the trained manager builds
    python -m memjax.launch --config=configs/grpo_qwen7b.py --workdir=/ckpt/answer \
        --config.job=memory_r1.train_answer --config.manager.trained=/ckpt/manager/policy

Each run trains with memjax.rl.trainer (GRPO or PPO: config.rl.algo), evaluates on the
validation conversation, checkpoints to <workdir>/checkpoints (resumable), and exports the
final weights as an HF directory, <workdir>/policy, which the next run or `memory_r1.eval`
loads through `trained`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import jax
import jax.numpy as jnp

from memjax.agents.memory_r1 import job_setup as S
from memjax.agents.memory_r1.answer_env import AnswerEnvironment, answer_examples
from memjax.agents.memory_r1.bank_builders import (
    ORACLE,
    conversation_banks,
    oracle_events,
    oracle_policies,
)
from memjax.agents.memory_r1.manager_env import ManagerEnvironment, ManagerSettings
from memjax.agents.memory_r1.models import load_agent_model
from memjax.agents.memory_r1.run_settings import MemoryR1Run
from memjax.agents.memory_r1.snapshots import build_manager_examples
from memjax.errors import ConfigError, DataError
from memjax.rl.run_config import RLRunConfig


def _run_trainer(
    rl: RLRunConfig, workdir: Path, env, model, train_examples, eval_examples, params=None
):
    from memjax.checkpoints.decoder_io import export_hf_decoder
    from memjax.rl.trainer import train
    from memjax.training.reporting import summary_line

    if not train_examples:
        raise DataError("config.data: no training examples in the chosen conversations and split")
    result = train(
        rl,
        workdir,
        env=env,
        params=model.params if params is None else params,
        cfg=model.cfg,
        train_examples=train_examples,
        eval_examples=eval_examples,
        eos_ids=model.tokenizer.eos_ids,
        pad_id=model.tokenizer.pad_id,
    )
    # With its tokenizer the directory is a complete model source (`model.source=` loads it).
    export_hf_decoder(result["params"], model.cfg, workdir / "policy", tokenizer=model.tokenizer)
    print(f"trained weights: {workdir / 'policy'}", flush=True)
    print(summary_line(result), flush=True)  # last: the JSON line tools read
    return result


def answer_training_examples(run: MemoryR1Run, workdir: Path, split: str):
    """Answer-agent examples of a split over banks the (trained) manager builds, or the
    ground truth with `construction.builder=oracle`."""
    conversations = S.select_conversations(S.load_conversations(run.data), run.data, split)
    banks_dir = Path(run.banks_dir or workdir / "banks")
    stored = conversation_banks(run, conversations, banks_dir, S.load_embedder(run.embedder))
    k = run.answer_agent.k_per_speaker
    return [
        e
        for conv in conversations
        for e in answer_examples(
            conv.sample_id,
            conv.speakers,
            stored.banks[conv.sample_id],
            S.questions(conv, run.data),
            k,
        )
    ]


def manager_training_examples(run: MemoryR1Run, workdir: Path, split: str, embedder):
    """One example per (question, evidence turn): the bank a teacher built over the turns
    before it (the snapshot), and the turn's facts. The teacher is a model (`teacher.source`,
    the policy's by default) or, with `teacher.source=oracle` on synthetic data, the data's
    ground truth: each turn's true facts and the operations they call for (a perfect stand-in
    for the paper's GPT-4o-mini, where a small model would build noise)."""
    conversations = S.select_conversations(S.load_conversations(run.data), run.data, split)
    if run.teacher_source == ORACLE:
        groups = [[conv] for conv in conversations]  # an oracle answers for one conversation
        events = oracle_events(run.data, "teacher.source")
    else:
        groups, events = [conversations], None
    examples, stats = [], Counter()
    snapshots = run.snapshots
    for group in groups:
        facts, manager = _snapshot_teacher(run, group, events)
        items = [(conv.sample_id, q) for conv in group for q in S.questions(conv, run.data)]
        built, counts = build_manager_examples(
            group,
            items,
            facts,
            manager,
            embedder,
            snapshots.cache_dir or workdir / "snapshots",
            teacher=snapshots.teacher_name,
            window=snapshots.window,
            settings=S.construction_settings(run),
            progress=True,
            inputs=S.bank_inputs(run, role="teacher"),
        )
        examples += built
        stats.update(counts)
    print(f"manager examples ({split}): {dict(stats)}", flush=True)
    return examples


def _snapshot_teacher(run: MemoryR1Run, conversations, events=None):
    """(fact extractor, manager) ChatPolicies that build the snapshot banks; `events` (the
    oracle's ground truth, from `oracle_events`) when `teacher.source=oracle`."""
    c = run.construction
    if run.teacher_source != ORACLE:
        facts = S.policy_for(run, "teacher", c.fact_max_new_tokens, c.batch_size, "teacher_facts")
        manager = S.policy_for(
            run, "teacher", c.manager_max_new_tokens, c.batch_size, "teacher_manager"
        )
        return facts, manager
    events = oracle_events(run.data, "teacher.source") if events is None else events
    (conv,) = conversations
    return oracle_policies(run, conv, events, windows=True)


def train_answer_job(config, workdir) -> None:
    if not workdir:
        raise ConfigError("--workdir: memory_r1.train_answer needs a directory")
    workdir = Path(workdir)
    run, rl = MemoryR1Run.from_config(config), RLRunConfig.from_section(config.rl, "config.rl")
    train_examples = answer_training_examples(run, workdir, "train")
    eval_examples = answer_training_examples(run, workdir, "validation")
    model = load_agent_model(run.model("answer"))
    env = AnswerEnvironment(model.tokenizer, S.answer_settings(run))
    _run_trainer(rl, workdir, env, model, train_examples, eval_examples)


def train_manager_job(config, workdir) -> None:
    if not workdir:
        raise ConfigError("--workdir: memory_r1.train_manager needs a directory")
    workdir = Path(workdir)
    run, rl = MemoryR1Run.from_config(config), RLRunConfig.from_section(config.rl, "config.rl")
    embedder = S.load_embedder(run.embedder)
    train_examples = manager_training_examples(run, workdir, "train", embedder)
    eval_examples = manager_training_examples(run, workdir, "validation", embedder)
    a = run.answer_agent
    answerer = S.policy_for(run, "answer", a.max_new_tokens, a.batch_size, "frozen_answer")
    model = load_agent_model(run.model("manager"))
    # The trainer donates its parameters' buffers each step; when the frozen answer agent is
    # the same model (loaded once, cached), it must keep weights of its own.
    frozen = load_agent_model(run.model("answer"))
    params = jax.tree.map(jnp.copy, model.params) if frozen is model else model.params
    settings = ManagerSettings(
        related_k=run.construction.related_k,
        answer_k=a.k_per_speaker,
        answer=S.answer_settings(run),
        templates=run.templates,
    )
    env = ManagerEnvironment(model.tokenizer, embedder, answerer, settings)
    _run_trainer(rl, workdir, env, model, train_examples, eval_examples, params=params)
