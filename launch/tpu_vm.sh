#!/bin/bash
# A memjax job on a Cloud TPU VM slice: build this repository's wheel, copy the wheel and
# configs/ to every worker, pip-install it there (with jax[tpu] and gcsfs), then run the same
# command on all workers (--worker=all). MEMJAX_DISTRIBUTED=auto makes each worker call
# jax.distributed.initialize(), which finds its peers through the TPU metadata server.
#
#   launch/tpu_vm.sh TPU_NAME ZONE CONFIG WORKDIR [--config.x=y ...]
#   DRY_RUN=1 launch/tpu_vm.sh memjax-v5p us-east5-a configs/grpo_qwen7b.py gs://b/g7 \
#       --config.hardware.accelerator=TPU-v5p --config.hardware.num_devices=8 --config.mesh.fsdp=-1
#
# Only the wheel and configs/ travel (never the checkout's .venv, data or workdirs). Create the
# slice first with, for example:
#   gcloud compute tpus tpu-vm create memjax-v5p --zone=us-east5-a \
#       --accelerator-type=v5p-16 --version=v2-alpha-tpuv5
set -euo pipefail

if [ $# -lt 4 ]; then
  echo "usage: launch/tpu_vm.sh TPU_NAME ZONE CONFIG WORKDIR [--config.x=y ...]" >&2
  exit 2
fi
NAME=$1
ZONE=$2
CONFIG=$3
WORKDIR=$4
shift 4
REPO=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
if [ -z "${STAGE:-}" ]; then
  if [ -n "${DRY_RUN:-}" ]; then STAGE=/tmp/memjax-tpu-stage; else STAGE=$(mktemp -d -t memjax-tpu-XXXXXX); fi
fi
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO/pyproject.toml")
WHEEL=memjax-$VERSION-py3-none-any.whl
REMOTE=memjax
ARGS=$(printf ' %q' "$@")

run() {
  echo "$*"
  if [ -z "${DRY_RUN:-}" ]; then
    "$@"
  fi
}
run "$PYTHON" -m pip wheel --no-deps --quiet -w "$STAGE/$REMOTE" "$REPO"
run cp -r "$REPO/configs" "$STAGE/$REMOTE/configs"
run gcloud compute tpus tpu-vm scp --recurse "$STAGE/$REMOTE" "$NAME:~/" --worker=all --zone="$ZONE"
run gcloud compute tpus tpu-vm ssh "$NAME" --zone="$ZONE" --worker=all \
  --command="cd ~/$REMOTE && python3 -m pip install --quiet './$WHEEL[tpu,gcs]'"
run gcloud compute tpus tpu-vm ssh "$NAME" --zone="$ZONE" --worker=all \
  --command="cd ~/$REMOTE && MEMJAX_DISTRIBUTED=auto python3 -m memjax.launch --config=$CONFIG --workdir=$WORKDIR$ARGS"
