"""Train states and their shardings from a config: the mesh, the optimizer chain, the policy.

mesh = mesh_from(config.mesh)                       # None: one device, no shardings
policy = build_state(params, decoder_abstract(cfg), optimizer, mesh)
"""

from __future__ import annotations

import dataclasses

import optax

from memjax.parallel import TRAIN_RULES, make_mesh
from memjax.training import train_step
from memjax.training.optimizer import OptimizerConfig, make_optimizer
from memjax.training.sections import as_dict, read_section


@dataclasses.dataclass
class BuiltState:
    state: train_step.TrainState
    shardings: train_step.TrainState | None  # None without a mesh
    optimizer: optax.GradientTransformation


def mesh_from(section):
    """A mesh over all devices from a `{data, fsdp, tensor}` section; None for no section."""
    shape = as_dict(section) if section else None
    return make_mesh(shape) if shape else None


def optimizer_from(section, path: str, total_updates: int) -> OptimizerConfig:
    """The optimizer section as an OptimizerConfig; `total_steps` is the run's update count."""
    values = as_dict(section)
    total = int(values.pop("total_steps", total_updates))
    return read_section(OptimizerConfig, values, path, total_steps=total)


def state_layout(abstract, opt_cfg: OptimizerConfig, mesh, rules=TRAIN_RULES):
    """The optimizer chain, and the shardings of a TrainState over `abstract` on `mesh` (None
    without a mesh)."""
    optimizer = make_optimizer(opt_cfg)
    if not mesh:
        return optimizer, None
    return optimizer, train_step.train_state_shardings(abstract, optimizer, mesh, rules)


def build_state(params, abstract, opt_cfg: OptimizerConfig, mesh) -> BuiltState:
    """A fresh TrainState for `params` (laid out on `mesh` with their logical axes)."""
    optimizer, shardings = state_layout(abstract, opt_cfg, mesh)
    return BuiltState(
        train_step.init_train_state(params, optimizer, shardings), shardings, optimizer
    )


def rows_multiple(mini_batches: int, micro_batches: int, mesh) -> int:
    """Rows a step's batch must be a multiple of: every mini- and micro-batch evenly split over
    the data-parallel devices."""
    data_parallel = 1 if mesh is None else mesh.shape["data"] * mesh.shape["fsdp"]
    return mini_batches * micro_batches * data_parallel


__all__ = [
    "BuiltState",
    "mesh_from",
    "optimizer_from",
    "state_layout",
    "build_state",
    "rows_multiple",
]
