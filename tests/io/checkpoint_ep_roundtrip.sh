#!/usr/bin/env bash
# Expert parallelism and checkpoints (docs/jobs.md, "Expert parallelism"): a mixture-of-experts
# model saved from an expert-parallel mesh (tp 4, ep 2: each rank holds 3 of the 6 experts of
# every layer, each tensor-split over 2 ranks) holds the global tensors (a reload with ep 1
# gives the synthetic run), and loaded on other expert-parallel meshes (tp 2 x pp 2 with ep 2;
# tp 4 with ep 2) each rank reads only its own experts: every run is bit-identical to the
# synthetic model on its mesh (tripar diff with zero tolerance). Two reloads read in small
# parts (TRIPAR_LOAD_CHUNK_BYTES): 61440 bytes are two experts' gate|up rows at tp 2 x ep 2,
# so a part crosses from one layer's run of 3 experts into the next; 1 byte reads one row.
# usage: checkpoint_ep_roundtrip.sh JOB WORKDIR [KEY=VALUE...] (more --set options)
set -euo pipefail
: "${TRIPAR_BIN:?}"
job=$1 work=$2
shift 2
MPIEXEC=${MPIEXEC:-mpiexec}
mkdir -p "$work"
: >"$work/log"
opts=()
for kv in "$@"; do opts+=(--set "$kv"); done
run() { "$MPIEXEC" -n 4 --oversubscribe "$TRIPAR_BIN" run "$job" "${opts[@]}" "$@" >>"$work/log" 2>&1 || { cat "$work/log"; exit 1; }; }
run --out "$work/saver.h5" --set parallel.tp=4 --set parallel.ep=2 --save-checkpoint "$work/saved.h5"
for mesh in "tp=4 pp=1 ep=1 0" "tp=2 pp=2 ep=2 61440" "tp=4 pp=1 ep=2 1"; do
    set -- $mesh
    sets=(--set parallel.$1 --set parallel.$2 --set parallel.$3)
    run --out "$work/synthetic.h5" "${sets[@]}"
    if [ "$4" = 0 ]; then unset TRIPAR_LOAD_CHUNK_BYTES; else export TRIPAR_LOAD_CHUNK_BYTES=$4; fi
    run --out "$work/reloaded.h5" "${sets[@]}" --set model.checkpoint="$work/saved.h5"
    unset TRIPAR_LOAD_CHUNK_BYTES
    "$TRIPAR_BIN" diff "$work/synthetic.h5" "$work/reloaded.h5" --rtol 0 --atol 0
    echo "ok   reloaded on $1 $2 $3 (load chunk $4 bytes, 0: the default)"
done
