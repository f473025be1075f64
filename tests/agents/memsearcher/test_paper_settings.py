"""MemSearcher's and Search-R1's settings as the authors' code has them, read from the paper
configs: updates per step, micro-batches the memory plan and the run share, Search-R1's own
retrieval, turn and observation settings."""

import runpy
from pathlib import Path

import numpy as np
import pytest

from memjax.agents.memsearcher.agent_factory import episode_factory
from memjax.agents.memsearcher.run_settings import RolloutSettings, TrainSettings
from memjax.agents.memsearcher.settings import EpisodeSettings
from memjax.agents.memsearcher.train_job import trainer_config as typed_trainer_config
from memjax.planning import resolve_mesh, workload_from_config
from memjax.rl.minibatches import MiniBatchConfig, padded_size, plan_mini_batches

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
PAPER = ["memsearcher_qwen3b.py", "memsearcher_qwen7b.py", "memsearcher_qwen14b.py"]


def load(name):
    return runpy.run_path(str(CONFIGS / name))["get_config"]()


def words(text):
    return len(text.split())


def trainer_config(config, num_train_examples):
    """The trainer's config of a recipe config, as memsearcher.train builds it."""
    train, rollout = TrainSettings.from_config(config), RolloutSettings.from_section(config.rollout)
    return typed_trainer_config(train, rollout, num_train_examples)


@pytest.mark.parametrize("name", PAPER)
def test_updates_per_step_follow_the_contexts_as_memsearchers_trainer(name):
    config = load(name)
    t = trainer_config(config, num_train_examples=10_000)
    assert t.mini_batch.mode == "in_order"
    assert t.mini_batch.rows_per_mini_batch == 128 * 5  # ppo_mini_batch_size x rollout.n
    assert t.mini_batch.shards == config.hardware.num_devices  # verl's ranks
    # 256 questions x 5 rollouts with 1-5 contexts each: about 2 x mean contexts updates.
    contexts = np.random.default_rng(1).integers(1, 6, size=t.prompts_per_step * t.group_size)
    rows = np.repeat(np.arange(len(contexts)), contexts)
    mb = MiniBatchConfig(
        "in_order", rows_per_mini_batch=t.mini_batch.rows_per_mini_batch, shards=t.mini_batch.shards
    )
    plan = plan_mini_batches(rows, mb, None)
    assert abs(len(plan) - 2 * contexts.mean()) <= 1


@pytest.mark.parametrize("name", PAPER)
def test_the_run_uses_the_planned_micro_batch(name):
    config = load(name)
    t = trainer_config(config, num_train_examples=10_000)
    mesh = resolve_mesh(dict(config.mesh), config.hardware.num_devices)
    data_parallel = mesh["data"] * mesh["fsdp"]
    rows = padded_size(
        MiniBatchConfig("in_order", rows_per_mini_batch=t.mini_batch.rows_per_mini_batch),
        t.micro_batches * data_parallel,
    )
    rows_per_device_per_micro_batch = rows // t.micro_batches // data_parallel
    assert rows_per_device_per_micro_batch == workload_from_config(config).micro_batch_per_device


def test_cpu_config_splits_rows_in_order_too():
    t = trainer_config(load("memsearcher_cpu.py"), num_train_examples=64)
    mb = t.mini_batch
    assert (mb.mode, mb.rows_per_mini_batch, mb.shards) == ("in_order", 5, 1)
    assert t.micro_batches == 2  # no scale sections: the config's own count


@pytest.mark.parametrize("name", PAPER + ["memsearcher_cpu.py"])
def test_search_r1_baseline_has_its_own_settings(name):
    config = load(name)
    assert dict(config.search_r1) == {"top_k": 3, "max_turns": 4, "max_observation_tokens": 500}
    episodes = EpisodeSettings.from_config(config)
    for evaluation in (False, True):
        episode = episode_factory("search_r1", episodes, words, evaluation)("q?")
        # Search-R1's 4 search rounds and a final call; its top-3; its 500-token observations.
        assert episode.settings.max_turns == 5
        assert episode.settings.top_k == 3 and episode.settings.max_observation_tokens == 500
    memsearcher = episode_factory("memsearcher", episodes, words, True)("q?").settings
    assert memsearcher.max_turns == config.agent.max_turns_eval


@pytest.mark.parametrize("name", PAPER + ["memsearcher_cpu.py"])
def test_the_trainer_reads_the_same_mini_batch_plan(name):
    config = load(name)
    from memjax.planning import micro_batches_for

    rc = trainer_config(config, num_train_examples=10_000)
    train = config.train
    rows = train.mini_batch_size * config.rollout.group_size
    assert rc.mini_batch == MiniBatchConfig(
        "in_order",
        num_mini_batches=train.batch_size // train.mini_batch_size,
        rows_per_mini_batch=rows,
        shards=train.mini_batch_shards,
    )
    if "micro_batch_per_device" in train:  # the scale sections: what the memory plan sizes
        per_device, devices = train.micro_batch_per_device, config.hardware.num_devices
        assert rc.micro_batches == micro_batches_for(rows, per_device, dict(config.mesh), devices)
    else:
        assert rc.micro_batches == train.micro_batches
