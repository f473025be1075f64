"""The continuous-batching engine's programs in the ahead-of-time set (memjax/aot/programs.py).

On two CPU devices (the pattern of test_aot_check.py) the engine's decode and slot prefill
compile over the sampling rules' layout: the slot cache sharded as the sampler's, donated and
written in place, and the prefill taking its slot's row without gathering the cache. The decode
kernels' per-layer program is built where the mesh's platform has a kernel (GPU, TPU), and its
attention matches XLA's window in Pallas' interpreter.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.scale.test_aot_check import _small_job


def _cpu_programs(only):
    from memjax.aot import programs, targets
    from memjax.parallel import make_mesh

    job = _small_job(2)
    job = dataclasses.replace(job, workload=dataclasses.replace(job.workload, prompt_len=64))
    mesh = make_mesh(job.workload.mesh, list(targets.cpu_target(2, job.workload.hardware).devices))
    return job, mesh, {p.name: p for p in programs.job_programs(job, mesh, only)}


def test_engine_programs_are_in_the_aot_set_and_compile_on_cpu_devices():
    from memjax.aot import programs
    from memjax.engine import programs as engine_programs
    from tests.tools_import import load_tool

    aot_check = load_tool("aot_check")

    for name in ("engine_prefill", "engine_decode", "engine_decode_kernel"):
        assert name in programs.PROGRAMS and name in aot_check.FUNCTIONS
    job, mesh, built = _cpu_programs({"engine_prefill", "engine_decode", "engine_decode_kernel"})
    assert set(built) == {"engine_prefill", "engine_decode"}  # no kernel on CPU devices
    assert not programs.has_decode_kernel(job, mesh)
    decode, prefill = built["engine_decode"], built["engine_prefill"]
    assert decode.fn is engine_programs.decode and prefill.fn is engine_programs.prefill_slot
    cache = decode.args[1]
    B, slots = job.workload.decode_batch, decode.kwargs["window"]
    assert cache.k.shape == (job.cfg.num_layers, B, job.cfg.num_kv_heads, slots, job.cfg.head_dim)
    assert not cache.k.sharding.is_fully_replicated  # rows over the data axes
    compiled = decode.lower().compile()
    mem = compiled.memory_analysis()
    cache_bytes = 2 * cache.k.size * cache.k.dtype.itemsize // 2  # per device (2 devices)
    assert mem.alias_size_in_bytes >= cache_bytes  # donated: written in place
    hlo = prefill.lower().compile().as_text()
    assert "all-gather" not in hlo  # the slot's row is summed out, not gathered
    assert decode.model_flops > 0 and decode.planner["arguments"] > 0


@pytest.mark.parametrize("kernel", ["triton", "paged"])
def test_decode_kernels_match_the_xla_window(kernel):
    from memjax.models import slot_attention
    from memjax.models.decoder import attention_over_cache

    B, K, G, S, H = 3, 2, 3, 256, 128
    ks = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(ks[0], (B, 1, K * G, H), jnp.bfloat16)
    k = jax.random.normal(ks[1], (B, K, S, H), jnp.bfloat16)
    v = jax.random.normal(ks[2], (B, K, S, H), jnp.bfloat16)
    lengths = jnp.array([1, 130, 256], jnp.int32)
    mask = jnp.arange(S)[None, None, :] < lengths[:, None, None]
    want = attention_over_cache(q, k, v, mask).astype(jnp.float32)
    got = slot_attention.slot_decode_attention(q, k, v, lengths, kernel).astype(jnp.float32)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-2)
    np.testing.assert_array_equal(
        np.asarray(got[0]),
        np.asarray(v[0, :, :1].astype(jnp.float32)).transpose(1, 0, 2).repeat(G, axis=1),
    )


def test_kernel_choice_follows_the_attention_setting():
    from memjax.models import slot_attention

    assert slot_attention.kernel_for("xla", None, 2048) == ""
    assert slot_attention.kernel_for("cudnn", None, 2048) == "triton"
    assert slot_attention.kernel_for("splash", None, 2048) == "paged"
    assert slot_attention.kernel_for("splash", None, 200) == ""  # not whole pages: XLA
    assert slot_attention.gpu_splits(6144) == 16 and slot_attention.gpu_splits(8) == 0
