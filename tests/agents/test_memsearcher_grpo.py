"""Multi-context GRPO smoke test: MemSearcher's real environment, the RL core's real trainer
and train step, on a tiny random decoder over SmolLM2's vocabulary.

The completions are scripted per rollout (a random model never calls the tool), so the group
has known rewards (1, 0.1, 0, 2/3: correct, wrong but well formed, no \\boxed, partial) and
known numbers of contexts (2, 1, 1, 2); the update runs on those rows.
"""

import json

import jax
import numpy as np
import pytest
from ml_collections import ConfigDict

from memjax.agents.memsearcher.run_settings import (
    MemSearcherTrainRun,
    RolloutSettings,
    TrainSettings,
)
from memjax.agents.memsearcher.train_job import train_memsearcher, trainer_config
from memjax.agents.retrieval import ScriptedRetriever, passage
from memjax.agents.sampler_adapter import EOS
from memjax.agents.transcript import chat_format
from memjax.recipes.memsearcher import memsearcher_config
from memjax.rl.rollout import Completion
from memjax.rl.run_config import AdvantageConfig
from tests.agents.conftest import tiny_decoder
from tests.agents.scripted import boxed, memory, tool_call

QUESTION = "Between Harvey Pekar and Denise Levertov who was born earlier?"
ROWS = [{"id": "q0", "question": QUESTION, "golden_answers": ["Denise Levertov"]}]
PASSAGES = [
    passage("0", "Denise Levertov", "Denise Levertov was a British-born American poet, born 1923."),
]
PLANS = [  # one per rollout of the group: the completions of its model calls, in order
    [tool_call("Denise Levertov", top_n=1), memory("Levertov: 1923."), boxed("Denise Levertov")],
    [boxed("Harvey Pekar")],
    ["I do not know."],
    [tool_call("Levertov", top_n=1), memory("Levertov: 1923."), boxed("Levertov")],
]
REWARDS = [1.0, 0.1, 0.0, 2 * 0.5 / 1.5]
CONTEXTS = [2, 1, 1, 2]


def plan_generate(tokenizer):
    """Rollout i of the group plays PLANS[i]; the rollout loop sends the live episodes in their
    original order, so the live plans at call t are those longer than t."""
    eos = chat_format(tokenizer).eos_id
    calls = []

    def generate(prompts, rng):
        t = len(calls)
        calls.append(len(prompts))
        live = [plan for plan in PLANS if len(plan) > t]
        assert len(live) == len(prompts)
        out = []
        for plan in live:
            ids = tokenizer.encode(plan[t]) + [eos]
            out.append(Completion(ids, [-1.0] * len(ids), EOS))
        return out

    generate.params = None
    generate.calls = calls
    return generate


def smoke_config():
    config = memsearcher_config(model_source="unused")
    config.mesh = ConfigDict({"data": 1, "fsdp": 1, "tensor": 1})
    config.rollout.group_size = len(PLANS)
    config.rollout.max_tokens_per_call = 32
    config.rollout.max_prompt_length = 512
    config.rollout.max_response_length = 256
    config.train.batch_size = 1
    config.train.mini_batch_size = 1
    config.train.mini_batch_shards = 1  # one device: no per-GPU slices of a mini-batch
    config.train.num_steps = 1
    config.train.vocab_chunk = 8192
    config.optimizer.learning_rate = 1e-3
    config.retriever.default_top_n = 1
    return config


def test_trainer_config_carries_the_papers_settings():
    config = memsearcher_config(model_source="m")
    train, rollout = TrainSettings.from_config(config), RolloutSettings.from_section(config.rollout)
    c = trainer_config(train, rollout, num_train_examples=1000)
    assert c.algo == "grpo" and c.group_size == 5 and c.prompts_per_step == 256
    assert c.mini_batches == 2 and c.epochs == 1 and c.loop.num_steps == 1000 // 256
    assert c.seq_len == 695 + 6024
    assert c.advantage == AdvantageConfig(scaling="group", ddof=1, epsilon=1e-6)
    loss = c.loss
    assert (loss.kl_coef, loss.kl_kind, loss.entropy_coef) == (0.001, "k3", 0.001)
    assert (loss.agg_mode, loss.eps_low, loss.eps_high, loss.dual_clip) == (
        "token-mean",
        0.2,
        0.2,
        3.0,
    )
    assert c.optimizer.learning_rate == 1e-6


def test_multi_context_grpo_step_on_a_tiny_model(smollm2_tokenizer, tmp_path):
    tokenizer = smollm2_tokenizer
    params, cfg = tiny_decoder(tokenizer.vocab_size)
    before = jax.tree.map(np.array, params)  # the trainer donates its input buffers
    retriever = ScriptedRetriever(default=PASSAGES)
    generate = plan_generate(tokenizer)
    result = train_memsearcher(
        MemSearcherTrainRun.from_config(smoke_config()),
        tmp_path,
        params=params,
        cfg=cfg,
        tokenizer=tokenizer,
        retriever=retriever,
        train_rows=ROWS,
        generate=generate,
        progress=False,
    )
    (step,) = result["history"]
    assert generate.calls == [4, 2, 2]  # two rollouts answer at once, two search first
    assert step["reward"] == pytest.approx(np.mean(REWARDS), abs=1e-6)
    assert step["contexts"] == pytest.approx(np.mean(CONTEXTS))
    assert step["env/searches"] == pytest.approx(0.5)
    assert step["env/format_valid"] == pytest.approx(0.75)
    assert step["truncated_rows"] == 0
    # Non-zero advantages moved the parameters.
    moved = jax.tree.map(
        lambda a, b: float(np.abs(a - np.asarray(b)).max()), before, result["params"]
    )
    assert max(jax.tree.leaves(moved)) > 0
    curve = json.loads((tmp_path / "reward_curve.json").read_text())
    assert curve[0]["step"] == 1 and curve[0]["reward"] == pytest.approx(np.mean(REWARDS))
    assert (tmp_path / "reward_curve.png").is_file()
