"""The sharded train step: micro-batches accumulated with `lax.scan`, one optimizer update.

    step = TrainStep(objective, optimizer, denominator=..., finalize=..., num_micro_batches=4,
                     mesh=mesh, state_shardings=shardings)
    state, metrics = step(state, batch)

An *objective* is `(params, micro_batch) -> (loss_sum, metric_sums)`: a sum over the micro-batch,
not a mean. The *denominator* is computed once from the whole batch (all micro-batches, all
devices) before the scan, so sum(grad(loss_sum_i)) / denominator is exactly the full-batch
gradient, whatever the micro-batching or the data-parallel layout.

Micro-batch i takes rows i, i + M, i + 2M, ... (a strided split), so that when the batch is
sharded over devices along its rows, every micro-batch stays evenly sharded with no resharding.
An update whose gradient norm is not finite is skipped (params and optimizer state unchanged)
and counted in `TrainState.skipped`.

With `compose` (LoRA, `memjax.training.lora_state`), `TrainState.params` holds only the trainable
parameters and the step takes the frozen ones as a third argument, `step(state, batch, frozen)`:
the objective sees `compose(frozen, trainable)`, gradients and optimizer moments exist for the
trainable tree alone, and the frozen tree is neither donated nor copied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from memjax.parallel import TRAIN_RULES, constrain, named_sharding, normalize_rules, param_shardings
from memjax.training.host_memory import check_fits_host


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class TrainState:
    params: Any
    opt_state: Any
    step: jax.Array  # [] int32: updates applied
    skipped: jax.Array  # [] int32: updates skipped for non-finite gradients


def init_train_state(params, optimizer: optax.GradientTransformation, shardings=None):
    """A fresh TrainState; with `shardings` (from `train_state_shardings`) it is laid out on the
    mesh, the optimizer moments sharded like their parameters."""
    if shardings is None:
        opt_state = optimizer.init(params)
        return TrainState(params, opt_state, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))
    params = jax.device_put(params, shardings.params)
    opt_state = jax.jit(optimizer.init, out_shardings=shardings.opt_state)(params)
    # Two distinct buffers: the step donates the state, and one buffer cannot be donated twice.
    step, skipped = (jax.device_put(jnp.zeros((), jnp.int32), shardings.step) for _ in range(2))
    return TrainState(params, opt_state, step, skipped)


def train_state_shardings(abstract, optimizer, mesh: Mesh, rules=TRAIN_RULES) -> TrainState:
    """NamedShardings for a TrainState over `abstract` (an ArrayInfo tree). Optimizer leaves that
    mirror a parameter get its sharding; counters and scalars are replicated."""
    ps = param_shardings(abstract, mesh, rules)
    replicated = NamedSharding(mesh, PartitionSpec())
    shapes = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype),
        abstract,
        is_leaf=lambda x: hasattr(x, "logical_axes"),
    )
    opt_shapes = jax.eval_shape(optimizer.init, shapes)
    os = optax.tree_map_params(
        optimizer,
        lambda _, s: s,
        opt_shapes,
        ps,
        transform_non_params=lambda _: replicated,
        is_leaf=lambda x: isinstance(x, NamedSharding),
    )
    return TrainState(ps, os, replicated, replicated)


# ------------------------------------------------------------------------------ accumulation


def _split(x: jax.Array, m: int) -> jax.Array:
    """[B, ...] -> [M, B/M, ...] with micro-batch i holding rows i, i+M, ... (strided)."""
    if x.shape[0] % m:
        raise ValueError(f"batch of {x.shape[0]} rows does not split into {m} micro-batches")
    return jnp.swapaxes(x.reshape(x.shape[0] // m, m, *x.shape[1:]), 0, 1)


def _reduce_metric(name: str, stacked: jax.Array) -> jax.Array:
    if name.endswith("_max"):
        return stacked.max()
    if name.endswith("_min"):
        return stacked.min()
    return stacked.sum()


def _batch_axes(x) -> tuple:
    return ("batch", "seq")[: x.ndim] + (None,) * max(0, x.ndim - 2)


def accumulate_gradients(
    objective: Callable,
    params,
    batch: dict,
    denominator: jax.Array,
    num_micro_batches: int = 1,
    mesh: Mesh | None = None,
    rules=None,
):
    """(grads of sum(loss_sum) / denominator, reduced metric sums) over M micro-batches."""
    micro = jax.tree.map(lambda x: _split(x, num_micro_batches), batch)
    grad_fn = jax.value_and_grad(objective, has_aux=True)

    def body(acc, mb):
        mb = jax.tree.map(lambda x: constrain(x, _batch_axes(x), mesh, rules), mb)
        (_, metrics), grads = grad_fn(params, mb)
        return jax.tree.map(jnp.add, acc, grads), metrics

    zeros = jax.tree.map(jnp.zeros_like, params)
    grads, stacked = jax.lax.scan(body, zeros, micro)
    scale = 1.0 / jnp.maximum(denominator, 1.0)
    grads = jax.tree.map(lambda g: (g * scale).astype(g.dtype), grads)
    metrics = {k: _reduce_metric(k, v) for k, v in stacked.items()}
    return grads, metrics


class TrainStep:
    """A jitted `(state, batch) -> (state, metrics)`; one compiled program per batch layout."""

    def __init__(
        self,
        objective: Callable,
        optimizer: optax.GradientTransformation,
        *,
        denominator: Callable[[dict], jax.Array],
        finalize: Callable[[dict, jax.Array], dict],
        num_micro_batches: int = 1,
        mesh: Mesh | None = None,
        rules=TRAIN_RULES,
        state_shardings: TrainState | None = None,
        donate: bool | None = None,
        compose: Callable[[Any, Any], Any] | None = None,
        frozen_shardings: Any = None,
    ):
        self.objective = objective
        self.compose = compose
        self.frozen_shardings = frozen_shardings
        self.optimizer = optimizer
        self.denominator = denominator
        self.finalize = finalize
        self.num_micro_batches = num_micro_batches
        self.mesh = mesh
        self.rules = normalize_rules(rules)
        self.state_shardings = state_shardings
        self.donate = donates_state(jax.default_backend()) if donate is None else donate
        self._compiled: dict = {}
        self._fits_host: set = set()  # batch shapes whose compiled step fits the host

    def _step(self, state: TrainState, batch: dict, frozen=None):
        den = self.denominator(batch)
        objective = self.objective
        if self.compose is not None:
            objective = lambda trainable, mb: self.objective(self.compose(frozen, trainable), mb)
        grads, sums = accumulate_gradients(
            objective,
            state.params,
            batch,
            den,
            self.num_micro_batches,
            self.mesh,
            self.rules if self.mesh is not None else None,
        )
        grad_norm = optax.global_norm(grads)
        finite = jnp.isfinite(grad_norm)
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(finite, n, o), new, old)
        new_state = TrainState(
            params=keep(params, state.params),
            opt_state=keep(opt_state, state.opt_state),
            step=state.step + finite.astype(jnp.int32),
            skipped=state.skipped + (~finite).astype(jnp.int32),
        )
        metrics = self.finalize(sums, den)
        metrics.update(grad_norm=grad_norm, skipped_update=(~finite).astype(jnp.float32))
        return new_state, metrics

    def jitted(self, batch: dict):
        """The step's jit for this batch's layout (its in/out shardings and donation), built
        once per layout: `step.jitted(batch).lower(state, batch, frozen).compile()` compiles
        the program a call runs, without running it (memjax.aot reads its memory and cost)."""
        key = tuple(sorted((k, v.ndim) for k, v in batch.items()))
        if key not in self._compiled:
            donate = (0,) if self.donate else ()
            if self.mesh is None:
                fn = jax.jit(self._step, donate_argnums=donate)
            else:
                batch_sh = {
                    k: named_sharding(self.mesh, self.rules, _batch_axes(v), v.shape)
                    for k, v in batch.items()
                }
                replicated = NamedSharding(self.mesh, PartitionSpec())
                fn = jax.jit(
                    self._step,
                    in_shardings=(self.state_shardings, batch_sh, self.frozen_shardings),
                    out_shardings=(self.state_shardings, replicated),
                    donate_argnums=donate,
                )
            self._compiled[key] = fn
        return self._compiled[key]

    def __call__(self, state: TrainState, batch: dict, frozen=None):
        if (frozen is None) != (self.compose is None):
            raise ValueError(
                "a step built with `compose` takes the frozen parameters (step(state, batch, "
                "frozen)); one without takes none"
            )
        batch = {k: jnp.asarray(v) for k, v in batch.items()}
        fn = self.jitted(batch)
        self._check_host_memory(fn, state, batch, frozen)
        return fn(state, batch, frozen)

    def _check_host_memory(self, fn, state, batch, frozen) -> None:
        """On the CPU, once per batch shape: a step that would outgrow the host is refused
        before it runs (memjax.training.host_memory); the call reuses the compiled program."""
        if jax.default_backend() != "cpu":
            return
        shapes = tuple(sorted((k, v.shape) for k, v in batch.items()))
        if shapes in self._fits_host:
            return
        check_fits_host(
            fn.lower(state, batch, frozen).compile(),
            f"the train step over {dict(shapes)}",
            "recompute more in the backward pass (model.remat=dots or full) or split the "
            "batch into more micro-batches",
        )
        self._fits_host.add(shapes)


def donates_state(platform: str) -> bool:
    """Whether a train step donates its state on `platform` ("cpu" | "gpu" | "tpu") when its
    caller does not say. Donating lets the new state overwrite the old, but the state is read
    inside the micro-batch loop, and XLA's TPU compiler then keeps copies of it, so a step
    that does not donate needs less memory per chip (`tools/aot_check.py --donate yes|no`
    compiles either way; the figures are in docs/scale.md). On CPU the two need about the
    same, so CPU keeps donating. GPU has not been compiled here: it keeps donating."""
    return platform != "tpu"


__all__ = [
    "TrainState",
    "TrainStep",
    "init_train_state",
    "train_state_shardings",
    "accumulate_gradients",
    "donates_state",
]
