"""Bad config values fail at launch, naming the field, before any model or data loads."""

from __future__ import annotations

import runpy
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memjax.errors import ConfigError
from memjax.job_checks import check_job_config

ROOT = Path(__file__).resolve().parents[1]


def _config(name: str):
    return runpy.run_path(str(ROOT / "configs" / name))["get_config"]()


CASES = [
    ("toy_grpo.py", "prompts_per_step", 0, r"config.prompts_per_step=0: must be >= 1"),
    ("toy_grpo.py", "group_size", 1, r"config.group_size=1: GRPO needs >= 2"),
    ("toy_grpo.py", "group_size", -3, r"config.group_size=-3: must be >= 1"),
    ("toy_grpo.py", "mini_batches", 0, r"config.mini_batches=0: must be >= 1"),
    ("toy_grpo.py", "micro_batches", -1, r"config.micro_batches=-1: must be >= 1"),
    ("toy_grpo.py", "seq_len", 0, r"config.seq_len=0: must be >= 2"),
    ("toy_grpo.py", "num_steps", 0, r"config.num_steps=0: must be >= 1"),
    ("toy_grpo.py", "num_steps", -5, r"config.num_steps=-5: must be >= 1"),
    ("toy_grpo.py", "eval_every", -1, r"config.eval_every=-1: must be >= 0"),
    ("toy_ppo.py", "value_clip", -0.1, r"config.value_clip=-0.1: must be > 0"),
    ("demo.py", "rl.group_size", 1, r"config.rl.group_size=1: GRPO needs >= 2"),
    ("demo.py", "rl.optimizer.learning_rate", -1e-5, r"config.rl.optimizer.learning_rate="),
    ("demo.py", "rl.sampling.max_new_tokens", 0, r"config.rl.sampling.max_new_tokens=0"),
    ("demo.py", "rl.loss.agg_mode", "mean", r"config.rl.loss"),
    ("demo.py", "answer_agent.batch_size", 0, r"config.answer_agent.batch_size=0: must be >= 1"),
    ("demo.py", "answer_agent.metric", "bleu", r"config.answer_agent.metric='bleu': expected one"),
    ("demo.py", "demo.train_conversations", 0, r"config.demo.train_conversations=0"),
    ("demo.py", "demo.train_conversation", 3, r"^config.demo.train_conversation: no such field"),
    ("grpo_qwen7b.py", "rl.prompts_per_step", 0, r"config.rl.prompts_per_step=0: must be >= 1"),
    ("ppo_qwen3b.py", "rl.group_size", 0, r"config.rl.group_size=0: must be >= 1"),
    ("grpo_qwen7b.py", "rl.decode_batch", -1, r"config.rl.decode_batch=-1: must be >= 0"),
    # A decode wave is whole groups split evenly over data x fsdp (else its KV cache replicates).
    ("grpo_qwen7b.py", "rl.decode_batch", 100, r"rl.decode_batch=100: must be a multiple of 8 "),
    ("memsearcher_qwen7b.py", "rollout.decode_batch", 250, r"of 20 .*fsdp = 4\), e.g. 240$"),
    ("memsearcher_qwen3b.py", "rollout.decode_batch", 256, r"^config.rollout.decode_batch=256: "),
    ("grpo_qwen7b.py", "data.max_questions", -1, r"config.data.max_questions=-1: must be >= 0"),
    # MemSearcher's trainer sections, named where they are set (not as the trainer's copy).
    ("memsearcher_cpu.py", "optimizer.learning_rate", -1e-6, r"^config.optimizer.learning_rate="),
    ("memsearcher_qwen7b.py", "loss.kl_kind", "k9", r"^config.loss"),
    ("memory_r1_locomo_cpu.py", "construction.batch_size", -2, r"construction.batch_size=-2"),
    ("memsearcher_cpu.py", "rollout.group_size", 0, r"config.rollout.group_size=0"),
    ("memsearcher_cpu.py", "eval.batch_size", 0, r"config.eval.batch_size=0"),
    ("memsearcher_cpu.py", "eval.agent_batch_sizes", "react=0", r"agent_batch_sizes='react=0'"),
    ("memsearcher_cpu.py", "eval.agent_batch_sizes", "reactor=4", r"agent one of memsearcher"),
    ("memsearcher_cpu.py", "train.micro_batches", 0, r"config.train.micro_batches=0"),
    # The engine decodes on one device: a mesh over several is refused on any machine.
    ("memsearcher_qwen3b.py", "rollout.engine", True, r"^config.rollout.engine=True: .*fsdp"),
    ("memsearcher_cpu.py", "eval.engine_slots", -1, r"config.eval.engine_slots=-1"),
    ("serve.py", "server.slots", 0, r"^config.server.slots=0: must be >= 1"),
    ("sft_cpu.py", "sft.batch_rows", 0, r"config.sft.batch_rows=0: must be >= 1"),
]


@pytest.mark.parametrize("name,field,value,match", CASES)
def test_bad_value_names_its_field(name, field, value, match):
    config = _config(name)
    if name == "sft_cpu.py":
        config.data.train = "/data/t.jsonl"
    node = config
    *parents, leaf = field.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = value
    with pytest.raises(ConfigError, match=match):
        check_job_config(str(config.job), config)


@pytest.mark.parametrize(
    "name,mesh,devices,match",
    [
        # 64 devices over tensor 2 leave data x fsdp = 32: 240 rows are not whole groups of 5 there.
        (
            "memsearcher_qwen14b.py",
            "mesh",
            64,
            r"^config.rollout.decode_batch=240: .* 32\), e.g. 160$",
        ),
        ("grpo_qwen7b.py", "rl.mesh", 12, r"^config.rl.decode_batch=128: .* = 6\), e.g. 120$"),
    ],
)
def test_a_mesh_axis_sized_from_the_hardware_is_held_to_the_decode_wave(name, mesh, devices, match):
    """A launcher's retarget sets fsdp=-1; the wave is checked on the mesh the hardware gives."""
    config = _config(name)
    node = config
    for key in mesh.split("."):
        node = node[key]
    node.fsdp = -1
    config.hardware.num_devices = devices
    with pytest.raises(ConfigError, match=match):
        check_job_config(str(config.job), config)
    config.hardware.num_devices = 16 if name.startswith("memsearcher") else 4  # divides: fine
    check_job_config(str(config.job), config)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "configs").glob("*.py")))
def test_every_shipped_config_passes_its_checks(name):
    config = _config(name)
    if config.job == "sft.train":
        config.data.train = "/data/t.jsonl"  # given on the command line
    check_job_config(str(config.job), config)


def test_launcher_fails_in_seconds_with_one_line(tmp_path):
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "memjax.launch", f"--config={ROOT / 'configs' / 'demo.py'}"]
        + [f"--workdir={tmp_path}", "--config.rl.prompts_per_step=0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert lines[-1] == ("memjax.launch: error: config.rl.prompts_per_step=0: must be >= 1"), (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "checkpoints").exists()  # nothing ran
    assert time.perf_counter() - start < 120  # generous on a loaded machine; no model loaded


def test_the_rollout_engine_on_a_one_device_mesh_is_accepted():
    config = _config("memsearcher_cpu.py")
    config.rollout.engine = True
    check_job_config(str(config.job), config)
