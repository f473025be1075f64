"""The MemSearcher configs carry the paper's settings and build episode settings."""

import runpy
from pathlib import Path

import pytest

from memjax.agents.memsearcher.settings import EpisodeSettings
from memjax.checkpoints import packaged
from memjax.rl.losses import PolicyLossConfig
from memjax.training.optimizer import OptimizerConfig

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def load(name):
    return runpy.run_path(str(CONFIGS / name))["get_config"]()


@pytest.mark.parametrize(
    "name, size", [("memsearcher_qwen3b.py", "3B"), ("memsearcher_qwen7b.py", "7B")]
)
def test_paper_settings(name, size):
    config = load(name)
    assert config.job == "memsearcher.train" and config.seed == 0
    assert set(config.mesh) == {"data", "fsdp", "tensor"}
    assert config.optimizer.learning_rate == 1e-6
    assert (config.train.batch_size, config.train.mini_batch_size) == (256, 128)
    assert (config.train.ppo_epochs, config.train.total_epochs) == (1, 1)
    assert config.rollout.group_size == 5
    assert (config.loss.kl_coef, config.loss.kl_kind, config.loss.entropy_coef) == (
        0.001,
        "k3",
        0.001,
    )
    assert config.loss.agg_mode == "token-mean" and config.loss.dual_clip == 3.0
    assert (config.rollout.temperature, config.rollout.top_p, config.rollout.top_k) == (
        1.0,
        0.99,
        10000,
    )
    assert config.rollout.max_tokens_per_call == 512
    assert (config.rollout.max_prompt_length, config.rollout.max_response_length) == (695, 6024)
    assert config.eval_sampling.temperature == 0.0
    assert set(config.data.train) == {"nq", "hotpotqa"} and len(config.data.eval) == 7
    assert config.model.source.endswith(f"Qwen2.5-{size}-Instruct")
    # The sections map onto the RL core's dataclasses as they are.
    PolicyLossConfig(**config.loss)
    OptimizerConfig(**config.optimizer)
    train, evaluation = (
        EpisodeSettings.from_config(config).memsearcher(evaluation=False),
        EpisodeSettings.from_config(config).memsearcher(evaluation=True),
    )
    assert (train.max_turns, evaluation.max_turns, train.memory_cap_tokens) == (5, 20, 1024)
    assert train.search.default_top_n == 10


def test_cpu_config():
    config = load("memsearcher_cpu.py")
    assert config.model.source == packaged.SMOLLM2
    assert config.retriever.encoder.source == packaged.MINILM
    assert config.data.format == "auto"
    assert config.data.train.hotpotqa.endswith("hotpotqa_dev_distractor_500.jsonl")
    assert config.agent.memory_cap_tokens == 1024
    assert EpisodeSettings.from_config(config).memsearcher(evaluation=False).search.max_top_n == 3
    # The RL coefficients stay the paper's on CPU.
    assert (config.loss.kl_coef, config.loss.entropy_coef) == (0.001, 0.001)
