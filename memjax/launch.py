"""The command-line entry point: one launcher, many jobs.

    python -m memjax.launch --config=configs/demo.py --workdir=/tmp/run \
        --config.model.source=/models/Qwen2.5-7B-Instruct

The config file's `get_config()` returns an `ml_collections.ConfigDict` whose `job` field names a
job in `memjax.jobs.JOBS`. Every field can be overridden with `--config.a.b=value`; the config is
locked, so a misspelt field is an error rather than a silent new field.
"""

from __future__ import annotations

import sys

from absl import app, flags, logging
from ml_collections import config_flags

from memjax import jobs

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Path to a config file (configs/NAME.py).", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for checkpoints, logs and reports.")


def _fail(message: str) -> None:
    print(f"memjax.launch: error: {message}", file=sys.stderr)
    sys.exit(2)


def main(argv) -> None:
    if len(argv) > 1:
        _fail(f"unexpected arguments {argv[1:]}; pass options as --config.x.y=value")
    config = _CONFIG.value
    if config is None:
        _fail("--config=configs/NAME.py is required")
    job_name = config.get("job")
    try:
        job = jobs.resolve(job_name)
    except jobs.UnknownJobError as e:
        _fail(str(e))
    logging.info("running job %s", job_name)
    job(config, _WORKDIR.value)


def run() -> None:
    try:
        app.run(main)
    except flags.Error as e:  # pragma: no cover - absl normally reports these itself
        _fail(str(e))


if __name__ == "__main__":
    run()
