#!/usr/bin/env bash
# The mesh across 2 emulated nodes x 2 ranks: /mesh records each rank's host, node and
# coordinates for tp-pp-dp, pp-tp-dp and auto, with ranks mapped by slot and by node
# (--map-by node); the TP-spans-nodes warning appears exactly when a TP group holds ranks of
# two nodes; auto keeps TP inside a node under either mapping; tripar report counts the groups
# crossing nodes; every layout gives the tokens and activations of the first; auto with tp=4
# is refused (exit 2, said once, no hang); 3 ranks on 2 nodes warn about uneven nodes.
#   mesh_nodes.sh STATE JOB
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
PYTHON=${PYTHON:-/usr/bin/python3}
state=$1 job=$2
cluster_require "$state"
[ "$CLUSTER_NODES" = 2 ] && [ "$CLUSTER_SLOTS" = 2 ] ||
    { echo "FAIL: mesh_nodes.sh needs 2 nodes x 2 slots, got $CLUSTER_NODES x $CLUSTER_SLOTS"; exit 1; }
out=$state/log/mesh_nodes
mkdir -p "$out"
fail=0
base=""

# case NAME ORDER TP PP DP MAP WARN EXPECTED [REPORT]: one run on 4 ranks. MAP is slot or node;
# WARN is 1 when the TP-spans-nodes warning must appear (once), 0 when it must not; EXPECTED
# lists "host node tp pp dp" per world rank, ';'-separated; REPORT, when given, is the nodes
# line tripar report must print.
case_run() {
    local name=$1 order=$2 tp=$3 pp=$4 dp=$5 map=$6 warn=$7 expected=$8 report=${9:-}
    local h5=$out/$name.h5 log=$out/$name.log maparg=() failed_before=$fail
    fail=0
    [ "$map" = node ] && maparg=(--map-by node)
    if ! run_limited 180 "$CLUSTER_MPIRUN" -n 4 "${maparg[@]}" "$TRIPAR_BIN" run "$job" \
        --out "$h5" --set parallel.order="$order" --set parallel.tp="$tp" \
        --set parallel.pp="$pp" --set parallel.dp="$dp" >"$log" 2>&1; then
        echo "FAIL $name: the run failed"; cat "$log"; fail=1; return 0
    fi
    local warned
    warned=$(grep -c "warning: a tensor-parallel group spans nodes" "$log" || true)
    if [ "$warned" != "$warn" ]; then
        echo "FAIL $name: TP-spans-nodes warning printed $warned time(s), expected $warn"; fail=1
    fi
    if grep -q "different numbers of ranks" "$log"; then
        echo "FAIL $name: uneven-nodes warning on even nodes"; fail=1
    fi
    local got
    got=$("$PYTHON" - "$h5" <<'EOF'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    rows = sorted(f["mesh"][:], key=lambda r: r["rank"])
    print(";".join("%s %d %d %d %d" % (r["host"].decode(), r["node"], r["tp_rank"], r["pp_rank"],
                                       r["dp_rank"]) for r in rows))
EOF
    )
    if [ "$got" != "$expected" ]; then
        echo "FAIL $name: /mesh (host node tp pp dp by rank)"
        echo "  got      $got"; echo "  expected $expected"; fail=1
    fi
    if [ -n "$report" ] && ! "$TRIPAR_BIN" report "$h5" | grep -qxF "$report"; then
        echo "FAIL $name: report has no line '$report'"; "$TRIPAR_BIN" report "$h5" | head -4
        fail=1
    fi
    if [ -z "$base" ]; then
        base=$h5
    elif ! "$TRIPAR_BIN" diff "$base" "$h5" --rtol 1e-5 >"$out/$name.diff" 2>&1; then
        echo "FAIL $name: tokens or activations differ from $(basename "$base")"
        cat "$out/$name.diff"; fail=1
    fi
    [ "$fail" = 0 ] && echo "ok   $name: $got (warning x$warned)"
    [ "$failed_before" = 0 ] || fail=1
}

n1=node1 n2=node2
# Ranks by slot: 0,1 on node1, 2,3 on node2. tp-pp-dp puts TP groups {0,1} and {2,3} in a node.
case_run tp-pp-dp_slot tp-pp-dp 2 1 2 slot 0 \
    "$n1 0 0 0 0;$n1 0 1 0 0;$n2 1 0 0 1;$n2 1 1 0 1" \
    "  nodes 2 (2 ranks each); TP groups crossing nodes 0/2, PP groups crossing nodes 0/4"
# By node: 0,2 on node1, 1,3 on node2; the same order now pairs ranks 0 and 1 across the link.
case_run tp-pp-dp_bynode tp-pp-dp 2 1 2 node 1 \
    "$n1 0 0 0 0;$n2 1 1 0 0;$n1 0 0 0 1;$n2 1 1 0 1" \
    "  nodes 2 (2 ranks each); TP groups crossing nodes 2/2, PP groups crossing nodes 0/4"
# pp-tp-dp with tp 2, pp 2: TP groups {0,2} and {1,3}, across nodes by slot, inside by node.
case_run pp-tp-dp_slot pp-tp-dp 2 2 1 slot 1 \
    "$n1 0 0 0 0;$n1 0 0 1 0;$n2 1 1 0 0;$n2 1 1 1 0" \
    "  nodes 2 (2 ranks each); TP groups crossing nodes 2/2, PP groups crossing nodes 0/2"
case_run pp-tp-dp_bynode pp-tp-dp 2 2 1 node 0 \
    "$n1 0 0 0 0;$n2 1 0 1 0;$n1 0 1 0 0;$n2 1 1 1 0" \
    "  nodes 2 (2 ranks each); TP groups crossing nodes 0/2, PP groups crossing nodes 2/2"
# auto: TP inside a node under either mapping (coordinates follow node and local rank).
case_run auto_slot auto 2 1 2 slot 0 \
    "$n1 0 0 0 0;$n1 0 1 0 0;$n2 1 0 0 1;$n2 1 1 0 1"
case_run auto_bynode auto 2 1 2 node 0 \
    "$n1 0 0 0 0;$n2 1 0 0 1;$n1 0 1 0 0;$n2 1 1 0 1" \
    "  nodes 2 (2 ranks each); TP groups crossing nodes 0/2, PP groups crossing nodes 0/4"
case_run auto_tp2_pp2_bynode auto 2 2 1 node 0 \
    "$n1 0 0 0 0;$n2 1 0 1 0;$n1 0 1 0 0;$n2 1 1 1 0" \
    "  nodes 2 (2 ranks each); TP groups crossing nodes 0/2, PP groups crossing nodes 2/2"

# auto with tp=4 on nodes of 2: every rank exits 2, the reason once, within the time limit.
log=$out/auto_tp4.log
rc=0
run_limited 120 "$CLUSTER_MPIRUN" -n 4 "$TRIPAR_BIN" run "$job" --out "$out/auto_tp4.h5" \
    --set parallel.order=auto --set parallel.tp=4 >"$log" 2>&1 || rc=$?
said=$(grep -c "^tripar: error: --set parallel.order=auto: parallel.order auto: tp=4 cannot fit inside one node: nodes have 2, 2 ranks (node1: 2, node2: 2); use tp dividing every node's rank count (1, 2) or an explicit order$" "$log" || true)
errors=$(grep -c "tripar: error:" "$log" || true)
if [ "$rc" = 2 ] && [ "$said" = 1 ] && [ "$errors" = 1 ] && [ ! -e "$out/auto_tp4.h5" ]; then
    echo "ok   auto_tp4: refused, exit 2, said once"
else
    echo "FAIL auto_tp4: exit $rc (expected 2), reason printed $said time(s), errors $errors"
    cat "$log"; fail=1
fi

# A sweep whose second point is auto with tp=4 is refused before its first point computes.
log=$out/sweep_auto_tp4.log
rc=0
run_limited 120 "$CLUSTER_MPIRUN" -n 4 "$TRIPAR_BIN" run "$job" --out "$out/sweep.h5" \
    --set parallel.tp=4 --sweep parallel.order=tp-pp-dp,auto >"$log" 2>&1 || rc=$?
said=$(grep -c "^tripar: error: --sweep parallel.order=auto: parallel.order auto: tp=4 cannot fit inside one node" "$log" || true)
if [ "$rc" = 2 ] && [ "$said" = 1 ] && ! ls "$out"/sweep*.h5 >/dev/null 2>&1; then
    echo "ok   sweep_auto_tp4: refused before any point computed, said once"
else
    echo "FAIL sweep_auto_tp4: exit $rc (expected 2), reason printed $said time(s); files:"
    ls "$out"/sweep* 2>/dev/null
    cat "$log"; fail=1
fi

# 3 ranks by slot: node1 holds 2, node2 1. The uneven-nodes warning names the counts.
log=$out/uneven.log
if run_limited 180 "$CLUSTER_MPIRUN" -n 3 "$TRIPAR_BIN" run "$job" --out "$out/uneven.h5" \
    --set parallel.order=auto --set parallel.pp=3 >"$log" 2>&1 &&
    [ "$(grep -c "warning: nodes hold different numbers of ranks: 2, 1 ranks (node1: 2, node2: 1)" "$log")" = 1 ]; then
    echo "ok   uneven: warned once about 2, 1 ranks"
else
    echo "FAIL uneven: no single uneven-nodes warning"; cat "$log"; fail=1
fi
exit $fail
