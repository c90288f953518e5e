#!/usr/bin/env bash
# A node that dies mid-run ends the whole run: on 2 nodes x 2 ranks, every tripar rank on node2
# is killed (SIGKILL) a few seconds into a long run; every other rank, and mpirun, must be gone
# within 10 s, the launcher's message must name node2, and the run's partial file must open with
# complete = 0. With --whole-node,
# every process in node2's namespaces goes (its Open MPI daemon too), as when a machine dies.
# The two faults nothing reports, which only the stall watchdog ends (record.stall_seconds, 5 s
# here): --stop freezes every tripar rank on node2 (SIGSTOP), --link-down takes node2's link
# down on the switch side. Then every node1 rank must print its stall line naming node2, and
# node1's ranks and mpirun must be gone within 45 s (the contract is 5 + 10 s; the rest is
# slack for a busy machine, so only a hang fails); the time taken is printed.
#   check_node_kill.sh STATE WORKDIR JOB [--whole-node|--stop|--link-down]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
state=$1 work=$2 job=$3 mode=${4:-ranks}
cluster_require "$state"
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
rm -rf "$work"
mkdir -p "$work"
out=$work/long.h5
victim=2 # the node whose processes die

# Processes of node K: those in its UTS namespace (the process table is shared by all nodes).
node_pids() { # K [comm] -> pids
    local holder uts p
    holder=$(awk -v n="node$1" '$1 == n { print $3 }' "$state/nodes")
    uts=$(readlink "/proc/$holder/ns/uts")
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/ns/uts" 2>/dev/null)" = "$uts" ] || continue
        [ "${p#/proc/}" != "$holder" ] || continue
        [ -z "${2:-}" ] || [ "$(cat "$p/comm" 2>/dev/null)" = "$2" ] || continue
        echo "${p#/proc/}"
    done
}

stall=0 bound=10
case $mode in --stop | --link-down) stall=5 bound=45 ;; esac
link_restore() { :; }
# About 20 s of decoding on this machine: long enough that the kill lands mid-run.
"$CLUSTER_MPIRUN" -n 4 --oversubscribe "$TRIPAR_BIN" run "$job" --out "$out" \
    --set parallel.tp=2 --set parallel.pp=2 --set model.synthetic.ctx=1024 \
    --set generate.new_tokens=1000 --set 'record.activations=[]' \
    --set record.stall_seconds=$((stall > 0 ? stall : 60)) >"$work/run.log" 2>&1 &
launcher=$!
# Wait until every rank runs and the partial file exists (rank 0 writes it at start-up).
for _ in $(seq 1 300); do
    if [ "$(node_pids 1 tripar | wc -l)" = 2 ] && [ "$(node_pids $victim tripar | wc -l)" = 2 ] &&
        compgen -G "$out.partial.*" >/dev/null; then break; fi
    kill -0 "$launcher" 2>/dev/null || { cat "$work/run.log"; echo "FAIL: the run ended before the kill"; exit 1; }
    sleep 0.1
done
sleep 2 # into the decode loop
kill -0 "$launcher" 2>/dev/null || { cat "$work/run.log"; echo "FAIL: the run ended before the kill"; exit 1; }
survivors=$(node_pids 1 tripar)
if [ "$mode" = --whole-node ]; then
    victims=$(node_pids $victim)
else
    victims=$(node_pids $victim tripar)
fi
[ -n "$victims" ] || { echo "FAIL: no tripar rank found on node$victim"; exit 1; }
t0=$(date +%s.%N)
case $mode in
--stop)
    echo "stopping on node$victim: $victims"
    # shellcheck disable=SC2086
    kill -STOP $victims
    # whatever happens next, nothing of this test stays frozen
    link_restore() { kill -CONT $victims 2>/dev/null || true; kill -9 $victims 2>/dev/null || true; } ;;
--link-down)
    echo "link down: node$victim's port v$victim on the switch"
    "$here/cluster.sh" exec "$state" 0 ip link set "v$victim" down
    link_restore() {
        "$here/cluster.sh" exec "$state" 0 ip link set "v$victim" up || true
        kill -9 $victims $(node_pids $victim orted) 2>/dev/null || true
    } ;;
*)
    echo "killing on node$victim: $(for p in $victims; do printf '%s(%s) ' "$p" "$(cat "/proc/$p/comm" 2>/dev/null)"; done)"
    # shellcheck disable=SC2086
    kill -9 $victims ;;
esac
trap link_restore EXIT
ended=""
for _ in $(seq 1 $((bound * 10 + 50))); do
    alive=""
    for p in $survivors $launcher; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
    [ -n "$alive" ] || { ended=$(date +%s.%N); break; }
    sleep 0.1
done
if [ -z "$ended" ]; then
    echo "FAIL: $((bound + 5)) s after the fault, still running:$alive"
    for p in $alive; do tr '\0' ' ' <"/proc/$p/cmdline"; echo; done
    kill -9 $alive 2>/dev/null || true
    cat "$work/run.log"
    exit 1
fi
wait "$launcher" && rc=0 || rc=$?
elapsed=$(/usr/bin/python3 -c "print(f'{$ended - $t0:.1f}')")
echo "every other rank and mpirun ended $elapsed s after the fault (mpirun exit $rc)"
tail -n 5 "$work/run.log"
[ "$rc" != 0 ] || { echo "FAIL: mpirun reported success for a run that lost a node"; exit 1; }
# a lost node is named: by the launcher ("on node node2") when it saw the node's processes go, by
# each node1 rank's stall line otherwise (below)
if [ "$stall" -eq 0 ]; then
    grep -F "on node node2" "$work/run.log" ||
        { echo "FAIL: no message naming node2"; cat "$work/run.log"; exit 1; }
fi
if [ "$stall" -gt 0 ]; then
    # node1's ranks 0 and 1 (by slot) each say what they waited in, naming node2
    for r in 0 1; do
        grep -E "^tripar: stall: \[rank $r host node1\] no progress for [0-9.]+ s, waiting in .*node2" \
            "$work/run.log" || { echo "FAIL: no stall line of rank $r naming node2"; cat "$work/run.log"; exit 1; }
    done
fi
/usr/bin/python3 - "$out" "$elapsed" "$bound" "$stall" <<'PY'
import glob, sys
import h5py
out, elapsed, bound, stall = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
if elapsed > bound:
    sys.exit(f"FAIL: the other ranks took {elapsed} s (> {bound} s) to end")
if elapsed < stall:
    sys.exit(f"FAIL: ended {elapsed} s after the fault, before the {stall} s stall timeout")
# (Open MPI's OMPIO leaves a FILE-JOBID-PID.lock beside a file it had open when killed.)
partials = [p for p in glob.glob(out + ".partial.*") if not p.endswith(".lock")]
if len(partials) != 1:
    sys.exit(f"FAIL: expected one partial file, found {partials}")
with h5py.File(partials[0], "r") as f:
    complete = int(f.attrs["complete"])
    hosts = sorted({h.decode() for h in f["/mesh"]["host"]})
print(f"{partials[0]}: complete = {complete}, /mesh hosts {hosts}")
if complete != 0 or hosts != ["node1", "node2"]:
    sys.exit("FAIL: the partial file should say complete = 0 and name node1 and node2")
import os
if os.path.exists(out):
    sys.exit(f"FAIL: {out} exists: a run that lost a node must not look finished")
print("ok")
PY
