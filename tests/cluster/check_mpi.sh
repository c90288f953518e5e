#!/usr/bin/env bash
# Open MPI across the emulated nodes really is across nodes: each rank's gethostname() is its
# node's (node1 holds ranks 0..S-1), ranks on different nodes exchange data over TCP, and
# shared memory alone (btl self,vader) cannot join them.
#   check_mpi.sh STATE PINGPONG
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
state=$1 pingpong=$2
cluster_require "$state"
world=$((CLUSTER_NODES * CLUSTER_SLOTS))
out=$state/log/check_mpi

# Bytes received on node2's emulated interface (/proc/net/dev is the reader's namespace's).
node2_rx() { "$CLUSTER_SH" exec "$state" 2 awk -v i="$CLUSTER_IFACE:" '$1 == i { print $2 }' /proc/net/dev; }
rx0=$(node2_rx)
run_limited 120 "$CLUSTER_MPIRUN" -n "$world" "$pingpong" 20 >"$out.tcp" 2>&1 ||
    { cat "$out.tcp"; echo "FAIL: pingpong over tcp,self,vader"; exit 1; }
cat "$out.tcp"
rx=$(($(node2_rx) - rx0))
echo "node2 received $rx bytes on $CLUSTER_IFACE"
[ "$rx" -gt 0 ] || { echo "FAIL: nothing crossed the emulated link"; exit 1; }
expected=""
for r in $(seq 0 $((world - 1))); do expected+="rank $r host node$((r / CLUSTER_SLOTS + 1))"$'\n'; done
actual=$(grep '^rank ' "$out.tcp")$'\n'
[ "$actual" = "$expected" ] || { echo "FAIL: hosts by rank differ from the slot placement:"; echo "$expected"; exit 1; }
grep -q '^oneway inter [0-9.]* us (ranks 0 and '"$CLUSTER_SLOTS"')' "$out.tcp" ||
    { echo "FAIL: no inter-node exchange between rank 0 and rank $CLUSTER_SLOTS"; exit 1; }

# --map-by node deals ranks round-robin over the nodes: rank 1 lands on node2.
run_limited 120 "$CLUSTER_MPIRUN" -n 2 --map-by node "$pingpong" 5 >"$out.bynode" 2>&1 ||
    { cat "$out.bynode"; echo "FAIL: pingpong --map-by node"; exit 1; }
grep -q '^rank 1 host node2$' "$out.bynode" || { cat "$out.bynode"; echo "FAIL: --map-by node"; exit 1; }

# Without the TCP transport the two nodes cannot reach each other: Open MPI must say so.
if run_limited 120 "$CLUSTER_MPIRUN" -n "$world" --mca btl self,vader "$pingpong" 5 >"$out.vader" 2>&1; then
    cat "$out.vader"; echo "FAIL: btl self,vader alone joined ranks on different nodes"; exit 1
fi
grep -q 'unable to reach each other\|BTLs attempted: .*vader' "$out.vader" ||
    { cat "$out.vader"; echo "FAIL: btl self,vader failed, but not for want of a route between nodes"; exit 1; }
echo "ok: btl self,vader alone fails across nodes ($(grep -m1 'is on host' "$out.vader" | sed 's/^ *//'))"
echo "ok: $world ranks on $CLUSTER_NODES nodes over TCP"
