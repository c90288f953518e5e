#!/usr/bin/env bash
# A synthetic model saved with --save-checkpoint and loaded back must give a bit-identical run
# (tokens and every activation equal: tripar diff with zero tolerance), here on a 4-rank mesh.
# usage: checkpoint_roundtrip.sh JOB WORKDIR
set -euo pipefail
: "${TRIPAR_BIN:?}"
job=$1 work=$2
MPIEXEC=${MPIEXEC:-mpiexec}
mkdir -p "$work"
run() { "$MPIEXEC" -n 4 --oversubscribe "$TRIPAR_BIN" run "$@" >>"$work/log" 2>&1 || { cat "$work/log"; exit 1; }; }
run "$job" --out "$work/synthetic.h5" --set parallel.tp=2 --set parallel.pp=2 \
    --save-checkpoint "$work/saved.h5"
run "$job" --out "$work/reloaded.h5" --set parallel.tp=2 --set parallel.pp=2 \
    --set model.checkpoint="$work/saved.h5"
"$TRIPAR_BIN" diff "$work/synthetic.h5" "$work/reloaded.h5" --rtol 0 --atol 0
