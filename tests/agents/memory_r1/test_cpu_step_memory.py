"""The CPU Memory-R1 config's GRPO update fits a 24 GiB machine at the reproduction's shapes.

Compiled for the packaged SmolLM2's shape (no weights: abstract values) and read from XLA's own
memory analysis: with nothing recomputed the answer agent's step over 2,048-token rows needed
17-24 GiB of temporaries and the kernel killed the reproduction in its first step."""

import runpy

import jax
import jax.numpy as jnp
import optax
import pytest

from memjax.checkpoints.gguf_io import GGUFFile
from memjax.checkpoints.packaged import smollm2_gguf
from memjax.experiments.reproduce.stages import REPO_ROOT
from memjax.models import decoder
from memjax.rl import losses, steps
from memjax.rl.shared_prefix import SHARED_PREFIX_GRANULARITY
from memjax.training import train_step

BUDGET_BYTES = 12 * 2**30  # half the machine: the process holds the sampler, banks and index too


def _config(name):
    return runpy.run_path(str(REPO_ROOT / "configs" / name))["get_config"]()


def _batch(rows: int, seq_len: int, prefix: int, trained: int) -> dict:
    """Abstract policy-update rows: `prefix` shared tokens cut off (0: whole rows) and the
    trained positions only through the unembedding (the trainer's layout)."""
    S = jax.ShapeDtypeStruct
    T = seq_len - prefix
    batch = {k: S((rows, T), jnp.float32) for k in ("loss_mask", "advantages", "old_logp")}
    batch.update(tokens=S((rows, T), jnp.int32), token_mask=S((rows, T), jnp.bool_))
    batch.update(
        loss_positions=S((rows, trained), jnp.int32), loss_valid=S((rows, trained), jnp.bool_)
    )
    if prefix:
        batch["prefix"] = S((rows, prefix), jnp.int32)
    return batch


@pytest.mark.parametrize("shared", [False, True], ids=["whole-rows", "shared-prompt"])
def test_the_reproductions_memory_r1_grpo_step_fits_in_half_the_machine(shared):
    model = _config("memory_r1_synthetic_cpu.py").model
    mr1 = _config("reproduce_cpu.py").memory_r1
    cfg = GGUFFile(smollm2_gguf()).decoder_config(param_dtype=model.param_dtype, remat=model.remat)
    optimizer = optax.adamw(1e-5)
    step = steps.policy_train_step(
        cfg, losses.PolicyLossConfig(), optimizer, num_micro_batches=mr1.rl_micro_batches
    )
    state = jax.eval_shape(
        lambda p: train_step.init_train_state(p, optimizer), decoder.decoder_abstract(cfg)
    )
    rows = mr1.rl_prompts_per_step * mr1.rl_group_size
    # The answer agent's rows: a ~1,450-token prompt, of which whole granules are shared.
    prefix = 11 * SHARED_PREFIX_GRANULARITY if shared else 0
    batch = _batch(rows, mr1.rl_seq_len, prefix, trained=mr1.rl_max_new_tokens)
    compiled = step.jitted(batch).lower(state, batch, None).compile()  # the step's own jit
    used = compiled.memory_analysis().temp_size_in_bytes
    assert used < BUDGET_BYTES, f"{used / 2**30:.1f} GiB of temporaries"
