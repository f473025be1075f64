#!/bin/bash
# A memjax job on a Cloud TPU VM slice: copy the repository to every worker, then run the same
# command on all of them (--worker=all). MEMJAX_DISTRIBUTED=auto makes each worker call
# jax.distributed.initialize(), which finds its peers through the TPU metadata server.
#
#   launch/tpu_vm.sh TPU_NAME ZONE CONFIG WORKDIR [--config.x=y ...]
#   DRY_RUN=1 launch/tpu_vm.sh memjax-v5p us-east5-a configs/grpo_qwen7b.py gs://b/g7 \
#       --config.hardware.accelerator=TPU-v5p --config.hardware.num_devices=8 --config.mesh.fsdp=-1
#
# Create the slice first with, for example:
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
REMOTE="~/$(basename "$REPO")"
ARGS=$(printf ' %q' "$@")

run() {
  echo "$*"
  if [ -z "${DRY_RUN:-}" ]; then
    "$@"
  fi
}
run gcloud compute tpus tpu-vm scp --recurse "$REPO" "$NAME:~/" --worker=all --zone="$ZONE"
run gcloud compute tpus tpu-vm ssh "$NAME" --zone="$ZONE" --worker=all \
  --command="cd $REMOTE && MEMJAX_DISTRIBUTED=auto python -m memjax.launch --config=$CONFIG --workdir=$WORKDIR$ARGS"
