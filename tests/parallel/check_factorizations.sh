#!/usr/bin/env bash
# Every dp x tp x pp factorization of each given world size must reproduce the single-rank run:
# identical greedy tokens and every activation within 1e-5 relative (tripar diff).
# With --experts N (a mixture of experts of N experts per layer), each factorization also runs
# with every parallel.ep > 1 that divides N and either divides its tp (expert parallelism inside
# the TP group) or is a multiple of tp dividing dp x tp (EP groups across ep / tp replicas, the
# tokens moved by all-to-all; docs/jobs.md).
# usage: check_factorizations.sh WORKDIR JOB [--experts N] WORLD_SIZE... [-- EXTRA --set OPTIONS]
set -euo pipefail
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
MPIEXEC=${MPIEXEC:-mpiexec}
work=$1 job=$2
shift 2
sizes=() experts=1
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    if [ "$1" = "--experts" ]; then experts=$2; shift 2; continue; fi
    sizes+=("$1"); shift
done
[ "${1:-}" = "--" ] && shift
extra=()
for kv in "$@"; do extra+=(--set "$kv"); done
mkdir -p "$work"
base="$work/base.h5"
# The baseline: one rank, one micro-batch, no overlap, the same model and input.
"$MPIEXEC" -n 1 --oversubscribe "$TRIPAR_BIN" run "$job" --out "$base" "${extra[@]}" \
    --set parallel.microbatches=1 --set parallel.overlap=false >"$work/base.log" 2>&1 ||
    { cat "$work/base.log"; exit 1; }
fail=0 count=0
for world in "${sizes[@]}"; do
    for tp in $(seq 1 "$world"); do
        [ $((world % tp)) -eq 0 ] || continue
        for pp in $(seq 1 $((world / tp))); do
            [ $((world / tp % pp)) -eq 0 ] || continue
            dp=$((world / tp / pp))
          for ep in $(seq 1 $((dp * tp))); do
            [ $((experts % ep)) -eq 0 ] || continue
            [ $((tp % ep)) -eq 0 ] || { [ $((ep % tp)) -eq 0 ] && [ $((dp * tp % ep)) -eq 0 ]; } ||
                continue
            name="w${world}-dp${dp}-tp${tp}-pp${pp}"
            [ "$ep" -eq 1 ] || name="$name-ep$ep"
            out="$work/$name.h5"
            if ! timeout 240 "$MPIEXEC" -n "$world" --oversubscribe "$TRIPAR_BIN" run "$job" \
                --out "$out" --set parallel.dp=$dp --set parallel.tp=$tp --set parallel.pp=$pp \
                --set parallel.ep=$ep "${extra[@]}" >"$work/$name.log" 2>&1; then
                echo "FAIL $name: run failed"; cat "$work/$name.log"; fail=1; continue
            fi
            if "$TRIPAR_BIN" diff "$base" "$out" --rtol 1e-5 >"$work/$name.diff" 2>&1; then
                echo "ok   $name ${extra[*]}"
            else
                echo "FAIL $name ${extra[*]}"; cat "$work/$name.diff"; fail=1
            fi
            count=$((count + 1))
          done
        done
    done
done
echo "$count factorizations checked"
[ "$count" -gt 0 ] || { echo "no factorization ran"; exit 1; }
exit $fail
