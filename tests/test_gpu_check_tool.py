"""tools/gpu_check.py without a GPU: one clear line and exit status 2 (it runs on lent GPUs)."""

import os
import runpy
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tools" / "gpu_check.py"


def test_fails_clearly_without_a_gpu():
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--quick"], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 2
    assert "gpu_check: no NVIDIA GPU visible to JAX (default backend: cpu)" in proc.stderr
    assert proc.stdout == ""


def test_device_kinds_map_to_published_peaks():
    accelerator_for = runpy.run_path(str(TOOL))["accelerator_for"]
    assert accelerator_for("NVIDIA H100 80GB HBM3").name == "H100-80GB"
    assert accelerator_for("NVIDIA H200").hbm_gbps == 4800
    assert accelerator_for("NVIDIA A100-SXM4-40GB").name == "A100-40GB"
    assert accelerator_for("Tesla T4") is None
