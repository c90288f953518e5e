#!/usr/bin/env bash
# Benchmark (not a test): the GPT-2 124M shape on every factorization of 2 ranks x 1 BLAS
# thread, with TP overlap on and off, against 1 rank x 2 BLAS threads, in one run; then the 4-
# and 8-rank factorizations (oversubscribed on a 2-core machine: only their communication
# fractions mean anything). Prints one table (tools/strategy_table.py).
#   jobs/bench-parallel.sh [OUTDIR] [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPAR=${TRIPAR_BIN:-build/tripar}
out=${1:-out/bench-parallel}
quick=${2:-}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
# OpenBLAS 0.3.21 takes this CPU for a Prescott; name the real core type when it has AVX-512.
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}; fi
job=jobs/bench-gpt2-124m.yaml
common=(--set input.synthetic.batch=2 --set generate.new_tokens=16 --set bench.warmup=1
        --set bench.iterations=3 --set bench.roofline=false --set record.timings=layer)
[ "$quick" = "--quick" ] && common+=(--set bench.iterations=1 --set bench.warmup=0)
run() { # name ranks threads sets...
    local name=$1 np=$2 threads=$3
    shift 3
    echo "== $name" >&2
    mpirun -n "$np" --oversubscribe --bind-to none "$TRIPAR" run "$job" --out "$out/$name.h5" \
        --set backend.threads="$threads" "${common[@]}" "$@" >"$out/$name.log" 2>&1 ||
        { cat "$out/$name.log" >&2; exit 1; }
}
run base-1x2 1 2
runs=()
for f in "2 1 1" "1 2 1" "1 1 2"; do
    set -- $f
    for ov in false true; do
        [ "$2" -eq 1 ] && [ "$ov" = true ] && continue # overlap only changes TP
        name="dp$1-tp$2-pp$3-overlap-$ov"
        run "$name" 2 1 --set parallel.dp="$1" --set parallel.tp="$2" --set parallel.pp="$3" \
            --set parallel.overlap="$ov" --set parallel.microbatches=2 --set parallel.chunks=4
        runs+=("$out/$name.h5")
    done
done
comm=()
for f in "1 4 1" "1 2 2" "2 2 1" "1 1 4" "1 4 2" "2 2 2"; do
    set -- $f
    np=$(($1 * $2 * $3))
    name="np$np-dp$1-tp$2-pp$3"
    run "$name" "$np" 1 --set parallel.dp="$1" --set parallel.tp="$2" --set parallel.pp="$3" \
        --set parallel.overlap=true --set parallel.microbatches=2 --set input.synthetic.batch=4 \
        --set bench.iterations=1 --set bench.warmup=0 --set generate.new_tokens=4
    comm+=("$out/$name.h5")
done
/usr/bin/python3 tools/strategy_table.py "$out/base-1x2.h5" "${runs[@]}" --comm-only "${comm[@]}"
