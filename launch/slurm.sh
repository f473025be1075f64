#!/bin/bash
# A memjax job on a Slurm GPU cluster: memjax is pip-installed on every node (from this
# repository or a wheel, into a node-local virtualenv), then one task per GPU runs
# memjax.launch; JAX reads the Slurm step's environment (node list, task count, rank, local
# rank) to start its distributed runtime.
#
#   sbatch --nodes=2 launch/slurm.sh configs/memsearcher_qwen14b.py /ckpt/ms14b \
#       --config.model.source=/models/Qwen2.5-14B-Instruct
#   MEMJAX_WHEEL=/shared/memjax-0.1.0-py3-none-any.whl sbatch launch/slurm.sh CONFIG WORKDIR
#   DRY_RUN=1 bash launch/slurm.sh CONFIG WORKDIR      # print the commands only
#
# The repository (or wheel) must be on a filesystem the nodes share; what is installed is the
# package and its dependencies from the package index, never a copied virtualenv.
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

# Under sbatch the script runs from a spool copy: the repository is where it was submitted.
REPO=${MEMJAX_REPO:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "$0")/.." && pwd)}}
SOURCE=${MEMJAX_WHEEL:-$REPO}
VENV=${MEMJAX_VENV:-/tmp/memjax-venv-${SLURM_JOB_ID:-local}}
PYTHON=${PYTHON:-python3}
# XLA preallocates 75% of HBM by default; tools/plan_memory.py budgets 90% for arrays.
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.95}

INSTALL="$PYTHON -m venv $VENV && $VENV/bin/pip install --quiet '$SOURCE[cuda,gcs]'"
SETUP=(srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c "$INSTALL")
CMD=(srun --kill-on-bad-exit=1 --chdir="$REPO" "$VENV/bin/python" -m memjax.launch
  --config="$CONFIG" --workdir="$WORKDIR" "$@")
echo "${SETUP[*]}"
echo "${CMD[*]}"
if [ -z "${DRY_RUN:-}" ]; then
  "${SETUP[@]}"
  "${CMD[@]}"
fi
