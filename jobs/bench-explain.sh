#!/usr/bin/env bash
# Benchmark (not a test): the standard/flash variant pair of jobs/variants/ (GPT-2 and Llama
# shapes) at prompt lengths 128, 512 and 2048 and batch 1 and 8, one rank and one BLAS thread.
# The two variants of a cell run back to back, so a drift in machine speed hits both; then
# `tripar explain STANDARD FLASH` attributes the difference and its verdict is printed per
# cell. docs/performance.md ("Why flash is slower: tripar explain") records them.
#   jobs/bench-explain.sh [OUTDIR] [--quick]     runs every cell, then explains each
#   jobs/bench-explain.sh OUTDIR --explain-only     explains the run files already in OUTDIR
# --quick: prompt lengths 128 and 512 only, one measured iteration. Iterations: 1 warm-up and 3
# measured per cell, but the 2048 x 8 cells (a minute or more per generation on one thread) run
# one measured generation and no warm-up.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPAR=${TRIPAR_BIN:-build/tripar}
out=${1:-out/bench-explain-$(date +%Y%m%d-%H%M%S)}
quick=${2:-}
# run files are never overwritten: a fresh folder per run of the benchmark
if [ "$quick" != "--explain-only" ] && [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
    echo "bench-explain: $out is not empty; name a new folder" >&2
    exit 2
fi
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# OpenBLAS 0.3.21 takes this CPU for a Prescott; name the real core type when it has AVX-512.
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}; fi
lengths="128 512 2048"
iters=3
[ "$quick" = "--quick" ] && lengths="128 512" iters=1
# ctx covers the longest prompt and its new tokens in every cell, so the cells differ only in
# the input. bench.roofline stores the machine's ceilings for the rooflines of `explain`; its
# sgemm probe repeats the model's prefill products 10 times, so it runs at batch 1 only.
run() { # family variant length batch
    local family=$1 variant=$2 T=$3 b=$4 name=$1-$2-T$3-b$4
    local job=jobs/variants/$variant.yaml roof=false
    [ "$family" = llama ] && job=jobs/variants/llama-$variant.yaml
    local warmup=1 n=$iters
    [ "$b" = 1 ] && roof=true
    [ "$T" = 2048 ] && [ "$b" = 8 ] && warmup=0 n=1
    echo "== $name" >&2
    mpirun -n 1 "$TRIPAR" run "$job" --out "$out/$name.h5" --set model.synthetic.ctx=2080 \
        --set input.synthetic.length="$T" --set input.synthetic.batch="$b" \
        --set bench.warmup=$warmup --set bench.iterations="$n" --set bench.roofline=$roof \
        >"$out/$name.log" 2>&1 || { cat "$out/$name.log" >&2; exit 1; }
}
explain_cells() {
    for T in $lengths; do
        for b in 1 8; do
            for family in gpt2 llama; do
                local base=$out/$family-standard-T$T-b$b.h5 other=$out/$family-flash-T$T-b$b.h5
                local cell=$family-T$T-b$b
                [ -f "$base" ] && [ -f "$other" ] || continue
                "$TRIPAR" explain "$base" "$other" >"$out/explain-$cell.txt"
                "$TRIPAR" explain "$base" "$other" --format json -o "$out/explain-$cell.json"
            done
        done
    done
}
if [ "$quick" != "--explain-only" ]; then
    for T in $lengths; do
        for b in 1 8; do
            for family in gpt2 llama; do
                run "$family" standard "$T" "$b"
                run "$family" flash "$T" "$b"
            done
        done
    done
fi
explain_cells
for f in "$out"/explain-*.txt; do
    echo "### $(basename "$f" .txt)"
    cat "$f"
    echo
done
echo "bench-explain: run files, logs and explain tables in $out"
