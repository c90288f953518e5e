#!/bin/sh
# tools_fixtures.sh WORKDIR: the run files and checkpoints the run-file tool tests read. Real
# runs of tools_tiny.yaml (one rank, no mpirun), then tools_fixtures.py derives the foreign,
# incomplete, newer-format and h5py-rewritten files from them.
set -eu
: "${TRIPAR_BIN:?}"
here=$(dirname "$0")
work=$1
rm -rf "$work"
mkdir -p "$work"
run() { "$TRIPAR_BIN" run "$here/tools_tiny.yaml" "$@" >>"$work/log" 2>&1 || { cat "$work/log"; exit 1; }; }
run --out "$work/run.h5" --save-checkpoint "$work/ckpt.h5"
run --out "$work/seed6.h5" --set model.synthetic.seed=6
run --out "$work/layers3.h5" --set model.synthetic.layers=3
run --out "$work/bf16.h5" --set model.precision=bf16
run --out "$work/from_ckpt.h5" --set model.checkpoint="$work/ckpt.h5"
/usr/bin/python3 "$here/tools_fixtures.py" "$work"
