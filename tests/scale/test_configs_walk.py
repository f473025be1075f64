"""Every config file in configs/ loads and validates; the paper-scale ones fit the hardware they
name, and those sized for more devices than their paper say so."""

import runpy
from pathlib import Path

import pytest

from memjax import jobs, planning
from memjax.parallel import normalize_rules

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.py"))

# Jobs that issues 6 and 7 are building and that configs already name. Once a job is in
# memjax.jobs.JOBS it is checked as registered; remove it from here then.
PLANNED_JOBS = {
    "memory_r1.build_banks",
    "memory_r1.train_manager",
    "memory_r1.train_answer",
    "memory_r1.eval",
}


def _load(path):
    return runpy.run_path(str(path))["get_config"]()


def test_the_folder_has_the_paper_configs():
    names = {p.stem for p in CONFIGS}
    for algo in ("grpo", "ppo"):
        for model in ("qwen3b", "qwen7b", "qwen14b", "llama8b"):
            assert f"{algo}_{model}" in names
    assert {"memsearcher_qwen3b", "memsearcher_qwen7b", "memsearcher_qwen14b"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_loads_and_validates(path):
    config = _load(path)
    job = config.job
    if job in jobs.JOBS:
        assert callable(jobs.resolve(job))
    else:
        assert job in PLANNED_JOBS, f"{path.name}: job {job!r} is neither registered nor planned"
    if config.get("mesh"):
        assert set(config.mesh) <= {"data", "fsdp", "tensor"}
    if "hardware" not in config:
        return
    # Paper-scale: shape preset, rules per role, mesh over the named hardware, and it fits.
    assert set(config.rules) == {"train", "sampling"}
    for role in ("train", "sampling"):
        normalize_rules(dict(config.rules[role]))
    assert config.rules.train != config.rules.sampling
    assert planning.validate(config) == []
    plan = planning.plan_memory(config)
    assert plan.fits, plan.table()
    assert planning.paper_hardware_plan(config) is None  # sized for the paper's hardware
    assert config.model.param_dtype == "float32" and config.model.compute_dtype == "bfloat16"


def test_memory_r1_settings():
    grpo, ppo = (_load(p) for p in CONFIGS if p.stem in ("grpo_qwen7b", "ppo_llama8b"))
    for c in (grpo, ppo):
        rl = c.rl
        assert rl.optimizer.learning_rate == 1e-6 and rl.prompts_per_step == 128
        assert rl.seq_len == 4096 + 2048 and rl.sampling.max_new_tokens == 2048
        assert rl.sampling.temperature == 1.0
        f = planning.job_fields(c)
        assert f.micro_batch_per_device == 2  # the paper's micro-batch per GPU
        assert c.hardware.accelerator == "H100-80GB"
    assert grpo.hardware.num_devices == ppo.hardware.num_devices == 4
    assert ppo.rl.critic_optimizer.learning_rate == 1e-5 and ppo.rl.loss.kl_coef == 0.0
    assert grpo.rl.algo == "grpo" and grpo.rl.loss.kl_coef > 0
    assert grpo.model.preset == "qwen2.5-7b-instruct"
    assert ppo.model.preset == "llama-3.1-8b-instruct"


def test_a_broken_config_is_reported():
    config = _load(next(p for p in CONFIGS if p.stem == "grpo_qwen3b"))
    config.rl.mesh.fsdp = 3
    assert any("needs 3 devices" in p for p in planning.validate(config))
    config.rl.mesh.fsdp = 4
    config.rules.train.mlp = ("fsdp",)  # gate [L, D, F]: embed and mlp both on fsdp
    assert any("rules.train" in p and "fsdp" in p for p in planning.validate(config))


def test_a_config_sized_beyond_its_papers_hardware_is_planned_there_too():
    config = _load(next(p for p in CONFIGS if p.stem == "ppo_qwen14b"))
    config.hardware.num_devices = 16  # as if it needed twice the paper's 8 devices
    config.rl.mesh.fsdp = 2
    config.hardware.paper_num_devices = 8
    paper = planning.paper_hardware_plan(config)
    assert paper.workload.hardware.num_devices == 8 and paper.fits
    assert paper.peak >= planning.plan_memory(config).peak  # fewer devices, more per device
