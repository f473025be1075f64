"""tools/aot_check.py: compiles held against the memory planner.

The TPU test compiles the Qwen2.5-3B GRPO train step (splash attention, remat, 128
micro-batches) for a v5p slice with libtpu, in a process of the TPU environment (`make
setup-tpu`), since libtpu's lock file must not meet this process's JAX. The CPU tests compile
a small model's train step for fake CPU devices: XLA's own numbers on a slice shrunk until
they do not fit, the planner's verdict on it, and the planner's suggestion compiled again.
"""

import dataclasses
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from memjax import hardware, planning
from memjax.models.config import DecoderConfig

REPO = Path(__file__).resolve().parents[2]
TPU_PYTHON = REPO / ".venv-tpu" / "bin" / "python"


def _libtpu_missing() -> str:
    note = REPO / ".venv-tpu" / "libtpu-unavailable.txt"
    if not TPU_PYTHON.exists():
        return "no .venv-tpu environment (make setup-tpu creates it)"
    if note.exists():
        return f"libtpu could not be installed: {note.read_text().strip()}"
    probe = subprocess.run([str(TPU_PYTHON), "-c", "import libtpu"], capture_output=True)
    return "" if probe.returncode == 0 else "libtpu is not importable in .venv-tpu"


@pytest.mark.heavy
def test_grpo_qwen3b_compiles_for_a_v5p_slice_and_matches_the_planner():
    missing = _libtpu_missing()
    if missing:
        pytest.skip(f"TPU ahead-of-time compile not run: {missing}")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TPU_SKIP_MDS_QUERY": "1"}
    # No fake CPU devices, no CPU-only JAX, and no CPU compile cache for the TPU compiler.
    for name in ("XLA_FLAGS", "JAX_PLATFORMS", "JAX_COMPILATION_CACHE_DIR"):
        env.pop(name, None)
    cmd = [
        str(TPU_PYTHON),
        str(REPO / "tools" / "aot_check.py"),
        str(REPO / "configs" / "grpo_qwen3b.py"),
        "--topology",
        "v5p:2x2x1",
        "--only",
        "policy_train_step",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["platform"] == "tpu" and summary["attention"] == "splash"
    (step,) = summary["functions"]
    assert step["function"] == "policy_train_step" and step["fits"]
    # The planner within 15% of the TPU compiler on the train state and the temporaries.
    assert step["planner_off"] == [], step["planner_gap"]
    assert abs(step["planner_gap"]["arguments"]) < 0.05
    # FSDP: every layer weight is gathered one layer at a time inside the scan.
    assert step["collectives"]["by_kind"]["all-gather"]["count"] > 0
    assert not any(g.startswith("layers/") for g in step["gathered_whole"])


# ------------------------------------------------------------------------------ CPU devices

SMALL = DecoderConfig(
    "qwen2", vocab_size=8192, embed_dim=256, mlp_dim=1024, num_layers=4, num_heads=8,
    num_kv_heads=4, head_dim=32, qkv_bias=True, tie_embeddings=True, param_dtype="float32",
    compute_dtype="bfloat16", remat="full", attention="xla",
)  # fmt: skip
# A chip sized between what 2 and 4 fsdp shards of SMALL's GRPO step need (XLA on CPU: 138
# and 106 MiB resident per device; 90% of 136 MiB is usable).
# A GPU-kind chip: its steps donate their state, as the measurements above were taken.
CHIP = hardware.Accelerator("136MiB-chip", "gpu", 136 / 1024, 4)


def _small_job(devices: int, micro_batch: int = 2):
    from memjax.aot import programs

    config = runpy.run_path(str(REPO / "configs" / "grpo_qwen3b.py"))["get_config"]()
    job = programs.JobShape.from_config(config)
    w = dataclasses.replace(
        job.workload,
        cfg=SMALL,
        hardware=hardware.Hardware(CHIP, devices),
        mesh={"data": 1, "fsdp": devices, "tensor": 1},
        seq_len=256,
        micro_batch_per_device=micro_batch,
        decode_batch=8,
        logprob_rows=0,
        prompt_len=0,
        group_size=1,
    )
    return dataclasses.replace(job, workload=w, rows=32, step_rows=32, group_size=1)


def _compile_train_step(job) -> dict:
    from memjax.aot import analysis, programs, targets
    from memjax.parallel import make_mesh

    w = job.workload
    target = targets.cpu_target(w.hardware.num_devices, w.hardware)
    mesh = make_mesh(w.mesh, list(target.devices))
    (program,) = programs.job_programs(job, mesh, {"policy_train_step"})
    count = lambda a: planning.shard_factor(a.shape, a.logical_axes, w.train_rules, w.mesh)
    return analysis.analyse(program, program.lower().compile(), target, 0.0, count)


def _apply(job, workload):
    return dataclasses.replace(job, workload=workload)


@pytest.mark.heavy
def test_a_slice_the_compiler_rejects_is_rejected_by_the_planner_and_its_fix_compiles():
    shrunk = _small_job(devices=2)
    compiled = _compile_train_step(shrunk)
    assert not compiled["fits"], compiled["resident_bytes"]
    assert not planning.plan(shrunk.workload).fits
    # (The planner is held to the TPU compiler above; XLA on CPU keeps other temporaries, so
    # only the verdicts are compared here.)

    steps, after = planning.suggest(shrunk.workload)
    assert steps and after.fits
    fixed = _compile_train_step(_apply(shrunk, after.workload))
    assert fixed["fits"], (steps, fixed["resident_bytes"], fixed["usable_bytes"])


def test_a_step_that_does_not_donate_writes_its_new_state_apart():
    job = _small_job(devices=2)
    assert job.donates  # a GPU-kind chip; a TPU's steps do not donate
    tpu = hardware.Hardware(hardware.accelerator("TPU-v5p"), 2)
    assert not dataclasses.replace(
        job, workload=dataclasses.replace(job.workload, hardware=tpu)
    ).donates
    donated = _compile_train_step(job)
    apart = _compile_train_step(_apply(job, dataclasses.replace(job.workload, donate_state=False)))
    assert donated["alias_bytes"] > 0.99 * donated["output_bytes"]  # all but the metrics
    assert apart["alias_bytes"] == 0
    # The new state's buffers are the planner's state; its temporaries are not compared apart
    # from them (XLA keeps scratch in those buffers), their sum is.
    assert abs(apart["planner_gap"]["outputs"]) < 0.05, apart["planner_gap"]
    assert apart["planner_gap"]["temporaries"] is None
    assert apart["planner_gap"]["working set"] is not None
    assert donated["planner_gap"]["working set"] is None
    assert apart["footprint_bytes"] >= apart["argument_bytes"] + apart["output_bytes"]


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_every_program_of_a_job_lowers_on_cpu_devices(algorithm):
    from memjax.aot import programs, targets
    from memjax.parallel import make_mesh

    job = _small_job(2)
    w = dataclasses.replace(job.workload, critic=algorithm == "ppo", prompt_len=64)
    job = dataclasses.replace(job, algorithm=algorithm, workload=w)
    mesh = make_mesh(w.mesh, list(targets.cpu_target(2, w.hardware).devices))
    built = programs.job_programs(job, mesh)
    # CPU devices have no decode kernel: the engine's per-layer kernel program is left out.
    skipped = {"engine_decode_kernel"} | ({"critic_train_step"} if algorithm != "ppo" else set())
    expected = [n for n in programs.PROGRAMS if n not in skipped]
    assert [p.name for p in built] == expected
    for p in built:
        assert "stablehlo" in p.lower().as_text()[:20000], p.name  # a jitted, lowerable program
        assert p.model_flops > 0 and p.planner["arguments"] > 0, p.name


def test_a_chunked_prefill_compiles_its_chunk_program_and_plans_less():
    from memjax.aot import programs, targets
    from memjax.parallel import make_mesh
    from memjax.sampling import loop

    job = _small_job(2)  # the Qwen2.5-3B recipe's prompts: 4,096 tokens
    job = dataclasses.replace(
        job, workload=dataclasses.replace(job.workload, prompt_len=job.prompt_len)
    )
    mesh = make_mesh(job.workload.mesh, list(targets.cpu_target(2, job.workload.hardware).devices))
    whole = {p.name: p for p in programs.job_programs(job, mesh)}["sampler_prefill"]
    w = dataclasses.replace(job.workload, prefill_chunk=128)
    chunked = {
        p.name: p for p in programs.job_programs(dataclasses.replace(job, workload=w), mesh)
    }["sampler_prefill"]
    assert whole.fn is loop.prefill_new and chunked.fn is loop.prefill
    assert whole.args[1].shape[1] == 4096 and chunked.args[1].shape[1] == 128
    assert chunked.args[4].k.shape[3] == whole.kwargs["cache_size"]  # the same cache slots
    assert chunked.planner["temporaries"] < whole.planner["temporaries"]
    compiled = chunked.lower().compile()  # donates the cache, as the sampler does
    assert compiled.memory_analysis().temp_size_in_bytes > 0


def test_collectives_are_read_from_hlo_text():
    from memjax.aot import analysis

    hlo = """
  %all-gather.1 = bf16[1,2048,11008]{2,1,0} all-gather(bf16[1,512,11008]{2,1,0} %p), dimensions={1}
  %ars = (f32[4,8]{1,0}, f32[16,8]{1,0}) all-reduce-start(f32[4,8]{1,0} %x), to_apply=%add
  %rs = f32[256]{0} reduce-scatter(f32[1024]{0} %g), dimensions={0}
  %add.3 = f32[8]{0} add(f32[8]{0} %a, f32[8]{0} %b)
"""
    found = analysis.collectives(hlo)
    assert [(c["op"], c["bytes"]) for c in found] == [
        ("all-gather", 2048 * 11008 * 2),
        ("all-reduce", 16 * 8 * 4),
        ("reduce-scatter", 256 * 4),
    ]
    summary = analysis.collective_summary(found, top=1)
    assert summary["by_kind"]["all-gather"]["count"] == 1
    assert summary["largest"][0].startswith("all-gather bf16[1,2048,11008]")


def test_cli_rejects_a_bad_topology():
    tool = REPO / "tools" / "aot_check.py"
    proc = subprocess.run(
        [sys.executable, str(tool), str(REPO / "configs" / "grpo_qwen3b.py"), "--topology", "v9:2"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"},
        timeout=300,
    )
    assert proc.returncode == 2
    assert "--topology 'v9:2': expected KIND:AxB[xC]" in proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["error"]


def test_a_program_the_tpu_compiler_refuses_is_reported_not_fitting():
    from types import SimpleNamespace

    from memjax.aot import analysis

    program = SimpleNamespace(
        name="policy_train_step", planner={"temporaries": 18 * 2**30}, resident_elsewhere=2**30
    )
    target = SimpleNamespace(hardware=hardware.Hardware(hardware.accelerator("TPU-v5e"), 4))
    # The message libtpu gave for Qwen2.5-3B's GRPO step on v5e:2x2.
    error = RuntimeError(
        "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO "
        "temporaries (19.73G) exceeds available HBM (15.75G)."
    )
    report = analysis.rejected(program, target, error, 1.0)
    assert not report["fits"] and report["temp_bytes"] == int(19.73 * 2**30)
    assert report["resident_bytes"] > report["usable_bytes"]
    assert "NO" in analysis.table_row(report)
