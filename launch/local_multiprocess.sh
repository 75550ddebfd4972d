#!/usr/bin/env bash
# N processes on this machine, joined by jax.distributed over 127.0.0.1 with gloo CPU collectives: a multi-host run
# rehearsed on one host (each process reads only its rows of every global batch). PYTHON picks the interpreter
# (e.g. PYTHON=.venv/bin/python).
#   launch/local_multiprocess.sh 2 experiments/dates_transformer.py runs/mp [--config.key=value ...]
set -euo pipefail
num=${1:?number of processes}; config=${2:?experiment file}; workdir=${3:?workdir}; shift 3
port=${PORT:-$((20000 + RANDOM % 20000))}
pids=()
for ((i = 0; i < num; i++)); do
  "${PYTHON:-python}" -m attnjax.train --config="$config" --workdir="$workdir" \
    --config.distributed.initialize=True --config.distributed.cpu_collectives=gloo \
    --config.distributed.coordinator_address="127.0.0.1:$port" \
    --config.distributed.num_processes="$num" --config.distributed.process_id="$i" "$@" &
  pids+=($!)
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null' INT TERM  # forwarded SIGTERM: every process checkpoints, then exits
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
exit $status
