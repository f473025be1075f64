"""Training checkpoints with orbax: params, optimizer state, step, RNG, the grain iterator, and
whatever an environment registers (memory banks), in one atomic step directory.

    ckpt = Checkpointer(workdir / "checkpoints", keep_last=3, keep_best=1, best_metric="reward")
    ckpt.save(step, state_tree, data_iterator=it, extra={"bank": {...}},
              dirs={"banks": env.save_banks}, metrics={"reward": 0.7})
    restored = ckpt.restore(abstract_state_tree, data_iterator=it, dirs={"banks": env.load_banks})

Items of a step directory:
    state   the array tree (StandardSave); restored onto whatever shardings the abstract tree
            carries, so a checkpoint written on one mesh restores onto another
    data    the grain iterator position (grain's own checkpoint handler)
    extra   JSON-able extra state (counters, small memory banks)
    dir_*   directory items: the environment writes files into a folder and reads them back
            (on several processes, each into its own `process_<i>` subfolder)

Saves are asynchronous (arrays are copied to host, then written in the background) and atomic:
a step directory appears only once complete, so a run killed mid-save resumes from the last
complete one. Preservation keeps the last N steps and the best K by a metric.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grain
import orbax.checkpoint as ocp
from etils import epath

from memjax import distributed


class CheckpointError(RuntimeError):
    pass


# ------------------------------------------------------------------------------ directory items


def process_subdir(directory: Path) -> Path:
    """Where this process's files of a directory item live.

    Orbax calls an item's handler on every process. On one process the folder is the item's own
    directory; on several, each host's environment holds its own state (the memory banks of its
    own data shard), so each process writes and reads `process_<i>` inside it, and no two
    processes ever write the same file.
    """
    if distributed.process_count() == 1:
        return directory
    return directory / f"process_{distributed.process_index()}"


class DirectoryHandler(ocp.CheckpointHandler):
    """An item that is a folder of files the caller writes (a memory bank, an index)."""

    def save(self, directory: epath.Path, args: DirectorySave):
        target = process_subdir(Path(directory))
        target.mkdir(parents=True, exist_ok=True)
        args.writer(target)

    def restore(self, directory: epath.Path, args: DirectoryRestore | None = None):
        source = process_subdir(Path(directory))
        if not source.is_dir():
            raise CheckpointError(
                f"{directory} has no folder for process {distributed.process_index()} "
                f"({source.name}): it was written by a run with another number of processes"
            )
        if args is None or args.reader is None:
            return source
        return args.reader(source)

    def metadata(self, directory):
        return None


@ocp.args.register_with_handler(DirectoryHandler, for_save=True)
@dataclasses.dataclass
class DirectorySave(ocp.args.CheckpointArgs):
    writer: Callable[[Path], None]


@ocp.args.register_with_handler(DirectoryHandler, for_restore=True)
@dataclasses.dataclass
class DirectoryRestore(ocp.args.CheckpointArgs):
    reader: Callable[[Path], Any] | None = None


# ------------------------------------------------------------------------------ manager


class Checkpointer:
    def __init__(
        self,
        directory: str | Path,
        *,
        keep_last: int = 3,
        keep_best: int = 0,
        best_metric: str | None = None,
        best_mode: str = "max",
        async_save: bool = True,
    ):
        if best_mode not in ("max", "min"):
            raise ValueError(f"best_mode={best_mode!r}; choose max or min")
        if keep_best and not best_metric:
            raise ValueError("keep_best needs best_metric (the metrics key to rank by)")
        self.directory = Path(directory).absolute()
        policies = [ocp.checkpoint_managers.LatestN(n=keep_last)]
        if keep_best:
            policies.append(
                ocp.checkpoint_managers.BestN(
                    get_metric_fn=lambda m: m[best_metric],
                    reverse=best_mode == "min",
                    n=keep_best,
                    keep_checkpoints_without_metrics=False,
                )
            )
        options = ocp.CheckpointManagerOptions(
            enable_async_checkpointing=async_save,
            preservation_policy=ocp.checkpoint_managers.AnyPreservationPolicy(policies),
            best_fn=(lambda m: m[best_metric]) if best_metric else None,
            best_mode=best_mode,
            keep_checkpoints_without_metrics=True,
            create=True,
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    # ---------------------------------------------------------------- queries

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def best_step(self) -> int | None:
        return self._manager.best_step()

    # ---------------------------------------------------------------- save / restore

    def save(
        self,
        step: int,
        state,
        *,
        data_iterator=None,
        extra: dict | None = None,
        dirs: dict[str, Callable[[Path], None]] | None = None,
        metrics: dict[str, float] | None = None,
        force: bool = True,
    ) -> bool:
        items = {"state": ocp.args.StandardSave(state)}
        if data_iterator is not None:
            items["data"] = grain.checkpoint.CheckpointSave(data_iterator)
        if extra is not None:
            items["extra"] = ocp.args.JsonSave(extra)
        for name, writer in (dirs or {}).items():
            items[f"dir_{name}"] = DirectorySave(writer)
        return self._manager.save(
            step,
            args=ocp.args.Composite(**items),
            # None (not {}) for a step without metrics: the best-K policy never ranks it.
            metrics={k: float(v) for k, v in metrics.items()} if metrics else None,
            force=force,
        )

    def restore(
        self,
        abstract_state,
        *,
        step: int | None = None,
        data_iterator=None,
        with_extra: bool = False,
        dirs: dict[str, Callable[[Path], Any]] | None = None,
    ) -> dict[str, Any]:
        """Restores step (default: latest) onto the shardings of `abstract_state` (a tree of
        jax.ShapeDtypeStruct with .sharding, or of arrays). The grain iterator is restored in
        place. Returns {"step", "state", "extra" (if asked), "dir_<name>": reader result}."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise CheckpointError(f"no checkpoint in {self.directory}")
        if step not in self._manager.all_steps():
            raise CheckpointError(
                f"no checkpoint for step {step} in {self.directory}; have {self.all_steps()}"
            )
        items = {"state": ocp.args.StandardRestore(abstract_state)}
        if data_iterator is not None:
            items["data"] = grain.checkpoint.CheckpointRestore(data_iterator)
        if with_extra:
            items["extra"] = ocp.args.JsonRestore()
        for name, reader in (dirs or {}).items():
            items[f"dir_{name}"] = DirectoryRestore(reader)
        out = self._manager.restore(step, args=ocp.args.Composite(**items))
        result = {"step": step, "state": out["state"]}
        if with_extra:
            result["extra"] = out["extra"]
        for name in dirs or {}:
            result[f"dir_{name}"] = out[f"dir_{name}"]
        return result

    def wait(self) -> None:
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()


__all__ = [
    "Checkpointer",
    "CheckpointError",
    "DirectoryHandler",
    "DirectorySave",
    "DirectoryRestore",
]
