#!/usr/bin/env bash
# Benchmark (not a test): expert parallelism against TP-only experts on 4 ranks, side by side in
# one run (issue 31). The model is jobs/validate-plan-moe.yaml's Mixtral scaled to the 2-core
# box (4 layers, embd 512, 8 experts of 1792, top 2), 32 new tokens after a 64-token prompt, at
# batch 1 and batch 32:
#   batch 1:  tp4 (each expert split 4 ways), tp4-ep2 and tp4-ep4 (experts in blocks inside
#             the TP group; no all-to-all: the TP all-reduce combines them)
#   batch 32: the same three, dp2-tp2 and dp2-tp2-ep4 (EP across 2 replicas), dp4 and
#             dp4-ep4 (across 4 replicas: every expert on one rank, tokens by MPI_Alltoallv)
# For each run it prints tokens/s, TTFT and TPOT, and for EP across replicas the all-to-all
# time (ep_dispatch + ep_combine, the slowest rank's median over its measured iterations), the
# part of it the rank waited (ep_wait) and so the fraction hidden. Each round runs every
# strategy once, in an order that alternates by round; the table gives medians over rounds.
# Then `tripar plan --validate` predicts each run of round 1 from the others (validate.txt;
# issue 31's bar: median error at most 15%, worst at most 30%).
# The box has 2 cores, so 4 ranks are oversubscribed (mpi_yield_when_idle): run it on a quiet
# box; the load average before and after is printed. docs/performance.md ("Mixture of
# experts: EP against TP-only experts") records the table.
#   jobs/bench-moe.sh [OUTDIR] [--rounds N]      (about 1.5 min a round on the 2-core Zen 5 box, 6 on the earlier Intel one)
# OUTDIR defaults to out/bench-moe-<timestamp> and must be new or empty. Exit 0 when every run
# ran; 1 when one failed; 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPAR=${TRIPAR_BIN:-build/tripar}
out="" rounds=1
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) [ $# -ge 2 ] || { echo "bench-moe: --rounds needs N" >&2; exit 2; }; rounds=$2; shift ;;
    -h | --help) sed -n '19,21p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    -*) echo "bench-moe: unknown option $1" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "bench-moe: one OUTDIR only" >&2; exit 2; }; out=$1 ;;
    esac
    shift
done
case $rounds in '' | *[!0-9]* | 0) echo "bench-moe: --rounds needs a positive integer" >&2; exit 2 ;; esac
out=${out:-out/bench-moe-$(date +%Y%m%d-%H%M%S)}
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then echo "bench-moe: $out is not empty; name a new folder" >&2; exit 2; fi
[ -x "$TRIPAR" ] || { echo "bench-moe: no tripar at $TRIPAR (build it first)" >&2; exit 1; }
mkdir -p "$out"
cp jobs/validate-plan-moe.yaml "$out/job.yaml"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1

# name batch parallel.* settings
RUNS=("b1-tp4 1 tp=4" "b1-tp4-ep2 1 tp=4 ep=2" "b1-tp4-ep4 1 tp=4 ep=4"
    "b32-tp4 32 tp=4" "b32-tp4-ep4 32 tp=4 ep=4" "b32-dp2-tp2 32 dp=2 tp=2"
    "b32-dp2-tp2-ep4 32 dp=2 tp=2 ep=4" "b32-dp4 32 dp=4" "b32-dp4-ep4 32 dp=4 ep=4")
echo "bench-moe: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/load.txt"
for r in $(seq 1 "$rounds"); do
    order=("${RUNS[@]}")
    if [ $((r % 2)) = 0 ]; then # even rounds backwards, so a drift does not favour one end
        order=()
        for ((i = ${#RUNS[@]} - 1; i >= 0; i--)); do order+=("${RUNS[$i]}"); done
    fi
    for run in "${order[@]}"; do
        read -r name batch sets <<<"$run"
        args=(--set input.synthetic.batch="$batch" --set generate.new_tokens=32)
        for kv in $sets; do args+=(--set "parallel.$kv"); done
        echo "bench-moe: round $r/$rounds: $name" >&2
        mpirun -n 4 --oversubscribe --map-by core --bind-to core:overload-allowed "$TRIPAR" run \
            "$out/job.yaml" "${args[@]}" --out "$out/r$r-$name.h5" >"$out/r$r-$name.log" 2>&1 ||
            { tail -20 "$out/r$r-$name.log" >&2; echo "bench-moe: $name failed" >&2; exit 1; }
        "$TRIPAR" report "$out/r$r-$name.h5" --json "$out/r$r-$name.json" >/dev/null
    done
done
echo "bench-moe: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
# the planner on the same runs (round 1), each predicted from the others (leave one out)
validate=()
for run in "${RUNS[@]}"; do validate+=("$out/r1-${run%% *}.h5"); done
"$TRIPAR" plan --validate "${validate[@]}" --cluster data/clusters/this-machine.yaml \
    >"$out/validate.txt"

/usr/bin/python3 - "$out" "$rounds" "${RUNS[@]}" <<'PY' | tee "$out/table.txt"
import json, statistics, sys
out, rounds, runs = sys.argv[1], int(sys.argv[2]), [r.split()[0] for r in sys.argv[3:]]
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")
def phase(run, name):
    """The slowest rank's time in the phase per measured iteration (report's JSON holds the
    sums over the measured iterations, every number a float)."""
    p = run["phases"].get(name)
    return p["per_rank_s"][int(run["slowest_rank"])] / run["iterations"] if p else 0.0
print("| run | tokens/s | TTFT ms | TPOT ms | all-to-all ms | waited ms | hidden |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name in runs:
    rs = [json.load(open(f"{out}/r{i}-{name}.json"))["runs"][0] for i in range(1, rounds + 1)]
    a2a = med([phase(r, "ep_dispatch") + phase(r, "ep_combine") for r in rs])
    wait = med([phase(r, "ep_wait") for r in rs])
    hidden = f"{1 - wait / a2a:.0%}" if a2a > 0 else "-"
    print(f"| {name} | {med([r['tokens_per_s'] for r in rs]):.1f} | "
          f"{1e3 * med([r['ttft_s'] for r in rs]):.1f} | {1e3 * med([r['tpot_s'] for r in rs]):.2f} | "
          f"{1e3 * a2a:.1f} | {1e3 * wait:.1f} | {hidden} |")
PY
