#!/usr/bin/env bash
# Benchmark (not a test): `tripar plan --validate` against measured runs on this machine. Runs
# jobs/validate-plan.yaml (GPT-2 124M shape, synthetic weights, batch 4, prompt 64, 16 new
# tokens, timings: layer) at every strategy of 1 and 2 ranks (dp, tp with overlap off and on,
# pp with 1 and 2 micro-batches), then at every dp x tp x pp of 3 to 8 ranks the shape allows
# (tp divides the 12 heads, pp <= 12 layers, dp <= the batch of 4; one micro-batch, overlap
# off): 33 runs. The box has 2 cores, so meshes of 3 and more ranks are oversubscribed; the
# cluster file says so (cores_per_node: 2), and the ranks are bound round-robin to the cores
# as the planner assumes (docs/planner.md "Shared nodes"). Then it predicts each run from the
# calibration of the others (leave one out) and prints predicted against measured.
# docs/planner.md "Validation" records the table. About 7 minutes on the 2-core box.
#   jobs/validate-plan.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPAR=${TRIPAR_BIN:-build/tripar}
out=${1:-out/validate-plan-$(date +%Y%m%d-%H%M%S)}
. jobs/validate-lib.sh
validate_init validate-plan "$out"
strategy r1 1
strategy dp2 2 dp=2
strategy tp2 2 tp=2
strategy tp2-overlap 2 tp=2 overlap=true
strategy pp2-m1 2 pp=2
strategy pp2-m2 2 pp=2 microbatches=2
for np in 3 4 5 6 7 8; do
    for tp in 1 2 3 4 6; do
        for ((pp = 1; pp <= np; pp++)); do
            ((np % (tp * pp) == 0)) || continue
            dp=$((np / (tp * pp)))
            ((dp <= 4)) || continue
            parts=() sets=()
            if ((dp > 1)); then parts+=("dp$dp") sets+=("dp=$dp"); fi
            if ((tp > 1)); then parts+=("tp$tp") sets+=("tp=$tp"); fi
            if ((pp > 1)); then parts+=("pp$pp-m1") sets+=("pp=$pp"); fi
            name=$(IFS=-; echo "${parts[*]}")
            strategy "$name" "$np" "${sets[@]}"
        done
    done
done
"$TRIPAR" plan --validate "${runs[@]}" --cluster data/clusters/this-machine.yaml | tee "$out/validate.txt"
