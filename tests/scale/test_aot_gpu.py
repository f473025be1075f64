"""Ahead-of-time compiles for NVIDIA GPUs that are not here (XLA's GPU compiler, jax[cuda12]).

They run in a process of the GPU environment (`make setup-gpu`: its own virtualenv, which adds
jax[cuda12] to the main one's packages) and skip, saying why, when it could not be installed.
A small GRPO job compiles for 8 H100s: with cuDNN's fused attention, the train step and the
prefill call cuDNN's flash attention and hold no [T, T] buffer; with XLA's attention in one
piece the score matrix is there. The Qwen2.5-3B GRPO step compiles for the paper's 4 H100s with
the planner within 15% of the compiler.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GPU_PYTHON = REPO / ".venv-gpu" / "bin" / "python"
sys.path.insert(0, str(REPO))


def _cuda_missing() -> str:
    note = REPO / ".venv-gpu" / "cuda-unavailable.txt"
    if not GPU_PYTHON.exists():
        return "no .venv-gpu environment (make setup-gpu creates it)"
    if note.exists():
        return f"jax[cuda12] could not be installed: {note.read_text().strip()}"
    probe = subprocess.run([str(GPU_PYTHON), "-c", "import jax_cuda12_plugin"], capture_output=True)
    return "" if probe.returncode == 0 else "jax_cuda12_plugin is not importable in .venv-gpu"


def _run_gpu_env(args: list[str]) -> dict:
    """`args` run by the GPU environment's Python; the last line of its output, as JSON."""
    missing = _cuda_missing()
    if missing:
        pytest.skip(f"GPU ahead-of-time compile not run: {missing}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.update(JAX_PLATFORMS="cpu", JAX_SKIP_CUDA_CONSTRAINTS_CHECK="1")
    for name in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR"):  # no fake devices, no CPU cache
        env.pop(name, None)
    cmd = [str(GPU_PYTHON), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _compile_small(attention: str) -> dict:
    return _run_gpu_env(["-m", "tests.scale.gpu_small_compile", attention])


@pytest.mark.heavy
def test_a_small_grpo_job_compiles_for_8_h100s_with_cudnn_attention():
    from tests.scale.gpu_small_compile import SEQ_LEN

    out = _compile_small("cudnn")
    assert out["platform"] == "gpu" and out["devices"] == 8
    step, prefill = out["programs"]["policy_train_step"], out["programs"]["sampler_prefill"]
    # cuDNN's flash attention forward and backward in the step, forward in the prefill.
    assert step["fused_attention"].get("__cudnn$fmhaSoftmax", 0) >= 1
    assert step["fused_attention"].get("__cudnn$fmhaSoftmaxBackward", 0) >= 1
    assert prefill["fused_attention"].get("__cudnn$fmhaSoftmax", 0) >= 1
    assert step["attention_len"] == SEQ_LEN and prefill["attention_len"] == SEQ_LEN // 2
    assert step["score_buffers"] == [] and prefill["score_buffers"] == []
    # The planner: the donated train state exactly; the temporaries on the safe side. (At this
    # size activations outweigh the state, and the planner's activation terms, fitted to the
    # paper models, count about 30% over the GPU compiler; the paper configs are within 15%.)
    assert step["fits"] and abs(step["planner_gap"]["arguments"]) < 0.05
    assert 0 <= step["planner_gap"]["temporaries"] < 0.35, step["planner_gap"]
    # 8 GPUs cooperate (at this size the compiler reduces partial sums rather than gathering
    # weights), and no layer's weights are gathered whole outside the layer scan.
    assert step["collectives"]["by_kind"], step["collectives"]
    assert not any(g.startswith("layers/") for g in step["gathered_whole"])
    assert step["model_flops"] > 0 and step["roofline_mfu"] > 0


@pytest.mark.heavy
def test_xla_attention_in_one_piece_holds_the_score_matrix_on_gpu():
    """The check above can fail: XLA's attention with no query blocks writes [T, T] scores."""
    from tests.scale.gpu_small_compile import SEQ_LEN

    out = _compile_small("xla")
    step = out["programs"]["policy_train_step"]
    assert step["fused_attention"] == {}
    assert any(f"{SEQ_LEN},{SEQ_LEN}" in s for s in step["score_buffers"]), step["score_buffers"]


@pytest.mark.heavy
def test_grpo_qwen3b_compiles_for_4_h100s_and_matches_the_planner():
    out = _run_gpu_env(
        [
            str(REPO / "tools" / "aot_check.py"),
            str(REPO / "configs" / "grpo_qwen3b.py"),
            "--target",
            "h100x4",
            "--only",
            "policy_train_step",
        ]
    )
    assert out["target"] == "h100x4" and out["platform"] == "gpu" and out["attention"] == "cudnn"
    assert out["verdicts"] == {"policy_train_step": "fits"}
    (step,) = out["functions"]
    assert step["planner_off"] == [], step["planner_gap"]  # within 15% of the GPU compiler
    assert step["fused_attention"].get("__cudnn$fmhaSoftmaxBackward", 0) >= 1
    assert step["score_buffers"] == [] and step["attention_len"] > 4096


def test_gpu_target_configs_name_the_published_figures():
    from memjax import hardware
    from memjax.aot import gpu_targets

    assert gpu_targets.parse_target("h100x8") == ("H100-80GB", 8)
    assert gpu_targets.parse_target("A100x16") == ("A100-80GB", 16)
    assert gpu_targets.parse_target("h100x0") is None and gpu_targets.parse_target("v5p") is None
    text = gpu_targets.target_config("H100-80GB")
    assert "core_count: 132\n" in text and "major: 9\n    minor: 0\n" in text
    assert f"device_memory_size: {hardware.accelerator('H100-80GB').hbm_bytes}\n" in text
    assert "memory_bandwidth: 4800000000000\n" in gpu_targets.target_config("H200")
    assert "core_count: 108\n" in gpu_targets.target_config("A100-80GB")


def test_cli_rejects_a_bad_gpu_target():
    tool = REPO / "tools" / "aot_check.py"
    proc = subprocess.run(
        [sys.executable, str(tool), str(REPO / "configs" / "grpo_qwen3b.py"), "--target", "v100x8"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert proc.returncode == 2
    assert "--target 'v100x8': expected CARDxN with CARD one of" in proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["error"]
