"""The `reproduce.run` job: every stage of the chosen papers in order, then the tables.

    python -m memjax.launch --config=configs/reproduce_cpu.py --workdir=/tmp/memjax_reproduce

Writes <workdir>/reproduction.md and .json (the Memory-R1 and MemSearcher tables, each row
naming its stage; every stage's wall time) and <workdir>/plots/<stage>.png (the SFT loss and
GRPO reward curves), and prints the tables at the end.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import shutil
from pathlib import Path

from memjax.errors import ConfigError
from memjax.experiments.reproduce import tables
from memjax.experiments.reproduce.pipelines import memory_r1_stages, memsearcher_stages
from memjax.experiments.reproduce.stages import Stage, StageError, StageRunner
from memjax.memory.atomic import atomic_write_text
from memjax.training.reporting import CURVES_FILE

PAPERS = ("memsearcher", "memory_r1")
CURVES = {"sft": "loss_curve.png", "rl_curve": "reward_curve.png"}


def plan(config) -> list[Stage]:
    """Every stage of the configured papers, in the order they run."""
    papers = _names(config.papers, "config.papers", PAPERS)
    seeds = tuple(int(s) for s in _names(config.grpo_seeds, "config.grpo_seeds"))
    if not seeds:
        raise ConfigError("config.grpo_seeds: name at least one seed (e.g. '0,1')")
    source = str(config.model_source)
    stages: list[Stage] = []
    if "memsearcher" in papers:
        stages += memsearcher_stages(config.memsearcher, source, seeds)
    if "memory_r1" in papers:
        stages += memory_r1_stages(config.memory_r1, source, seeds)
    extra = _extra_overrides(str(config.extra))
    return [dataclasses.replace(s, overrides=s.overrides + _matching(extra, s)) for s in stages]


def _extra_overrides(value: str) -> list[tuple[str, str]]:
    """`config.extra`: "PATTERN:field=value;..." -> [(pattern, override)]; a pattern is a
    shell glob over stage names ("mr1_eval_*", "*")."""
    out = []
    for entry in (e.strip() for e in value.split(";")):
        if not entry:
            continue
        pattern, sep, override = entry.partition(":")
        if not sep or "=" not in override:
            raise ConfigError(f"config.extra: {entry!r} is not 'STAGE_GLOB:field=value'")
        out.append((pattern.strip(), override.strip()))
    return out


def _matching(extra: list[tuple[str, str]], stage: Stage) -> tuple[str, ...]:
    return tuple(o for pattern, o in extra if fnmatch.fnmatchcase(stage.name, pattern))


def selected(stages: list[Stage], names: str) -> list[Stage]:
    if not str(names).strip():
        return stages
    known = [s.name for s in stages]
    wanted = _names(names, "config.stages", known)
    return [s for s in stages if s.name in wanted]


def reproduce_job(config, workdir) -> None:
    if not workdir:
        raise ConfigError("--workdir: reproduce.run needs a directory")
    root = Path(workdir)
    runner = StageRunner(root)
    stages = plan(config)
    chosen = selected(stages, config.stages)
    for stage in stages:
        runner.check(stage)
    for i, stage in enumerate(chosen):
        print(f"[{i + 1}/{len(chosen)}] ", end="", flush=True)
        runner.run(stage)
    report = build_report(stages, runner, str(config.judge))
    atomic_write_text(root / "reproduction.json", json.dumps(report["json"], indent=1))
    atomic_write_text(root / "reproduction.md", report["markdown"])
    print(report["markdown"], flush=True)


def build_report(stages: list[Stage], runner: StageRunner, judge: str) -> dict:
    """The tables of the finished stages (an unfinished one is listed as such, and so is a stale
    one: finished with other settings or over since-changed inputs, left out of the tables)."""
    finished, stale = {}, {}
    for s in stages:
        try:
            finished[s.name] = runner.finished(s)
        except StageError as e:  # only the stages this run did not run can be stale here
            finished[s.name] = None
            stale[s.name] = str(e)
            runner.echo(f"{s.name}: left out of the report: {e}")
    done = [s for s in stages if finished[s.name] is not None]
    mr1, locomo = (  # held-out synthetic conversations; whole LoCoMo test conversations
        [tables.memory_r1_row(_label(s), runner.workdir(s.name)) for s in done if s.report == kind]
        for kind in ("memory_r1_eval", "memory_r1_locomo")
    )
    ms = [
        row
        for s in done
        if s.report == "memsearcher_eval"
        for row in tables.memsearcher_rows(_label(s), runner.workdir(s.name))
    ]
    plots = _copy_curves(done, runner)
    curves = _curves(done, runner)
    walls = {s.name: (finished[s.name] or {}).get("wall_s") for s in stages}
    paired = _against_sft(done, runner)
    one_part = {kind: _one_part_apart(done, runner, kind) for kind in ONE_PART_APART}
    parts = ["# Reproduction", ""]
    if mr1:
        parts += ["## Memory-R1 (Table 1 shape)", "", tables.memory_r1_markdown(mr1, judge)]
        parts += [tables.paired_markdown(paired["memory_r1"])]
        parts += [tables.paired_markdown(one_part["memory_r1"])]
    if locomo:
        parts += ["## Memory-R1 on LoCoMo, model-built banks", ""]
        parts += [tables.memory_r1_markdown(locomo, judge)]
        parts += [tables.paired_markdown(paired["memory_r1_locomo"])]
        parts += [tables.paired_markdown(one_part["memory_r1_locomo"])]
    if ms:
        parts += ["## MemSearcher", "", tables.memsearcher_markdown(ms)]
        parts += [tables.paired_markdown(paired["memsearcher"])]
    if curves:
        parts += ["## Training curves", "", tables.curves_markdown(curves)]
    parts += ["## Stages", "", "| stage | wall time |", "|---|---:|"]
    parts += [
        f"| {n} | {'stale, left out' if n in stale else _wall(w)} |" for n, w in walls.items()
    ]
    # The sum of the stages' own times: a stopped-and-resumed reproduction is not one wall.
    total = sum(w for w in walls.values() if w is not None)
    parts += [f"| all finished stages | {_wall(total)} |"]
    if plots:
        parts += ["", "Curves: " + ", ".join(f"plots/{p}" for p in plots)]
    body = {"memory_r1": mr1, "memory_r1_locomo": locomo, "memsearcher": ms}
    body |= {"against_sft": paired, "curves": curves}
    body["one_part_apart"] = one_part
    body["stale"] = stale
    body |= {"wall_s": walls, "total_wall_s": total, "plots": plots}
    return {"markdown": "\n".join(parts) + "\n", "json": body}


# The stage each paper's trained rows are held against, and what reads its per-question scores.
SFT_EVALS = {
    "memory_r1": "mr1_eval_sft",
    "memory_r1_locomo": "mr1_locomo_sft",
    "memsearcher": "ms_eval_sft",
}
EVAL_REPORTS = {
    "memory_r1": "memory_r1_eval",
    "memory_r1_locomo": "memory_r1_locomo",
    "memsearcher": "memsearcher_eval",
}
SCORES = {
    "memory_r1": tables.memory_r1_scores,
    "memory_r1_locomo": tables.memory_r1_scores,
    "memsearcher": tables.memsearcher_scores,
}


def _against_sft(done: list[Stage], runner: StageRunner) -> dict[str, list[dict]]:
    """Every finished RL evaluation minus the SFT evaluation, question by question."""
    out = {}
    for paper, sft in SFT_EVALS.items():
        evals = [s for s in done if s.report == EVAL_REPORTS[paper]]
        reference = next((s for s in evals if s.name == sft), None)
        trained = [s for s in evals if _is_rl(s.name)]
        if reference is None or not trained:
            out[paper] = []
            continue
        scores = SCORES[paper]
        out[paper] = tables.paired_rows(
            (_label(reference), scores(runner.workdir(reference.name))),
            [(_label(s), scores(runner.workdir(s.name))) for s in trained],
        )
    return out


# The Memory-R1 reports (synthetic conversations, LoCoMo) whose RL rows are also held against
# the row one part away from them.
ONE_PART_APART = ("memory_r1", "memory_r1_locomo")


def _one_part_apart(done: list[Stage], runner: StageRunner, paper: str) -> list[dict]:
    """Each finished Memory-R1 RL evaluation of `paper` minus the one it differs from in a
    single part, over the same banks: both agents trained against the trained manager with the
    SFT answer agent (the answer agent's RL alone); without distillation against with it."""
    by_name = {s.name: s for s in done if s.report == EVAL_REPORTS[paper]}
    scores = SCORES[paper]
    rows = []
    for name, stage in by_name.items():
        if name.endswith("_manager") or not _is_rl(name):
            continue
        ablated = name.endswith("_no_distill")
        reference = by_name.get(name.removesuffix("_no_distill") if ablated else name + "_manager")
        if reference is not None:
            rows += tables.paired_rows(
                (_label(reference), scores(runner.workdir(reference.name))),
                [(_label(stage), scores(runner.workdir(name)))],
            )
    return rows


def _is_rl(stage_name: str) -> bool:
    return any(f"_{algo}_" in f"{stage_name}_" for algo in ("grpo", "ppo"))


def _curves(done: list[Stage], runner: StageRunner) -> list[dict]:
    """Each finished training stage's curve and evaluations, from the numbers beside its plot."""
    training = [s for s in done if s.report in CURVES]
    rows = [tables.curve_row(s.name, runner.workdir(s.name), CURVES_FILE) for s in training]
    return [row for row in rows if row is not None]


def _copy_curves(done: list[Stage], runner: StageRunner) -> list[str]:
    out = []
    for stage in done:
        curve = runner.workdir(stage.name) / CURVES.get(stage.report, "-")
        if curve.is_file():
            target = runner.root / "plots" / f"{stage.name}.png"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(curve, target)
            out.append(target.name)
    return out


def _label(stage: Stage) -> str:
    return stage.label or stage.name


def _wall(seconds) -> str:
    return "not finished" if seconds is None else f"{seconds / 60:.1f} min"


def _names(value, field: str, allowed=None) -> list[str]:
    names = [v.strip() for v in str(value).split(",") if v.strip()]
    unknown = [n for n in names if allowed is not None and n not in allowed]
    if unknown:
        raise ConfigError(f"{field}={value!r}: unknown {unknown}; valid: {', '.join(allowed)}")
    return names


__all__ = ["reproduce_job", "plan", "selected", "build_report"]
