#!/usr/bin/env bash
# Benchmark (not a test): TP inside a node against TP across nodes on an emulated cluster of 2
# nodes (tests/cluster/cluster.sh, needs root), with TP overlap off and on, two MPI settings and
# three link settings, in interleaved rounds. Prints prefill and decode time, the prefill's TP
# all-reduce time (total and exposed), its PP wait, and the bytes that crossed the emulated
# network; then how much of the exposed TP time overlap hid, per link, mesh and MPI setting.
#   jobs/bench-nodes.sh [OUTDIR] [--quick] [--job JOB.yaml] [--chunks N]
# Meshes (ranks are pinned, core = TP coordinate, so the two ranks of a TP pair, which compute
# at the same time, never share one of the machine's 2 cores):
#   tp2     2 ranks, tp=2: both on node1 ("in node"), or one per node (--map-by node, "across").
#           One rank per core: the clean measure of what overlap hides.
#   tp2pp2  2 nodes x 2 ranks, tp=2 x pp=2: `tp-pp-dp` keeps each TP pair inside a node and sends
#           the stage boundary across; `pp-tp-dp` puts each TP pair across and keeps the stages
#           inside. 4 ranks on 2 cores: a waiting stage's polling takes cycles from the
#           computing one, more when it polls TCP than shared memory.
# MPI settings: Open MPI's defaults (parallel.mpi_tuning: off), and "tuned", what tripar sets
# itself for overlap (parallel.mpi_tuning: auto, the default; parallel/mpi_tuning.h): messages
# up to 4 MiB sent eagerly (no rendezvous handshake waiting for the receiver's next MPI call)
# and libnbc's recursive-doubling iallreduce (one round for a pair, not the ring's two), so a
# piece's all-reduce needs fewer of the MPI_Test calls made between pieces to finish. Runs
# with overlap off get the same settings, so that on and off differ in overlap alone.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TRIPAR=$(cd "$(dirname "${TRIPAR_BIN:-build/tripar}")" && pwd)/$(basename "${TRIPAR_BIN:-build/tripar}")
out=out/bench-nodes quick="" job=jobs/bench-gpt2-124m.yaml chunks=2
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1; shift ;;
    --job) job=${2:?--job needs a file}; shift 2 ;;
    --chunks) chunks=${2:?--chunks needs a number}; shift 2 ;;
    -*) echo "usage: jobs/bench-nodes.sh [OUTDIR] [--quick] [--job JOB.yaml] [--chunks N]" >&2; exit 2 ;;
    *) out=$1; shift ;;
    esac
done
[ -x "$TRIPAR" ] || { echo "bench-nodes: $TRIPAR not built (cmake --build build)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OPENBLAS_NUM_THREADS=1
# OpenBLAS 0.3.21 takes this CPU for a Prescott; name the real core type when it has AVX-512.
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}; fi
[ -z "${OPENBLAS_CORETYPE:-}" ] || export TRIPAR_OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE
if [ -z "${TRIPAR_DELAYLINE:-}" ] && [ -x build/tests/cluster_delayline ]; then
    export TRIPAR_DELAYLINE=$ROOT/build/tests/cluster_delayline
fi

cluster=tests/cluster/cluster.sh
state=$out/cluster
"$cluster" up "$state" 2 --slots 2
trap '"$cluster" down "$state" >/dev/null 2>&1 || true' EXIT

# A pinning launcher: every rank runs on core (its TP coordinate), read from its world rank.
pin=$out/pin.sh
cat >"$pin" <<'EOF'
#!/bin/bash
# pin.sh ORDER COMMAND...: runs COMMAND on core = this rank's TP coordinate (tp=2).
order=$1; shift
r=${OMPI_COMM_WORLD_RANK:?not started by mpirun}
case $order in
tp-pp-dp) core=$((r % 2)) ;;
pp-tp-dp) core=$((r / 2 % 2)) ;;
esac
[ -z "${TRIPAR_OPENBLAS_CORETYPE:-}" ] || export OPENBLAS_CORETYPE=$TRIPAR_OPENBLAS_CORETYPE
exec taskset -c "$core" "$@"
EOF
chmod +x "$pin"

# Bytes sent by every node on its emulated interface (/proc/net/dev is per network namespace).
crossed_bytes() {
    local total=0 k b
    for k in 1 2; do
        b=$("$cluster" exec "$state" "$k" awk '$1 == "eth0:" { print $10 }' /proc/net/dev)
        total=$((total + b))
    done
    echo "$total"
}

rounds=2 iters=2 new=16
[ -n "$quick" ] && rounds=1 iters=1 new=4
links=("off 0" "10gbit 50" "1gbit 1000")
# label, ranks, pp, order, mpirun mapping
meshes=("tp2:in 2 1 tp-pp-dp slot" "tp2:across 2 1 tp-pp-dp node"
        "tp2pp2:in 4 2 tp-pp-dp slot" "tp2pp2:across 4 2 pp-tp-dp slot")
mpi_settings=(default tuned)
mpi_args() { # setting -> tripar arguments: its own tuning needs none
    [ "$1" = tuned ] && return 0
    echo --set parallel.mpi_tuning=off
}
# With overlap off tripar tunes nothing, so the tuned runs without overlap are given the same
# variables it sets (parallel/mpi_tuning.c) by mpirun.
tuned_off_args() {
    [ "$1" = tuned ] || return 0
    echo --mca btl_tcp_eager_limit 4194304 --mca btl_tcp_rndv_eager_limit 4194304 \
        --mca btl_tcp_max_send_size 4194304 --mca coll_libnbc_iallreduce_algorithm 4
}
list=$out/runs.tsv
: >"$list"
for round in $(seq 1 "$rounds"); do
    for link in "${links[@]}"; do
        read -r rate delay <<<"$link"
        "$cluster" link "$state" --rate "$rate" --delay "$delay"
        for mesh in "${meshes[@]}"; do
            read -r label np pp order map <<<"$mesh"
            for mpi in "${mpi_settings[@]}"; do
                for ov in false true; do
                    name="r$round-${rate}-${delay}us-${label/:/-}-$mpi-overlap-$ov"
                    echo "== $name" >&2
                    before=$(crossed_bytes)
                    mca=()
                    [ "$ov" = true ] || read -ra mca <<<"$(tuned_off_args "$mpi")"
                    # shellcheck disable=SC2046 # mpi_args prints separate words
                    "$state/mpirun" -n "$np" --map-by "$map" "${mca[@]}" "$pin" "$order" \
                        "$TRIPAR" run "$job" --out "$out/$name.h5" $(mpi_args "$mpi") \
                        --set parallel.tp=2 --set parallel.pp="$pp" --set parallel.dp=1 \
                        --set parallel.order="$order" --set parallel.overlap="$ov" \
                        --set parallel.chunks="$chunks" --set parallel.microbatches=1 \
                        --set generate.new_tokens=$new --set bench.warmup=1 \
                        --set bench.iterations=$iters --set bench.roofline=false \
                        --set record.timings=layer --set record.flush_seconds=0 \
                        >"$out/$name.log" 2>&1 || { cat "$out/$name.log" >&2; exit 1; }
                    after=$(crossed_bytes)
                    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rate/${delay}us" "$label" "$mpi" \
                        "$ov" $((after - before)) "$out/$name.h5" "$round" >>"$list"
                done
            done
        done
    done
done
/usr/bin/python3 tools/nodes_table.py "$list"
