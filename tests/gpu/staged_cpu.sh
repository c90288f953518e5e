#!/usr/bin/env bash
# The staged MPI comm (parallel/comm_staged.c) on the CPU: TRIPAR_COMM_STAGED=1 puts it on the
# TP and PP axes of cpu runs, and every factorization must still match one rank; the staging
# buffers sized at start-up must never grow. Its GPU twin is e2e.sh shared2/shared4.
#   staged_cpu.sh WORKDIR WORLD [-- EXTRA KEY=VALUE...]
set -euo pipefail
work=$1 world=$2
shift 2
export TRIPAR_COMM_STAGED=1
"$(dirname "$0")/../parallel/check_factorizations.sh" "$work" \
    "$(dirname "$0")/../../data/fixtures/factor.yaml" "$world" "$@"
logs=("$work"/w"$world"-*.log)
selected=$(grep -l 'over mpi-staged' "${logs[@]}" | wc -l)
if [ "$selected" -ne "${#logs[@]}" ]; then
    echo "FAIL the staged comm was selected in $selected of ${#logs[@]} runs"
    exit 1
fi
if grep -l 'staging buffers after start-up' "${logs[@]}"; then
    echo "FAIL staging buffers grew after start-up in the runs above"
    exit 1
fi
echo "mpi-staged selected in all ${#logs[@]} runs; no staging buffer grew"
