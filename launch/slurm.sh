#!/bin/bash
# A memjax job on a Slurm GPU cluster: one task per GPU, every task runs memjax.launch, and JAX
# reads the Slurm step's environment (node list, task count, rank, local rank) to start its
# distributed runtime; memjax.distributed detects the multi-task step.
#
#   sbatch --nodes=2 launch/slurm.sh configs/memsearcher_qwen14b.py /ckpt/ms14b \
#       --config.model.source=/models/Qwen2.5-14B-Instruct
#   DRY_RUN=1 bash launch/slurm.sh CONFIG WORKDIR      # print the srun command only
#
#SBATCH --job-name=memjax
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --exclusive
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: sbatch [--nodes=N] launch/slurm.sh CONFIG WORKDIR [--config.x=y ...]" >&2
  exit 2
fi
CONFIG=$1
WORKDIR=$2
shift 2

# XLA preallocates 75% of HBM by default; tools/plan_memory.py budgets 90% for arrays.
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.95}
CMD=(srun --kill-on-bad-exit=1 python -m memjax.launch --config="$CONFIG" --workdir="$WORKDIR" "$@")
echo "${CMD[*]}"
if [ -z "${DRY_RUN:-}" ]; then
  "${CMD[@]}"
fi
