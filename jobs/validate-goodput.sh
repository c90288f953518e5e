#!/usr/bin/env bash
# Benchmark (not a test): the goodput model of `tripar plan --rate` against tripar's own
# arrival-rate runs on this machine (docs/planner.md "Goodput under an arrival rate"). Runs
# jobs/validate-plan.yaml (GPT-2 124M shape, batch 4, prompt 64, 16 new tokens) at two
# strategies, one rank and tp=2, each at batch 4 and batch 1 without a stream (calibration),
# then with a Poisson stream of bench.arrival_rate 1, 3 and 10 requests/s for 15 s each (light,
# near one rank's capacity, past both), and predicts every stream from the calibration of the
# other runs (leave one out): p50 and p90 TTFT, p50 TPOT and the goodput at TTFT <= 1 s and
# TPOT <= 50 ms, against what each run measured. About 4 minutes on the 2-core box.
#   jobs/validate-goodput.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPAR=${TRIPAR_BIN:-build/tripar}
out=${1:-out/validate-goodput-$(date +%Y%m%d-%H%M%S)}
rates=${GOODPUT_RATES:-1 3 10}
duration=${GOODPUT_DURATION:-15}
. jobs/validate-lib.sh
validate_init validate-goodput "$out"
echo "validate-goodput: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/load.txt"
for s in r1 tp2; do
    np=1 sets=()
    if [ "$s" = tp2 ]; then np=2 sets=(--set parallel.tp=2); fi
    validate_run "$s" "$np" "${sets[@]}"
    validate_run "$s-b1" "$np" "${sets[@]}" --set input.synthetic.batch=1
    for r in $rates; do
        validate_run "$s-rate$r" "$np" "${sets[@]}" --set bench.arrival_rate="$r" \
            --set bench.duration="$duration" --set bench.iterations=2
    done
done
echo "validate-goodput: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
"$TRIPAR" plan --validate "${runs[@]}" --cluster data/clusters/this-machine.yaml --ttft 1 \
    --tpot 0.05 | tee "$out/validate.txt"
