#!/usr/bin/env bash
# Benchmark (not a test): `tripar plan --validate` across nodes, on the emulated cluster of
# tests/cluster/cluster.sh (needs root; docs/cluster.md), at two link settings. The second half
# of jobs/validate-plan.sh's bar (docs/planner.md "Validation").
#
# The cluster: 2 nodes x 2 slots, each node pinned to one of the machine's 2 cores (a rank on
# nodeK runs on core K-1: jobs/pin-node-core.sh), so each is a node of one core whose 2 ranks
# time-share it, and the nodes do not take each other's cycles. For each link setting it
#   1. measures both tiers with `tripar commbench --tiers`, pinned like the runs (the intra
#      tier is two ranks of one core handing over, as the runs' own ranks do);
#   2. writes the cluster file the planner reads: 2 nodes x 2 devices, cores_per_node 1, the
#      device ceilings of data/clusters/this-machine.yaml, both tiers `from:` that commbench;
#   3. runs jobs/validate-plan.yaml (GPT-2 124M shape, batch 4, prompt 64, 16 new tokens,
#      record.timings: layer) on one rank, at every strategy of 2 ranks one per node (mpirun
#      --map-by node), and at every dp x tp x pp of 3 and 4 ranks filling node1 first, with
#      the orders that put TP groups or stage boundaries inside a node and across (19 runs);
#   4. predicts each run from the others (leave one out) and prints predicted against measured.
# The node has one virtual link (a veth with tbf), so its ranks share it: links_per_node: 1.
# About 12 minutes on the 2-core box.
#   jobs/validate-plan-nodes.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPAR=$(cd "$(dirname "${TRIPAR_BIN:-build/tripar}")" && pwd)/$(basename "${TRIPAR_BIN:-build/tripar}")
out=${1:-out/validate-plan-nodes-$(date +%Y%m%d-%H%M%S)}
[ -x "$TRIPAR" ] || { echo "validate-plan-nodes: $TRIPAR not built (cmake --build build)" >&2; exit 2; }
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
    echo "validate-plan-nodes: $out is not empty; name a new folder" >&2
    exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1

cluster=tests/cluster/cluster.sh
state=$out/cluster
"$cluster" up "$state" 2 --slots 2
trap '"$cluster" down "$state" >/dev/null 2>&1 || true' EXIT

# Every rank of nodeK on core K-1: the node's own core.
pin=$PWD/jobs/pin-node-core.sh

cp jobs/validate-plan.yaml "$out/job.yaml" # the job, kept beside its runs

# The device ceilings are this machine's (one core each): the lines of this-machine.yaml.
ceiling() { awk -v k="$1:" '$1 == k { print $2; exit }' data/clusters/this-machine.yaml; }
gflops=$(ceiling gflops) gbs=$(ceiling gbs)

# label, ranks, mapping, mesh settings (order explicit where auto would refuse a TP group
# wider than a node, or to put a group across the nodes)
meshes=(
    "r1 1 slot dp=1"
    "dp2 2 node dp=2"
    "tp2 2 node tp=2 order=tp-pp-dp"
    "tp2-overlap 2 node tp=2 overlap=true order=tp-pp-dp"
    "pp2-m1 2 node pp=2"
    "pp2-m2 2 node pp=2 microbatches=2"
    "dp4 4 slot dp=4"
    "tp4 4 slot tp=4 order=tp-pp-dp"
    "pp4-m1 4 slot pp=4"
    "pp4-m2 4 slot pp=4 microbatches=2"
    "dp2-tp2 4 slot dp=2 tp=2"
    "dp2-tp2-across 4 slot dp=2 tp=2 order=dp-tp-pp"
    "dp2-pp2-m1 4 slot dp=2 pp=2"
    "dp2-pp2-m1-across 4 slot dp=2 pp=2 order=dp-pp-tp"
    "tp2-pp2-m1 4 slot tp=2 pp=2"
    "tp2-pp2-m1-across 4 slot tp=2 pp=2 order=pp-tp-dp"
    "dp3 3 slot dp=3"
    "tp3 3 slot tp=3 order=tp-pp-dp"
    "pp3-m1 3 slot pp=3"
)
links=("10gbit 50" "1gbit 1000")
for link in "${links[@]}"; do
    read -r rate delay <<<"$link"
    tag=$rate-${delay}us
    dir=$out/$tag
    mkdir -p "$dir"
    "$cluster" link "$state" --rate "$rate" --delay "$delay"
    "$state/mpirun" -n 4 --bind-to none "$pin" "$TRIPAR" commbench --tiers --sizes 8:1M \
        --iters 20 --warmup 3 --out "$dir/commbench.h5" >"$dir/commbench.log" 2>&1 ||
        { cat "$dir/commbench.log" >&2; exit 1; }
    cat >"$dir/cluster.yaml" <<YAML
# 2 emulated nodes of one core each, link $rate with ${delay} us added latency
# (jobs/validate-plan-nodes.sh); the tiers as commbench measured them, pinned like the runs.
name: emulated-2x1core-$tag
nodes: 2
devices_per_node: 2
cores_per_node: 1
device:
  memory: 2.5 GiB
  gflops: $gflops
  gbs: $gbs
network:
  intra: {from: commbench.h5}
  inter: {from: commbench.h5, links_per_node: 1}
YAML
    runs=()
    for mesh in "${meshes[@]}"; do
        read -r name np map settings <<<"$mesh"
        sets=()
        for kv in $settings; do sets+=(--set "parallel.$kv"); done
        "$state/mpirun" -n "$np" --map-by "$map" --bind-to none "$pin" "$TRIPAR" run "$out/job.yaml" \
            "${sets[@]}" --out "$dir/$name.h5" >"$dir/$name.log" 2>&1 ||
            { cat "$dir/$name.log" >&2; exit 1; }
        runs+=("$dir/$name.h5")
        echo "validate-plan-nodes: $tag: ran $name" >&2
    done
    echo "== link $rate, +${delay} us"
    "$TRIPAR" plan --validate "${runs[@]}" --cluster "$dir/cluster.yaml" | tee "$dir/validate.txt"
done
