#!/usr/bin/env bash
# Train on every worker of a Cloud TPU VM slice. jax.distributed.initialize() discovers the coordinator and process
# ids from the TPU environment, so only `initialize=True` is passed; the mesh takes all chips (-1).
#   launch/tpu_vm.sh my-tpu us-central2-b experiments/dates_transformer.py gs://bucket/runs/t [--config.key=value ...]
set -euo pipefail
tpu=${1:?TPU name}; zone=${2:?zone}; config=${3:?experiment file}; workdir=${4:?workdir (a gs:// path)}; shift 4
gcloud compute tpus tpu-vm ssh "$tpu" --zone="$zone" --worker=all --command="
  cd ~/attnjax && pip install -q -e . 'jax[tpu]' &&
  python -m attnjax.train --config=$config --workdir=$workdir --config.distributed.initialize=True $*"
