"""The toy task's `model.source`: a checkpoint replaces the random decoder."""

import runpy
from pathlib import Path

import pytest

from memjax.errors import ConfigError
from memjax.rl.toy import ToyRun, toy_policy
from tests.models.hf_fixtures import TINY, make_hf_model

ROOT = Path(__file__).resolve().parents[2]


def test_a_source_gives_its_weights_and_shape(tmp_path):
    make_hf_model("llama").save_pretrained(tmp_path / "ckpt")
    config = runpy.run_path(str(ROOT / "configs/toy_grpo.py"))["get_config"]()
    _, random_cfg, base = toy_policy(ToyRun.from_config(config))
    assert random_cfg.vocab_size == config.model.vocab_size and "random init" in base
    config.model.source = str(tmp_path / "ckpt")
    params, cfg, base = toy_policy(ToyRun.from_config(config))
    assert cfg.vocab_size == TINY["vocab_size"] and cfg.embed_dim == TINY["hidden_size"]
    assert params["embed"].shape == (TINY["vocab_size"], TINY["hidden_size"])
    assert base == str(tmp_path / "ckpt")
    config.task.num_targets = TINY["vocab_size"]  # ids 3 .. 98 of a 96-token vocabulary
    with pytest.raises(ConfigError, match="config.task.num_targets"):
        toy_policy(ToyRun.from_config(config))
