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
from collections.abc import Callable

from ml_collections import ConfigDict

from memjax import workdir as workdir_lib
from memjax.errors import ConfigError
from memjax.memory.atomic import atomic_write_text
from memjax.sft.rows import trajectory_rows
from memjax.sft.run_config import SFTRunConfig
from memjax.sft.trajectories import read_trajectories


@dataclasses.dataclass(frozen=True)
class SFTData:
    """`config.data`: the trajectories, the held-out choice and the oversampling. Ranges are
    checked where the values are used (`split_trajectories`, `oversample`)."""

    train: str  # trajectory jsonl
    eval: str = ""  # held-out trajectories; "" holds out `eval_fraction` of train by id hash
    eval_fraction: float = 0.0
    roles: str = ""  # "" = all
    max_per_role: int = 0  # 0 = all
    oversample: str = ""  # regex over trained text; "" = none
    oversample_times: int = 1
    # The resume key's fields as the config holds them (an absent one is ""): a workdir
    # resumes only on the same data, and its saved key must keep matching (see data_spec).
    identity: tuple[tuple[str, object], ...] = ()

    @classmethod
    def from_section(cls, data: ConfigDict) -> SFTData:
        keys = ("roles", "max_per_role", "eval", "eval_fraction")
        identity = [(f"data.{k}", data.get(k, "")) for k in keys]
        if data.get("oversample", ""):
            identity += [(f"data.{k}", data.get(k)) for k in ("oversample", "oversample_times")]
        return cls(
            train=str(data.train),
            eval=str(data.get("eval", "") or ""),
            eval_fraction=float(data.get("eval_fraction", 0.0)),
            roles=str(data.get("roles", "") or ""),
            max_per_role=int(data.get("max_per_role", 0) or 0),
            oversample=str(data.get("oversample", "") or ""),
            oversample_times=int(data.get("oversample_times", 1)),
            identity=tuple(identity),
        )


@dataclasses.dataclass(frozen=True)
class SFTModel:
    """`config.model`: the weights SFT starts from and their numerics."""

    source: str
    param_dtype: str
    remat: str
    compute_dtype: str | None = None

    @classmethod
    def from_section(cls, model: ConfigDict) -> SFTModel:
        compute = str(model.compute_dtype) if model.get("compute_dtype") else None
        return cls(str(model.source), str(model.param_dtype), str(model.remat), compute)


@dataclasses.dataclass(frozen=True)
class SFTJob:
    """The sft.train job's settings, read once from its config."""

    run: SFTRunConfig
    data: SFTData
    model: SFTModel
    export: bool = True  # write workdir/policy
    # `config.task_eval` as given (the agents' job, memjax.agents.sft_job, runs it).
    task_eval_kind: str = "none"
    task_eval_config: str = ""  # the agent's recipe config file
    task_eval_max_examples: int = 0

    @classmethod
    def from_config(cls, config: ConfigDict) -> SFTJob:
        rc = SFTRunConfig.from_section(config.sft, "config.sft")  # fails before anything loads
        task_eval = config.get("task_eval")
        if task_eval is None:
            task_eval = {"kind": "none"}
        return cls(
            run=rc,
            data=SFTData.from_section(config.data),
            model=SFTModel.from_section(config.model),
            export=bool(config.get("export", True)),
            task_eval_kind=str(task_eval["kind"]),
            task_eval_config=str(task_eval.get("config", "")),
            task_eval_max_examples=int(task_eval.get("max_examples", 0) or 0),
        )


# The agent's own evaluation for the loaded model (called at every eval step), or None.
TaskEvaluation = Callable[[SFTJob, object], object]


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


def oversampled(train, data: SFTData) -> tuple[list, int]:
    """The training trajectories with `data.oversample`'s matches repeated `oversample_times`
    times (the held-out ones never are: their NLL stays an estimate over the data as written);
    returns (trajectories, contexts that matched)."""
    return oversample(train, data.oversample, data.oversample_times)


def split_trajectories(data: SFTData) -> tuple[list, list, str]:
    """(train, eval, how the eval set was chosen), restricted to `roles` / `max_per_role`."""
    roles, per_role = data.roles, data.max_per_role
    train = select_roles(read_trajectories(data.train), roles, per_role)
    if data.eval:
        held = select_roles(read_trajectories(data.eval), roles, per_role)
        return train, held, f"file {data.eval}"
    fraction = data.eval_fraction
    if not 0.0 <= fraction < 1.0:
        raise ConfigError(f"config.data.eval_fraction={fraction}: must be in [0, 1)")
    kept = [t for t in train if not held_out(t.id, fraction)]
    return kept, [t for t in train if held_out(t.id, fraction)], f"{fraction:.0%} by id hash"


def no_task_evaluation(job: SFTJob, model):
    """SFT alone evaluates the held-out trajectories' loss; an agent's own evaluation
    (`config.task_eval.kind`) comes with the agents' job, `memjax.agents.sft_job`."""
    kind = job.task_eval_kind
    if kind != "none":
        raise ConfigError(
            f"config.task_eval.kind={kind!r}: an agent's evaluation needs the sft.train job "
            "(memjax.agents.sft_job); choose none here"
        )
    return None


def data_spec(data: SFTData) -> dict:
    """The training data's identity: resuming a workdir on other trajectories is refused."""
    from memjax.fingerprint import file_identity

    return {"data.train.sha256": file_identity(data.train)["sha256"], **dict(data.identity)}


def train_job(job: SFTJob, workdir, task_evaluation: TaskEvaluation = no_task_evaluation) -> dict:
    """Trains on `job.data`'s trajectories; `task_evaluation(job, model)` gives the agent's
    own evaluation run at every eval step (or None)."""
    from memjax.checkpoints import load_model
    from memjax.checkpoints.decoder_io import export_hf_decoder
    from memjax.sft.task import SFTTask
    from memjax.training.loop import run_loop
    from memjax.training.reporting import summary_line

    if not workdir:
        raise ConfigError("--workdir: required for sft.train (checkpoints, curves, weights)")
    rc = job.run
    train, held, how = split_trajectories(job.data)
    train, oversampled_contexts = oversampled(train, job.data)
    m = job.model
    dtypes = {"compute_dtype": m.compute_dtype} if m.compute_dtype else {}
    model = load_model(m.source, param_dtype=m.param_dtype, remat=m.remat, **dtypes)
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
        task_eval=task_evaluation(job, model),
        data_spec=data_spec(job.data),
    )
    result = run_loop(task, rc.loop, workdir)
    workdir = workdir_lib.path(workdir)  # a local folder or gs://
    if job.export:
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


__all__ = [
    "SFTData",
    "SFTJob",
    "SFTModel",
    "train_job",
    "split_trajectories",
    "held_out",
    "oversample",
    "oversampled",
]
