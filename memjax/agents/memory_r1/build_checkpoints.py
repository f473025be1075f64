"""A bank construction in progress, saved every few manager steps so a stopped build resumes.

    checkpoints = BuildCheckpoints(root, batch_ids, fingerprints, every=10)
    state = checkpoints.load(streams, embedder) or start_build(streams, raw_facts, embedder)
    run_manager(streams, state, manager, settings, on_step=checkpoints.save)
    ...                                   # the finished banks saved
    checkpoints.clear()

root/.building/<key>/ is an atomic save root (memjax.memory.atomic): each snapshot holds every
conversation's bank (bank-<i>/) and turn traces (trace-<i>.jsonl) after the same manager step,
and progress.json (steps done, counters, the latencies of the calls so far). <key> is the SHA-256 of the
batch's conversation ids and bank fingerprints, so only a build from the same inputs resumes
one; a damaged save is named on one line and the build starts over. Model-built LoCoMo banks
take hours on a CPU: a stop costs at most `every` manager steps.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from memjax.agents.memory_r1.construction import BuildResult, read_traces, traces_jsonl
from memjax.errors import DataFileError
from memjax.fingerprint import text_sha256
from memjax.memory.atomic import atomic_save, latest_snapshot
from memjax.memory.bank_io import read_bank, write_snapshot


class BuildCheckpoints:
    def __init__(self, root: Path, batch: Sequence[str], fingerprints: dict, every: int):
        key = text_sha256([[c, fingerprints[c]] for c in batch])[:16]
        self.directory = Path(root) / ".building" / key
        self.batch = list(batch)
        self.every = int(every)
        self.latency: dict[str, list[float]] = {}  # role -> seconds per item, as saved

    def load(self, streams: Sequence[Sequence], embedder) -> BuildResult | None:
        """The last saved state of this batch's construction, or None (nothing saved, or a
        save that cannot be read: named, and the build starts over)."""
        try:
            snapshot = latest_snapshot(self.directory)
        except FileNotFoundError:
            return None
        try:
            progress = json.loads((snapshot / "progress.json").read_text(encoding="utf-8"))
            banks = [read_bank(snapshot / f"bank-{i}", embedder) for i in range(len(streams))]
            traces = [read_traces(snapshot / f"trace-{i}.jsonl") for i in range(len(streams))]
            if [len(t) for t in traces] != [len(s) for s in streams]:
                raise ValueError("its traces do not cover the conversations' turns")
            counters, steps = Counter(progress["counters"]), int(progress["steps_done"])
            state = BuildResult(banks, traces, counters, steps)
            self.latency = {
                role: [float(s) for s in seconds] for role, seconds in progress["latency"].items()
            }
        except (OSError, ValueError, KeyError, TypeError, DataFileError) as err:
            print(f"banks: {snapshot} cannot be resumed ({err}); building from the start")
            return None
        print(
            f"banks: resuming {', '.join(self.batch)} after manager step {state.steps_done} "
            f"from {snapshot}",
            flush=True,
        )
        return state

    def save(self, state: BuildResult, latency: dict[str, list[float]]) -> None:
        """Saves the state after every `every`-th manager step (0: never), with the latencies
        of the calls that made it (role -> seconds per item), which `load` gives back."""
        if self.every <= 0 or state.steps_done % self.every:
            return
        progress = {
            "batch": self.batch,
            "steps_done": state.steps_done,
            "counters": dict(state.counters),
            "latency": latency,
        }

        def write(directory: Path) -> None:
            for i, (bank, traces) in enumerate(zip(state.banks, state.traces)):
                (directory / f"bank-{i}").mkdir()
                write_snapshot(bank.snapshot(), bank.dim, directory / f"bank-{i}")
                (directory / f"trace-{i}.jsonl").write_text(traces_jsonl(traces), encoding="utf-8")
            (directory / "progress.json").write_text(json.dumps(progress), encoding="utf-8")

        atomic_save(self.directory, write)

    def clear(self) -> None:
        """Removes the saves once the finished banks are written."""
        shutil.rmtree(self.directory, ignore_errors=True)
        parent = self.directory.parent
        if parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
