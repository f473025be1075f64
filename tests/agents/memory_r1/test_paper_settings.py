"""Memory-R1's paper configs: constant learning rates without warmup, a stated step count."""

import runpy
from pathlib import Path

import pytest

from memjax.training.optimizer import OptimizerConfig, learning_rate_schedule

ROOT = Path(__file__).resolve().parents[3]
PAPER_CONFIGS = sorted(
    p.stem for p in (ROOT / "configs").glob("*_*.py") if p.stem[:4] in ("grpo", "ppo_")
)


def load(name):
    return runpy.run_path(str(ROOT / f"configs/{name}.py"))["get_config"]()


def test_the_paper_configs_are_all_here():
    assert len(PAPER_CONFIGS) == 8, PAPER_CONFIGS


@pytest.mark.parametrize("name", PAPER_CONFIGS)
def test_actor_and_critic_rates_are_constant_from_the_first_update(name):
    rl = load(name).rl
    sections = [rl.optimizer] + ([rl.critic_optimizer] if rl.algo == "ppo" else [])
    for section in sections:
        assert section.warmup_steps == 0 and section.schedule == "constant"
        fields = {k: section[k] for k in OptimizerConfig.__dataclass_fields__ if k in section}
        schedule = learning_rate_schedule(OptimizerConfig(**fields))
        assert float(schedule(0)) == float(schedule(50)) == section.learning_rate
    if rl.algo == "ppo":
        assert rl.critic_optimizer.learning_rate == 1e-5  # App. D


@pytest.mark.parametrize("name", PAPER_CONFIGS)
def test_the_number_of_training_steps_is_stated(name):
    # verl's trainer.total_epochs (30) x one 128-question step over conv-26's 152 questions.
    assert load(name).rl.num_steps == 30
