"""A job's inputs checked without loading them: the models' weights here, the rest through
`memjax.job_checks.check_inputs` (workdir, data files, corpus, index, retriever URL).

    missing = check_inputs(job, config, workdir)   # [Missing(field, value, problem), ...]

The weights check reads names only (a directory's config.json and safetensors files, a .gguf,
a packaged model), so `--dry_run` can run it on a laptop before a job is sent to the
accelerators.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from memjax.checkpoints import packaged, trained_policy_dir
from memjax.errors import CheckpointError

# Model sources that name no weights: the scripted policies of tests and the synthetic data's
# ground truth (memory_r1's `teacher.source=oracle`).
NOT_WEIGHTS = ("", "oracle", "scripted")


@dataclasses.dataclass(frozen=True)
class Missing:
    field: str  # dotted, as set on the command line: --config.<field>=...
    value: str
    problem: str

    def line(self) -> str:
        if not self.field:  # a message that names its own file, field or URL
            return self.problem
        return f"config.{self.field}={self.value!r}: {self.problem}; set --config.{self.field}"


def _walk(section, prefix: str = ""):
    """(dotted path, value) of every leaf of a ConfigDict / dict."""
    for key in section.keys():
        value = section[key]
        path = f"{prefix}{key}"
        if hasattr(value, "keys"):
            yield from _walk(value, f"{path}.")
        else:
            yield path, value


def weights_problem(source: str) -> str | None:
    """What is wrong with a model source ('packaged:NAME', an HF directory, a .gguf file, a
    training workdir with its exported policy/), or None. Reads names only."""
    if not source.startswith("packaged:") and not Path(source).expanduser().exists():
        return "no such file or directory"
    try:
        path = trained_policy_dir(packaged.resolve(source))
    except CheckpointError as e:  # not there, or an unknown packaged name
        return str(e)
    if path.is_file():
        return None if path.suffix == ".gguf" else "not a .gguf file or an HF directory"
    if not (path / "config.json").is_file():
        return f"{path} has no config.json (an HF checkpoint directory, or a training workdir)"
    if not any(path.glob("*.safetensors")):
        return f"{path} has no *.safetensors weights"
    return None


def check_weights(config) -> list[Missing]:
    """Every model a config names: `<section>.source` and `<section>.trained` fields (model,
    manager, answer, teacher, judge, facts, embedder, encoder, retriever.encoder, ...) and
    `tokenizer` fields (a model source whose tokenizer is read)."""
    out = []
    for path, value in _walk(config):
        name = path.rsplit(".", 1)[-1]
        if name not in ("source", "trained", "tokenizer") or not isinstance(value, str):
            continue
        if value in NOT_WEIGHTS or value.startswith("openai:"):  # no weights, or served remotely
            continue
        problem = weights_problem(value)
        if problem:
            out.append(Missing(path, value, problem))
    return sorted(out, key=lambda m: not m.field.startswith("model."))  # the base model first


def check_inputs(job: str, config, workdir: str | None = None) -> list[Missing]:
    """Every model's weights (all of them), then the job's other inputs as the launch checks
    them (`memjax.job_checks.check_inputs`: workdir, data files, corpus, index, retriever URL;
    the first problem)."""
    from memjax import job_checks
    from memjax.errors import UserError

    missing = check_weights(config)
    try:
        job_checks.check_inputs(job, config, workdir)
    except UserError as e:
        missing.append(Missing("", "", str(e).replace("\n", " ")))
    return missing


__all__ = ["Missing", "check_inputs", "check_weights", "weights_problem"]
