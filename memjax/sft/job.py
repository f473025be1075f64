"""The `sft.train` job: supervised fine-tuning of a decoder on chat trajectories.

    python -m memjax.launch --config=configs/sft_toy.py --workdir=/tmp/sft \
        --config.data.train=/data/trajectories.jsonl

Reads `config.data.train` (jsonl, `memjax.sft.trajectories`), holds out `config.data.eval` (or,
when that is empty, a deterministic `eval_fraction` of the trajectories by id hash, so no
trajectory is both trained on and evaluated), trains with `config.sft` and writes:
  workdir/checkpoints   orbax checkpoints (a killed run resumes where it stopped)
  workdir/tb            TensorBoard events;  workdir/loss_curve.png
  workdir/policy        the trained weights as an HF directory (with the tokenizer), so that
                        `--config.model.source=<workdir>` starts RL from them
  workdir/sft_summary.json
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

from memjax import workdir as workdir_lib
from memjax.errors import ConfigError
from memjax.memory.atomic import atomic_write_text
from memjax.sft.rows import trajectory_rows
from memjax.sft.run_config import SFTRunConfig
from memjax.sft.trajectories import read_trajectories


def held_out(trajectory_id: str, fraction: float) -> bool:
    """A stable choice by id: the same trajectory is held out on every machine and run."""
    h = int(hashlib.sha256(trajectory_id.encode()).hexdigest()[:8], 16)
    return h < fraction * 0x100000000


def select_roles(trajectories, roles: str, max_per_role: int) -> list:
    """The trajectories of the named roles ("" = all), at most `max_per_role` of each (0 = all),
    in file order."""
    wanted = {r.strip() for r in roles.split(",") if r.strip()}
    counts: dict[str, int] = {}
    out = []
    for t in trajectories:
        if wanted and t.role not in wanted:
            continue
        counts[t.role] = counts.get(t.role, 0) + 1
        if not max_per_role or counts[t.role] <= max_per_role:
            out.append(t)
    if not out:
        raise ConfigError(f"config.data.roles={roles!r}: no trajectory has these roles")
    return out


def oversample(trajectories, pattern: str, times: int) -> tuple[list, int]:
    """Each context whose trained text matches the regex `pattern` repeated `times` times in
    its trajectory (the rare decisions a teacher makes, e.g. a manager's UPDATE and DELETE, seen
    as often as the common ones); returns (trajectories, contexts that matched)."""
    if not pattern:
        return list(trajectories), 0
    if times < 1:
        raise ConfigError(f"config.data.oversample_times={times}: must be at least 1")
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise ConfigError(f"config.data.oversample={pattern!r}: not a regex ({e})") from None
    if times == 1:
        return list(trajectories), 0
    out, matched = [], 0
    for t in trajectories:
        contexts = []
        for context in t.contexts:
            hit = any(m.train and regex.search(m.content) for m in context)
            matched += hit
            contexts += [context] * (times if hit else 1)
        out.append(dataclasses.replace(t, contexts=tuple(contexts)))
    return out, matched


def oversampled(train, config_data) -> tuple[list, int]:
    """The training trajectories with `config_data.oversample`'s matches repeated
    `oversample_times` times (the held-out ones never are: their NLL stays an estimate over the
    data as written); returns (trajectories, contexts that matched)."""
    pattern = str(config_data.get("oversample", "") or "")
    return oversample(train, pattern, int(config_data.get("oversample_times", 1)))


def split_trajectories(config_data) -> tuple[list, list, str]:
    """(train, eval, how the eval set was chosen), restricted to `roles` / `max_per_role`."""
    roles = str(config_data.get("roles", "") or "")
    per_role = int(config_data.get("max_per_role", 0) or 0)
    train = select_roles(read_trajectories(config_data.train), roles, per_role)
    eval_path = str(config_data.get("eval", "") or "")
    if eval_path:
        held = select_roles(read_trajectories(eval_path), roles, per_role)
        return train, held, f"file {eval_path}"
    fraction = float(config_data.get("eval_fraction", 0.0))
    if not 0.0 <= fraction < 1.0:
        raise ConfigError(f"config.data.eval_fraction={fraction}: must be in [0, 1)")
    kept = [t for t in train if not held_out(t.id, fraction)]
    return kept, [t for t in train if held_out(t.id, fraction)], f"{fraction:.0%} by id hash"


def no_task_evaluation(config, model):
    """SFT alone evaluates the held-out trajectories' loss; an agent's own evaluation
    (`config.task_eval.kind`) comes with the agents' job, `memjax.agents.sft_job`."""
    section = config.get("task_eval")
    kind = str(section.kind) if section is not None else "none"
    if kind != "none":
        raise ConfigError(
            f"config.task_eval.kind={kind!r}: an agent's evaluation needs the sft.train job "
            "(memjax.agents.sft_job); choose none here"
        )
    return None


def data_spec(config_data) -> dict:
    """The training data's identity: resuming a workdir on other trajectories is refused."""
    from memjax.fingerprint import file_identity

    spec = {"data.train.sha256": file_identity(config_data.train)["sha256"]}
    for key in ("roles", "max_per_role", "eval", "eval_fraction"):
        spec[f"data.{key}"] = config_data.get(key, "")
    if config_data.get("oversample", ""):
        for key in ("oversample", "oversample_times"):
            spec[f"data.{key}"] = config_data.get(key)
    return spec


def train_job(config, workdir, task_evaluation=no_task_evaluation) -> dict:
    """Trains on `config.data`'s trajectories; `task_evaluation(config, model)` gives the
    agent's own evaluation run at every eval step (or None)."""
    from memjax.checkpoints import load_model
    from memjax.checkpoints.decoder_io import export_hf_decoder
    from memjax.sft.task import SFTTask
    from memjax.training.loop import run_loop
    from memjax.training.reporting import summary_line

    if not workdir:
        raise ConfigError("--workdir: required for sft.train (checkpoints, curves, weights)")
    rc = SFTRunConfig.from_section(config.sft, "config.sft")  # fails before anything loads
    train, held, how = split_trajectories(config.data)
    train, oversampled_contexts = oversampled(train, config.data)
    m = config.model
    dtypes = {"compute_dtype": str(m.compute_dtype)} if m.get("compute_dtype") else {}
    model = load_model(str(m.source), param_dtype=str(m.param_dtype), remat=str(m.remat), **dtypes)
    max_len = rc.batching.max_seq_len
    train_rows, train_counts = trajectory_rows(model.tokenizer, train, max_len)
    eval_rows, eval_counts = trajectory_rows(model.tokenizer, held, max_len)
    repeated = f" ({oversampled_contexts} contexts oversampled)" if oversampled_contexts else ""
    print(
        f"sft data: train {len(train)} trajectories{repeated} -> {train_counts}; "
        f"held out ({how}) {len(held)} -> {eval_counts}",
        flush=True,
    )
    task = SFTTask(
        rc,
        params=model.params,
        cfg=model.cfg,
        train_rows=train_rows,
        eval_rows=eval_rows,
        pad_id=model.tokenizer.pad_id,
        task_eval=task_evaluation(config, model),
        data_spec=data_spec(config.data),
    )
    result = run_loop(task, rc.loop, workdir)
    workdir = workdir_lib.path(workdir)  # a local folder or gs://
    if bool(config.get("export", True)):
        export_hf_decoder(
            task.exported_params(result["params"]),
            model.cfg,
            workdir / "policy",
            tokenizer=model.tokenizer,
        )
    summary = {
        "train": {
            "trajectories": len(train),
            "oversampled_contexts": oversampled_contexts,
            **train_counts,
        },
        "eval": {"trajectories": len(held), "chosen": how, **eval_counts},
        "epochs_planned": task.epochs,
        "history_tail": result["history"][-3:],
        "evals": result["evals"],
        "exported_step": result["exported_step"],
    }
    atomic_write_text(workdir / "sft_summary.json", json.dumps(summary, indent=1))
    print(summary_line(result), flush=True)
    return result


__all__ = ["train_job", "split_trajectories", "held_out", "oversample", "oversampled"]
