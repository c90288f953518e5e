#!/usr/bin/env bash
# Benchmark (not a test): how long `tripar plan` takes to predict and rank every strategy of the
# llama3.1-405b preset on 4096 GPUs of the DGX H100 SuperPOD-like cluster, on one core
# (issue 13 asks for under 2 s). Prints the planner's own count and time, and the wall time of
# the whole command (loading and output included). docs/planner.md records the result.
#   jobs/bench-plan.sh [extra tripar plan options]
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPAR=${TRIPAR_BIN:-build/tripar}
start=$(date +%s.%N)
taskset -c 0 "$TRIPAR" plan --preset llama3.1-405b --cluster data/clusters/dgx-h100-superpod.yaml \
    --gpus 4096 --batch 512 --prompt 2048 --new-tokens 128 --precision bf16 \
    --objective throughput --top 5 "$@" | tail -n 8
end=$(date +%s.%N)
awk -v a="$start" -v b="$end" 'BEGIN { printf "bench-plan: wall %.3f s on one core (taskset -c 0)\n", b - a }'
