"""One stage of a reproduction: a memjax job run by the launcher in a workdir of its own.

    stage = Stage("ms_sft", "configs/sft_cpu.py", ("data.train={ms_data}/trajectories.jsonl",))
    runner = StageRunner(root)          # stage workdirs are root/<name>
    runner.run(stage)                   # skipped when root/ms_sft/stage.json says it finished

A stage runs as its own process (`python -m memjax.launch`), so each job starts from a clean
JAX runtime and frees its memory when it ends, and a stage that dies takes nothing else with
it. `{name}` in an override is that stage's workdir. A stage that finished leaves
`stage.json` (its command and wall time, written atomically, and the fingerprints of the
finished stages it read; the wall time sums every attempt in `attempts.json`, a stopped one's
up to its log's last write); a rerun skips it when the command is the same and refuses, in one
line, when the workdir holds a run of another command or one that read an earlier stage's
outputs since rerun with other settings (a stale evaluation is never reported as new).
A stage that was stopped resumes: the jobs themselves continue from their checkpoints and
cached artefacts in the workdir.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import runpy
import subprocess
import sys
import time
from pathlib import Path

from memjax.errors import UserError
from memjax.fingerprint import text_sha256
from memjax.memory.atomic import atomic_write_text

REPO_ROOT = Path(__file__).resolve().parents[3]
DONE_FILE = "stage.json"
STAGE_REF = re.compile(r"\{(\w+)\}")  # "{ms_sft}" in an override: that stage's workdir
LOG_FILE = "stage.log"
ATTEMPTS_FILE = "attempts.json"  # each run of the stage: started, ended, exit status


class StageError(UserError):
    """A stage failed, or its workdir holds another command's run."""


@dataclasses.dataclass(frozen=True)
class Stage:
    name: str  # also its workdir's name under the reproduction's root
    config: str  # a config file, relative to the repository root
    overrides: tuple[str, ...] = ()  # "a.b=value"; "{other_stage}" is that stage's workdir
    report: str = (
        ""  # what its outputs are read as (memjax.experiments.reproduce.tables), "" for nothing
    )
    label: str = ""  # its row in the tables ("Memory-SFT"); the name when empty


class StageRunner:
    def __init__(self, root: str | Path, *, python: str = sys.executable, echo=print):
        self.root = Path(root)
        self.python = python
        self.echo = echo

    def workdir(self, name: str) -> Path:
        return self.root / name

    def command(self, stage: Stage) -> list[str]:
        """The launcher's argv (without the interpreter) with every `{stage}` resolved."""
        args = [f"--config={REPO_ROOT / stage.config}", f"--workdir={self.workdir(stage.name)}"]
        args += [f"--config.{self._resolve(o)}" for o in stage.overrides]
        return ["-m", "memjax.launch", *args]

    def _resolve(self, override: str) -> str:
        return STAGE_REF.sub(lambda m: str(self.workdir(m.group(1))), override)

    def check(self, stage: Stage) -> None:
        """Every override names a field of the stage's config file (before anything runs, so
        a misspelt field fails the reproduction at its start, not hours in)."""
        config = _load_config(REPO_ROOT / stage.config)
        for override in stage.overrides:
            path = override.split("=", 1)[0].split(".")
            node = config
            for depth, key in enumerate(path):
                if not hasattr(node, "keys") or key not in node:
                    where = ".".join(path[:depth]) or stage.config
                    raise StageError(
                        f"stage {stage.name}: {stage.config} has no field "
                        f"{'.'.join(path)!r} ({where} has no {key!r})"
                    )
                node = node[key]

    def finished(self, stage: Stage) -> dict | None:
        """The stage's record when it finished with this command; None when it has not run
        (or stopped part-way). A finished run of another command is refused."""
        done = self.workdir(stage.name) / DONE_FILE
        if not done.exists():
            return None
        record = json.loads(done.read_text())
        if record.get("stage_sha256") != _stage_sha256(stage):
            raise StageError(
                f"{done}: stage {stage.name} finished with another command "
                f"({' '.join(record.get('command', []))}); remove {done.parent} to rerun it"
            )
        read = self.upstream(stage)
        changed = [n for n, sha in record.get("upstream", read).items() if read.get(n) != sha]
        if changed:
            raise StageError(
                f"{done}: stage {stage.name} read the outputs of {', '.join(changed)}, since "
                f"removed or run again with other settings; remove {done.parent} to rerun it"
            )
        return record

    def upstream(self, stage: Stage) -> dict[str, str]:
        """{finished earlier stage it reads: that stage's fingerprint}. Shared folders that no
        stage runs (the corpus, the banks) have no fingerprint of their own."""
        names = sorted({n for o in stage.overrides for n in STAGE_REF.findall(o)})
        done = {name: self.workdir(name) / DONE_FILE for name in names}
        return {
            name: json.loads(path.read_text()).get("stage_sha256")
            for name, path in done.items()
            if path.exists()
        }

    def run(self, stage: Stage) -> dict:
        """Runs the stage unless it finished; returns its record (command, wall time)."""
        record = self.finished(stage)
        if record is not None:
            self.echo(f"{stage.name}: finished earlier ({record['wall_s']:.0f} s), skipped")
            return record
        workdir = self.workdir(stage.name)
        workdir.mkdir(parents=True, exist_ok=True)
        command = self.command(stage)
        self.echo(f"{stage.name}: running, log in {workdir / LOG_FILE}")
        attempts = _begin_attempt(workdir)
        with open(workdir / LOG_FILE, "a") as log:
            log.write(f"\n$ python {' '.join(command)}\n")
            log.flush()
            code = subprocess.call(
                [self.python, *command],
                cwd=REPO_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        attempts[-1] |= {"ended": time.time(), "exit": code}
        atomic_write_text(workdir / ATTEMPTS_FILE, json.dumps(attempts, indent=1))
        last_s = attempts[-1]["ended"] - attempts[-1]["started"]
        if code != 0:
            raise StageError(
                f"stage {stage.name} exited with status {code} after {last_s:.0f} s: "
                f"{_last_line(workdir / LOG_FILE)} (log: {workdir / LOG_FILE})"
            )
        wall_s = sum(a["ended"] - a["started"] for a in attempts)
        record = {
            "stage": stage.name,
            "command": command,
            "stage_sha256": _stage_sha256(stage),
            "upstream": self.upstream(stage),
            "wall_s": wall_s,  # every attempt's, a stopped one's to its log's last write
            "attempts": len(attempts),
            "last_attempt_wall_s": last_s,
        }
        atomic_write_text(workdir / DONE_FILE, json.dumps(record, indent=1))
        over = f" over {len(attempts)} attempts" if len(attempts) > 1 else ""
        self.echo(f"{stage.name}: done in {wall_s:.0f} s{over}")
        return record


@functools.cache
def _load_config(path: Path):
    return runpy.run_path(str(path))["get_config"]()


def _begin_attempt(workdir: Path) -> list[dict]:
    """The stage's attempts so far with a new one begun (saved). An attempt that was stopped
    (killed, machine gone) never wrote its end: it ended when its job last wrote to the log,
    which the job does every step, so a stopped stage's time is counted, not lost."""
    path = workdir / ATTEMPTS_FILE
    attempts = json.loads(path.read_text()) if path.is_file() else []
    log = workdir / LOG_FILE
    for attempt in attempts:
        if attempt.get("ended") is None:
            stopped = log.stat().st_mtime if log.is_file() else attempt["started"]
            attempt |= {"ended": max(stopped, attempt["started"]), "exit": "stopped"}
    attempts.append({"started": time.time(), "ended": None, "exit": None})
    atomic_write_text(path, json.dumps(attempts, indent=1))
    return attempts


def _stage_sha256(stage: Stage) -> str:
    """What the stage runs, independent of where the repository and the root are."""
    return text_sha256({"config": stage.config, "overrides": list(stage.overrides)})


def _last_line(log: Path) -> str:
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    return next((line for line in reversed(lines) if line), "(empty log)")[-300:]


__all__ = [
    "Stage",
    "StageRunner",
    "StageError",
    "REPO_ROOT",
    "DONE_FILE",
    "LOG_FILE",
    "ATTEMPTS_FILE",
]
