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
    run_spec  the config fields that shape the state (model shape, algorithm, optimizer, LoRA)
    dir_*   directory items: the environment writes files into a folder and reads them back
            (on several processes, each into its own `process_<i>` subfolder)

Saves are asynchronous (arrays are copied to host, then written in the background) and atomic:
a step directory appears only once complete, so a run killed mid-save resumes from the last
complete one. Preservation keeps the last N steps and the best K by a metric.

Resume (`restore` without a step) verifies the newest step and falls back to the newest complete
one: a step whose items are missing or unreadable (a deleted `_METADATA` or array chunk, a
truncated iterator state, a corrupt JSON item, a missing directory item) is skipped with one
warning line naming the item, then moved to `<directory>/damaged/` so the run can save that
step number again. A step that is intact but does not fit the run (another model shape,
algorithm or optimizer: its run spec or its array shapes differ) is refused with one
`CheckpointError` line naming what differs, before any array is read.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grain
import orbax.checkpoint as ocp
from absl import logging
from etils import epath

from memjax import distributed
from memjax import workdir as workdir_lib
from memjax.errors import CheckpointError
from memjax.log_filter import libraries_silenced, quiet_late_read_errors
from memjax.training import checkpoint_checks as checks
from memjax.training.checkpoint_checks import DamagedStep

DAMAGED_DIR = "damaged"  # where skipped steps are moved (not a step name, so orbax ignores it)


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
        # The writer speaks local files; in a bucket it fills a local folder that is uploaded.
        with workdir_lib.staged_dir(process_subdir(epath.Path(directory))) as target:
            args.writer(target)

    def restore(self, directory: epath.Path, args: DirectoryRestore | None = None):
        source = process_subdir(epath.Path(directory))
        if not source.is_dir():
            raise CheckpointError(
                f"{directory} has no folder for process {distributed.process_index()} "
                f"({source.name}): it was written by a run with another number of processes"
            )
        local = workdir_lib.local(source)
        if local is None:  # in a bucket: the reader gets a local copy
            local = Path(tempfile.mkdtemp(prefix="memjax-restore-"))
            workdir_lib.download_tree(source, local)
        if args is None or args.reader is None:
            return local
        return args.reader(local)

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


@dataclasses.dataclass(frozen=True)
class _Request:
    """What one restore asks for (the same for every step it tries)."""

    abstract_state: Any
    data_iterator: Any
    with_extra: bool
    dirs: dict[str, Callable[[Path], Any]]
    run_spec: Mapping[str, Any] | None


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
        self.directory = workdir_lib.path(directory)  # a local folder or gs://
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
        run_spec: Mapping[str, Any] | None = None,
        force: bool = True,
    ) -> bool:
        """Saves one step. `run_spec` (the config fields that shape `state`, nested mappings
        allowed) is what `restore(run_spec=...)` compares against before restoring."""
        items = {"state": ocp.args.StandardSave(state)}
        if data_iterator is not None:
            items["data"] = grain.checkpoint.CheckpointSave(data_iterator)
        if extra is not None:
            items["extra"] = ocp.args.JsonSave(extra)
        if run_spec is not None:
            items["run_spec"] = ocp.args.JsonSave(checks.flatten_spec(run_spec))
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
        run_spec: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Restores onto the shardings of `abstract_state` (a tree of jax.ShapeDtypeStruct with
        .sharding, or of arrays). The grain iterator is restored in place. Returns {"step",
        "state", "extra" (if asked), "dir_<name>": reader result}.

        Without `step`: the newest step that restores completely; damaged newer steps are
        skipped (one warning line each) and moved to `damaged/`. With `step`: that step, or a
        CheckpointError saying why not. Either way a step whose run spec (when both it and
        `run_spec` are given) or array tree differs from this run's is refused."""
        request = _Request(abstract_state, data_iterator, with_extra, dict(dirs or {}), run_spec)
        if step is not None:
            if step not in self._manager.all_steps():
                raise CheckpointError(
                    f"no checkpoint for step {step} in {self.directory}; have {self.all_steps()}"
                )
            try:
                return self._restore_step(step, request)
            except DamagedStep as e:
                raise CheckpointError(f"{self._step_dir(step)}: {e}") from None
        steps = self.all_steps()
        if not steps:
            raise CheckpointError(f"no checkpoint in {self.directory}")
        skipped: list[tuple[int, str]] = []
        for candidate in reversed(steps):
            try:
                result = self._restore_step(candidate, request)
            except DamagedStep as e:
                skipped.append((candidate, str(e)))
                logging.warning(
                    "%s: skipped, %s; trying the step before", self._step_dir(candidate), e
                )
                continue
            if skipped:
                self._set_aside([s for s, _ in skipped])
                logging.warning(
                    "%s: resumed from step %d; skipped step(s) %s moved to %s",
                    self.directory,
                    candidate,
                    ", ".join(str(s) for s, _ in skipped),
                    self.directory / DAMAGED_DIR,
                )
            return result
        reasons = "; ".join(f"step {s}: {why}" for s, why in skipped)
        raise CheckpointError(f"{self.directory}: no complete checkpoint ({reasons})")

    # ---------------------------------------------------------------- one step

    def _step_dir(self, step: int) -> epath.Path:
        return self.directory / str(step)

    def _restore_step(self, step: int, request: _Request) -> dict[str, Any]:
        """Checks, then restores, one step. Raises DamagedStep for a step that cannot be read,
        CheckpointError for one that does not fit the run. The cheap items come first so a
        damaged step is found before its arrays are read; the directory items (whose readers
        load state into the environment) come last, once everything else has been read."""
        step_dir = self._step_dir(step)
        needed = ["state"] + (["data"] if request.data_iterator is not None else [])
        needed += (["extra"] if request.with_extra else []) + [f"dir_{n}" for n in request.dirs]
        missing = [item for item in needed if not (step_dir / item).is_dir()]
        if missing:
            raise DamagedStep(f"item {', '.join(missing)} is missing")
        if request.run_spec is not None and (step_dir / "run_spec").is_dir():
            saved_spec = self._restore_item(step, "run_spec", ocp.args.JsonRestore())
            differences = checks.spec_differences(saved_spec, request.run_spec)
            if differences:
                raise CheckpointError(f"{step_dir}: {checks.summarize(differences)}")
        self._check_tree(step, request.abstract_state)
        result: dict[str, Any] = {"step": step}
        if request.with_extra:
            result["extra"] = self._restore_item(step, "extra", ocp.args.JsonRestore())
        if request.data_iterator is not None:
            self._restore_item(
                step, "data", grain.checkpoint.CheckpointRestore(request.data_iterator)
            )
        result["state"] = self._restore_item(
            step, "state", ocp.args.StandardRestore(request.abstract_state)
        )
        for name, reader in request.dirs.items():
            result[f"dir_{name}"] = self._restore_item(
                step, f"dir_{name}", DirectoryRestore(reader)
            )
        return result

    def _restore_item(self, step: int, item: str, args: ocp.args.CheckpointArgs):
        """One item of a step; any failure to read it is damage, said in one line (orbax's and
        tensorstore's own messages run over dozens of lines: they go to the debug log)."""
        quiet_late_read_errors()  # before the read: a failing read's siblings report at once
        try:
            with libraries_silenced():
                return self._manager.restore(step, args=ocp.args.Composite(**{item: args}))[item]
        except CheckpointError:
            raise
        except Exception as e:  # orbax, grain and tensorstore raise many kinds
            logging.debug("restoring %s of %s", item, self._step_dir(step), exc_info=True)
            raise DamagedStep(f"item {item} is unreadable: {checks.first_line(e)}") from None

    def _check_tree(self, step: int, abstract_state) -> None:
        """The saved array tree against this run's: the same paths with the same shapes."""
        try:
            with libraries_silenced():
                saved = ocp.PyTreeCheckpointHandler().metadata(self._step_dir(step) / "state")
        except Exception as e:
            raise DamagedStep(
                f"item state has no readable metadata: {checks.first_line(e)}"
            ) from None
        differences = checks.tree_differences(
            checks.tree_shapes(saved.tree), checks.tree_shapes(abstract_state)
        )
        if differences:
            raise CheckpointError(
                f"{self._step_dir(step)}: the saved state does not fit this run: "
                f"{checks.summarize(differences)}"
            )

    def _set_aside(self, steps: list[int]) -> None:
        """Moves damaged steps to `damaged/<step>` (kept for inspection, out of the manager's
        view), so the resumed run can save those step numbers again."""
        if distributed.is_primary():
            target_root = self.directory / DAMAGED_DIR
            target_root.mkdir(exist_ok=True)
            for step in steps:
                target, n = target_root / str(step), 1
                while target.exists():
                    target, n = target_root / f"{step}.{n}", n + 1
                workdir_lib.move(self._step_dir(step), target)
        if distributed.process_count() > 1:
            ocp.multihost.sync_global_processes("memjax_checkpoint_set_aside")
        self._manager.reload()

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
