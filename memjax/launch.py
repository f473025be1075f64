"""The command-line entry point: one launcher, many jobs.

    python -m memjax.launch --config=configs/demo.py --workdir=/tmp/run \
        --config.model.source=/models/Qwen2.5-7B-Instruct

The config file's `get_config()` returns an `ml_collections.ConfigDict` whose `job` field names a
job in `memjax.jobs.JOBS`. Every field can be overridden with `--config.a.b=value`; the config is
locked, so a misspelt field is an error rather than a silent new field.

`--dry_run` stops after the checks: it checks the inputs, plans memory and time on the config's
hardware, prints one summary and exits (2 when an input is missing or the plan does not fit;
`memjax.dry_run`).

Under a multi-process launcher (Slurm, a TPU pod, launch/*.sh) the launcher first starts JAX's
distributed runtime (`memjax.distributed`); on one host it starts nothing.

What a user reads is the job's own output. An error the user can fix (a `memjax.errors.UserError`:
a config field, a data file, a checkpoint or model path) is one line,
`memjax.launch: error: <file or field>: <what is wrong>`, exit status 2; `--debug` (or
MEMJAX_DEBUG=1) shows its traceback. Any other exception is a programming error and keeps its
traceback. The libraries' INFO logging (orbax, grain, jax) is dropped at the default verbosity;
`-v 1` (absl's `--verbosity`) or `--debug` brings it back.
"""

from __future__ import annotations

import os
import runpy
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from memjax import distributed, job_checks, jobs
from memjax.errors import UserError
from memjax.log_filter import LibraryFilter

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Path to a config file (configs/NAME.py).", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for checkpoints, logs and reports.")
_DRY_RUN = flags.DEFINE_bool(
    "dry_run",
    False,
    "Resolve and validate the config, check its inputs, plan its memory and time on the "
    "hardware it names, print one summary and exit (2 if it cannot start); loads nothing.",
)
_DEBUG = flags.DEFINE_bool(
    "debug",
    False,
    "Tracebacks for user errors and the libraries' INFO logs (also MEMJAX_DEBUG=1).",
)


def _fail(message: str) -> None:
    print(f"memjax.launch: error: {message}", file=sys.stderr)
    sys.exit(2)


def _debug() -> bool:
    return _DEBUG.value or os.environ.get("MEMJAX_DEBUG", "") not in ("", "0")


def _quiet_libraries() -> None:
    """Below `-v 1` the libraries' records under WARNING are dropped (memjax's all pass)."""
    if _debug() or flags.FLAGS.verbosity >= 1:
        return
    logging.get_absl_handler().addFilter(LibraryFilter())


def main(argv) -> None:
    _quiet_libraries()
    try:
        _launch(argv)
    except UserError as e:
        if _debug():
            raise
        _fail(str(e).replace("\n", " "))


def check(config):
    """The config's job, after its checks: bad values fail before anything loads (a
    UserError: an unknown job, a field out of range)."""
    job_name = config.get("job")
    job = jobs.resolve(job_name)
    job_checks.check_job_config(job_name, config)
    return job


def _launch(argv) -> None:
    if len(argv) > 1:
        _fail(f"unexpected arguments {argv[1:]}; pass options as --config.x.y=value")
    config = _CONFIG.value
    if config is None:
        _fail("--config=configs/NAME.py is required")
    job_name = config.get("job")
    job = check(config)
    jobs.check_workdir(job_name, _WORKDIR.value)  # gs:// without gcsfs: one line, no "gs:" dir
    if _DRY_RUN.value:
        from memjax import dry_run

        config_file = config_flags.get_config_filename(flags.FLAGS["config"])
        sys.exit(dry_run.run(config, config_file, _WORKDIR.value))
    # Every model's weights, then files, index, URL and workdir: as --dry_run checks them, so a
    # missing path is named by its field before any model loads or corpus is embedded.
    from memjax import input_checks  # loads the checkpoint readers: after the cheap checks

    missing = input_checks.check_weights(config)
    if missing:
        _fail(missing[0].line())
    job_checks.check_inputs(job_name, config, _WORKDIR.value)
    plan = distributed.maybe_initialize(config)  # DistributedConfigError is a UserError
    if plan is not None:
        # Every process runs the job; only process 0 speaks at INFO (metrics, progress).
        if not distributed.is_primary():
            logging.set_verbosity(logging.WARNING)
        logging.info("distributed (%s): %d processes", plan.source, distributed.process_count())
    logging.info("running job %s", job_name)
    job(config, _WORKDIR.value)


def _bad_override(argv: list[str]) -> str | None:
    """Names the first `--config.a.b=v` whose path does not exist, with the valid choices."""
    config_file = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), None)
    if config_file is None:
        return None
    try:
        config = runpy.run_path(config_file)["get_config"]()
    except Exception:  # the file itself is broken; absl's message says how
        return None
    for arg in argv:
        if not arg.startswith("--config."):
            continue
        path = arg[len("--config.") :].split("=", 1)[0].split(".")
        node = config
        for depth, key in enumerate(path):
            if not hasattr(node, "keys") or key not in node:
                where = ".".join(path[:depth]) or "the config"
                choices = ", ".join(sorted(node.keys())) if hasattr(node, "keys") else "none"
                return f"--config.{'.'.join(path)}: {where} has no field {key!r}; valid: {choices}"
            node = node[key]
    return None


def _parse_flags(argv: list[str]) -> list[str]:
    config_file = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), None)
    problem = config_file and job_checks.check_config_file(config_file)
    if problem:  # missing, not Python, no get_config: one line, not absl's traceback
        _fail(problem)
    try:
        return flags.FLAGS(argv)
    except (flags.Error, KeyError, AttributeError, TypeError, ValueError) as e:
        detail = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        _fail(_bad_override(argv) or str(detail).replace("\n", " "))


def run() -> None:
    app.run(main, flags_parser=_parse_flags)


if __name__ == "__main__":
    run()
