#!/usr/bin/env bash
# Benchmark (not a test): `tripar plan --validate` on a mixture of experts. Runs
# jobs/validate-plan-moe.yaml (a Mixtral-shaped model scaled to the 2-core box: 4 layers, C 512,
# 8 experts of width 1792, top 2, batch 4, prompt 64, 16 new tokens) at the strategies of 1 and
# 2 ranks that jobs/validate-plan.sh runs first (one rank; dp, tp with overlap off and on, pp with
# 1 and 2 micro-batches), plus tp=2 with the experts split over ep=2 blocks, then predicts each
# run from the calibration of the others (leave one out). docs/planner.md "A mixture of experts
# on this machine" records the table. Leave-one-out assumes every run saw the same machine: run
# it on a quiet box (the load average before and after is printed). About 4 minutes.
#   jobs/validate-plan-moe.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPAR=${TRIPAR_BIN:-build/tripar}
out=${1:-out/validate-plan-moe-$(date +%Y%m%d-%H%M%S)}
. jobs/validate-lib.sh
validate_init validate-plan-moe "$out" jobs/validate-plan-moe.yaml
echo "validate-plan-moe: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/load.txt"
strategy r1 1
strategy dp2 2 dp=2
strategy tp2 2 tp=2
strategy tp2-overlap 2 tp=2 overlap=true
strategy tp2-ep2 2 tp=2 ep=2
strategy pp2-m1 2 pp=2
strategy pp2-m2 2 pp=2 microbatches=2
echo "validate-plan-moe: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
"$TRIPAR" plan --validate "${runs[@]}" --cluster data/clusters/this-machine.yaml | tee "$out/validate.txt"
