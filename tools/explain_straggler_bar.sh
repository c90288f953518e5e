#!/usr/bin/env bash
# Issue 29's bar for `tripar explain`: N repetitions (default 20) of the tp=2 straggler case of
# tests/cli/explain_straggler.py (a planted loop on rank 1's core; explain must name rank 1),
# each with other work running beside it: a compile of tripar in a scratch build directory
# (rebuilt from nothing, again and again) or, with --yes, `yes > /dev/null` on every core.
# Prints "bar: the slowed rank was named in K of N repetitions"; exits 1 unless K = N.
#   tools/explain_straggler_bar.sh [N] [--yes]     (env: TRIPAR_BUILD_DIR, default build)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20}
beside=build
[ "${2:-}" = "--yes" ] && beside=yes
BUILD=${TRIPAR_BUILD_DIR:-build}
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
if [ "$beside" = yes ]; then
    for _ in $(seq "$(nproc)"); do
        setsid sh -c 'yes > /dev/null' & pids+=($!)
    done
else
    setsid sh -c 'while :; do rm -rf "$1"; cmake -S . -B "$1" -DTRIPAR_CUDA=OFF >/dev/null 2>&1;
                  cmake --build "$1" -j"$(nproc)" >/dev/null 2>&1; done' sh "$work/beside" &
    pids+=($!)
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
export TRIPAR_SOURCE_DIR=$PWD TRIPAR_BIN=$PWD/$BUILD/tripar MPIEXEC=${MPIEXEC:-mpiexec}
export EXPLAIN_STRAGGLER_ITERATIONS=${EXPLAIN_STRAGGLER_ITERATIONS:-10}
/usr/bin/python3 tests/cli/explain_straggler.py bar "$work/runs" "$n"
