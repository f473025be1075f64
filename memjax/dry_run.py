"""`python -m memjax.launch ... --dry_run`: what a job would need and cost, without running it.

    python -m memjax.launch --config=configs/grpo_qwen7b.py --workdir=/tmp/x --dry_run

The config is resolved and validated as a real launch would (overrides, the job's checks), its
inputs are checked (`memjax.input_checks`: weights, data files, corpus, index, retriever URL),
and a config that names hardware is planned for it (`memjax.planning`: memory per device) and
timed by the roofline of its FLOPs and bytes on that hardware's published peaks
(`memjax.roofline`). One summary is printed; then, if an input is missing or the plan does not
fit, one line naming what to change, and the exit status is 2. Nothing is loaded or built.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from memjax import hardware as hw_lib
from memjax import input_checks, planning
from memjax.errors import ConfigError

GIB = hw_lib.GIB


@dataclasses.dataclass
class Summary:
    lines: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    failure: str = ""  # the one line that makes the dry run exit 2

    def add(self, label: str, text: str) -> None:
        self.lines.append((label, text))

    def fail(self, line: str) -> None:
        self.failure = self.failure or line

    def render(self, title: str) -> str:
        width = max(len(label) for label, _ in self.lines)
        return "\n".join([title] + [f"  {k:<{width}}  {v}" for k, v in self.lines])


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for line in f if line.strip())


def _training_questions(config) -> int | None:
    """MemSearcher's training questions, counted in its data files (None: a file is missing).
    A file also named for evaluation keeps 1 - data.shared_file_eval_fraction of its lines."""
    data = config.get("data")
    train = data.get("train") if data is not None else None
    if not hasattr(train, "keys"):
        return None
    evaluated = set(dict(data.get("eval") or {}).values())
    total = 0
    for path in train.values():
        file = Path(str(path)).expanduser()
        if not file.is_absolute() and not file.is_file():
            file = Path(__file__).resolve().parents[1] / file
        if not file.is_file():
            return None
        n = _count_lines(file)
        if path in evaluated:
            n = int(n * (1 - float(data.get("shared_file_eval_fraction", 0.0))))
        total += n
    return total


def _steps(config, f: planning.JobFields) -> tuple[int | None, str]:
    if f.num_steps:
        return f.num_steps, f"{f.num_steps}"
    epochs = int(config.train.get("total_epochs", 1))
    questions = _training_questions(config)
    if questions is None:
        return None, f"{epochs} epoch(s) over data.train (not counted: a file is missing)"
    steps = max(1, epochs * questions // f.prompts_per_step)
    return steps, f"{steps} ({epochs} epoch(s) over {questions:,} training questions)"


def _plan_lines(config, out: Summary) -> None:
    """Hardware, mesh, batch, steps, tokens, memory and time of a config that names hardware."""
    from memjax.roofline import step_roofline

    problems = planning.validate(config)
    if problems:
        out.add("plan", problems[0])
        out.fail(f"config: {problems[0]}")
        return
    f = planning.job_fields(config)
    plan = planning.plan_memory(config)
    w = plan.workload
    hw = w.hardware
    out.add("hardware", f"{hw.describe()} ({hw.num_hosts} host(s))")
    out.add(
        "mesh", " x ".join(f"{a} {s}" for a, s in w.mesh.items()) + f"  (config.{f.paths['mesh']})"
    )
    contexts = 1
    if "agent" in config and "max_turns_train" in config.agent and "rl" not in config:
        contexts = int(config.agent.max_turns_train)  # a context row per turn, at most
    rows = f.prompts_per_step * f.group_size
    micro = planning.micro_batches_for(
        f.mini_batch_rows, w.micro_batch_per_device, w.mesh, hw.num_devices
    )
    updates = max(1, rows * contexts // max(1, f.mini_batch_rows))
    out.add(
        "effective batch",
        f"{f.prompts_per_step} prompts x {f.group_size} rollouts = {rows} trajectories per step"
        + (f" (up to {contexts} context rows each)" if contexts > 1 else "")
        + f"; {'up to ' if contexts > 1 else ''}{updates} update(s) of {f.mini_batch_rows} rows, "
        f"each in {micro} micro-batches of {w.micro_batch_per_device} row(s) per device",
    )
    steps, steps_text = _steps(config, f)
    out.add("steps", steps_text)
    est = step_roofline(plan, f, contexts)
    out.add(
        "tokens per step", f"{est.tokens:,} ({est.rows:,} rows x {w.seq_len:,} tokens, at most)"
    )
    peak_phase = max(
        (("rollout", plan.rollout), ("log-prob", plan.logprobs), ("train", plan.train)),
        key=lambda kv: kv[1],
    )[0]
    out.add(
        "memory/device",
        f"{plan.peak / GIB:.1f} GiB of {plan.usable / GIB:.1f} usable (peak in the {peak_phase} "
        f"phase): {'fits' if plan.fits else 'DOES NOT FIT'}",
    )
    phases = ", ".join(f"{k} {_duration(v)}" for k, v in est.phases.items())
    out.add(
        "time per step", f"{_duration(est.step_s)} at best (roofline on published peaks: {phases})"
    )
    out.add(
        "whole run",
        f"{_duration(est.step_s * steps)} at best ({steps} steps)" if steps else "unknown",
    )
    paper = planning.paper_hardware_plan(config)
    if paper is not None:
        out.add(
            "paper's hardware",
            f"{paper.workload.hardware.describe()}: {paper.peak / GIB:.1f} GiB at best, "
            + ("fits" if paper.fits else "does not fit; this config is sized for more devices"),
        )
    if not plan.fits:
        steps_to_fit, after = planning.suggest(w)
        change = " ".join(o for _, o in steps_to_fit) if after.fits else "a larger accelerator"
        out.fail(
            f"config.hardware: the plan needs {plan.peak / GIB:.1f} GiB per device of "
            f"{plan.usable / GIB:.1f} usable on {hw.describe()}; change: {change}"
        )


def _local_lines(config, out: Summary) -> None:
    """A config that names no hardware runs on the local devices, sized by its own fields."""
    out.add("hardware", "none named: the local devices (no memory plan)")
    trainer = config.get("rl", config)
    if "prompts_per_step" in trainer and "group_size" in trainer:
        rows = int(trainer.prompts_per_step) * int(trainer.group_size)
        out.add(
            "effective batch",
            f"{trainer.prompts_per_step} prompts x {trainer.group_size} rollouts = {rows} rows "
            f"per step, {trainer.get('micro_batches', 1)} micro-batch(es)",
        )
        out.add("steps", f"{trainer.get('num_steps', '?')}")
        if "seq_len" in trainer:
            out.add("tokens per step", f"{rows * int(trainer.seq_len):,} (at most)")
    elif "sft" in config:
        out.add(
            "effective batch",
            f"{config.sft.batch_rows} rows per update, {config.sft.micro_batches} micro-batch(es)",
        )
        out.add("steps", f"{config.sft.num_steps}")


def run(config, config_file: str, workdir: str | None) -> int:
    """Prints the summary and, if the job cannot start, the one line; returns the exit status."""
    job = str(config.get("job"))
    out = Summary()
    out.add("job", job)
    model = config.get("model")
    if model is not None and "preset" in model:
        out.add("model", str(model.preset))
    out.add("workdir", str(workdir or "(none)"))
    try:
        if "hardware" in config:
            _plan_lines(config, out)
        else:
            _local_lines(config, out)
    except (planning.PlanError, hw_lib.HardwareError, ConfigError) as e:
        out.add("plan", str(e))
        out.fail(f"config: {e}")
    missing = input_checks.check_inputs(job, config, workdir)
    out.add("inputs", "all present" if not missing else f"{len(missing)} missing")
    for m in missing:
        out.add("", m.line())
    print(out.render(f"dry run of {config_file}"), flush=True)
    if missing:
        out.failure = missing[0].line() + (
            f" (and {len(missing) - 1} more above)" if len(missing) > 1 else ""
        )
    if out.failure:
        print(f"memjax.launch: error: {out.failure}", file=sys.stderr, flush=True)
        return 2
    return 0


__all__ = ["run"]
