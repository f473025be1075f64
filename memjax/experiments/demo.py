"""`memory_r1.demo` (make demo): GRPO on the answer agent, on CPU, in a few minutes.

SmolLM2-135M-Instruct learns to answer questions about synthetic conversations from a few
retrieved memories, writing its answer after **Answer:** (reward: token F1 or EM, config.answer_agent.metric). Banks hold the
raw turns (LoCoMo's RAG memory), MiniLM retrieves k memories per speaker, and the short prompt
keeps rows near 150 tokens so an update fits in seconds. Questions whose answer is not in the
retrieved memories are left out when `demo.require_answer_in_memories` (a 135M model cannot
count dogs or date events; it can learn to find and copy). The job prints a greedy held-out
evaluation before and after training; the trainer writes checkpoints, TensorBoard events and
reward_curve.png to the workdir; demo_summary.json holds the numbers.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import jax
import numpy as np
from ml_collections import ConfigDict

from memjax.agents.memory_r1 import job_setup as S
from memjax.agents.memory_r1.answer_env import AnswerEnvironment, answer_examples
from memjax.agents.memory_r1.models import load_agent_model
from memjax.agents.memory_r1.raw_turns import raw_turn_bank
from memjax.agents.memory_r1.run_settings import MemoryR1Run
from memjax.errors import ConfigError
from memjax.experiments.synthetic import SyntheticConfig, generate_conversations
from memjax.rl.rollout import run_episodes
from memjax.rl.run_config import RLRunConfig
from memjax.training.sections import read_section


@dataclasses.dataclass(frozen=True)
class DemoSettings:
    """config.demo, with the two settings of other sections its examples need."""

    train_conversations: int
    eval_conversations: int
    sessions_per_conversation: int
    require_answer_in_memories: bool  # keep only questions a retrieved memory answers
    max_eval_examples: int
    seed: int  # config.seed: the synthetic conversations'
    k_per_speaker: int  # config.answer_agent.k_per_speaker

    @classmethod
    def from_config(cls, config: ConfigDict) -> DemoSettings:
        return read_section(
            cls,
            config.demo,
            "config.demo",
            seed=int(config.seed),
            k_per_speaker=int(config.answer_agent.k_per_speaker),
        )


def demo_examples(d: DemoSettings, embedder):
    """(train, held-out) answer examples over raw-turn banks of synthetic conversations."""
    conversations = generate_conversations(
        SyntheticConfig(
            num_conversations=d.train_conversations + d.eval_conversations,
            sessions_per_conversation=d.sessions_per_conversation,
            seed=d.seed,
        )
    )
    k = d.k_per_speaker
    per_conv = []
    for conv in conversations:
        bank = raw_turn_bank(conv, embedder, date_only=True)
        examples = answer_examples(conv.sample_id, conv.speakers, bank, list(conv.qa), k)
        if d.require_answer_in_memories:
            examples = [
                e
                for e in examples
                if any(e.gold.lower() in text.lower() for _, text in e.memories_a + e.memories_b)
            ]
        per_conv.append(examples)
    n_train = d.train_conversations
    train = [e for ex in per_conv[:n_train] for e in ex]
    held_out = [e for ex in per_conv[n_train:] for e in ex][: d.max_eval_examples]
    return train, held_out


def greedy_eval(env, examples, params, cfg, tokenizer, max_new_tokens: int) -> dict:
    from memjax.rl.roles import make_generate
    from memjax.sampling.sampling_params import SamplingParams

    generate = make_generate(
        cfg,
        SamplingParams(greedy=True, temperature=1.0, max_new_tokens=max_new_tokens),
        tokenizer.eos_ids,
        tokenizer.pad_id,
    )
    generate.params = params
    trajs = run_episodes(env, examples, 1, generate, jax.random.key(0), tokenizer.eos_ids)
    rewards = np.array([t.reward for t in trajs])
    p = float(rewards.mean())
    return {
        "reward": p,
        # Standard error of the mean over held-out questions: the evaluation's own noise.
        "stderr": float(rewards.std(ddof=1) / math.sqrt(len(rewards))) if len(rewards) > 1 else 0.0,
        "em": float(np.mean([t.info.get("em", 0.0) for t in trajs])),
        "f1": float(np.mean([t.info.get("f1", 0.0) for t in trajs])),
        "n": len(rewards),
    }


def demo_job(config, workdir) -> None:
    if not workdir:
        raise ConfigError("--workdir: memory_r1.demo needs a directory")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    run, demo = MemoryR1Run.from_config(config), DemoSettings.from_config(config)
    rl = RLRunConfig.from_section(config.rl, "config.rl")
    embedder = S.load_embedder(run.embedder)
    train, held_out = demo_examples(demo, embedder)
    model = load_agent_model(run.model("answer"))
    env = AnswerEnvironment(model.tokenizer, S.answer_settings(run))
    lengths = [len(env.prompt_ids(e)) for e in train[:32]]
    print(
        f"{len(train)} training and {len(held_out)} held-out questions; prompts "
        f"~{int(np.mean(lengths))} tokens (max {max(lengths)})",
        flush=True,
    )
    new_tokens = rl.sampling.max_new_tokens
    before = greedy_eval(env, held_out, model.params, model.cfg, model.tokenizer, new_tokens)
    print(f"held-out before training: {json.dumps(before)}", flush=True)

    from memjax.rl.trainer import train as run_training
    from memjax.training.reporting import summary_line

    result = run_training(
        rl,
        workdir,
        env=env,
        params=model.params,
        cfg=model.cfg,
        train_examples=train,
        eval_examples=held_out,
        eos_ids=model.tokenizer.eos_ids,
        pad_id=model.tokenizer.pad_id,
    )
    after = greedy_eval(env, held_out, result["params"], model.cfg, model.tokenizer, new_tokens)
    print(f"held-out after training:  {json.dumps(after)}", flush=True)
    wall = time.perf_counter() - t0
    summary = {
        "before": before,
        "after": after,
        "gain": after["reward"] - before["reward"],
        "gain_over_noise": (after["reward"] - before["reward"])
        / max(math.sqrt(before["stderr"] ** 2 + after["stderr"] ** 2), 1e-9),
        "train_history": [h["reward"] for h in result["history"]],
        "wall_s": wall,
    }
    S.write_json(workdir / "demo_summary.json", summary)
    print(summary_line(result), flush=True)
    print(
        f"held-out reward {before['reward']:.3f} -> {after['reward']:.3f} (+-{after['stderr']:.3f}),"
        f" EM {before['em']:.3f} -> {after['em']:.3f}; wall {wall:.0f}s; checkpoints, tb/ and reward_curve.png "
        f"in {workdir}",
        flush=True,
    )
