#!/bin/sh
# ckpt_vl_tokens.sh WORKDIR: a checkpoint whose string attributes h5py rewrote as variable-length
# (ckpt_vl.h5, from tools_fixtures.py) loads, and runs to the very tokens and activations of the
# original checkpoint (from_ckpt.h5): tripar diff at zero tolerance.
set -eu
: "${TRIPAR_BIN:?}"
here=$(dirname "$0")
work=$1
"$TRIPAR_BIN" run "$here/tools_tiny.yaml" --out "$work/from_ckpt_vl.h5" \
    --set model.checkpoint="$work/ckpt_vl.h5" >"$work/vl.log" 2>&1 ||
    { echo "FAIL: run with the variable-length checkpoint"; cat "$work/vl.log"; exit 1; }
"$TRIPAR_BIN" diff "$work/from_ckpt.h5" "$work/from_ckpt_vl.h5" --rtol 0 --atol 0
