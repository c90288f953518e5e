#!/usr/bin/env bash
# test_startup_stall.sh OUTDIR: one of 2 ranks frozen (SIGSTOP) before it reaches MPI_Init, so
# the other waits in MPI_Init for good. The stall watchdog, started before MPI_Init (the set-up
# mode of parallel/watchdog.h, whose least timeout is 30 s), must end the job: rank 0's line
# names MPI_Init, mpirun exits non-zero, every process is gone, no run file claims to be
# complete. Bound: no sooner than the 30 s set-up timeout, and within 90 s (the contract is
# 30 + 10 s; the rest is slack for a busy machine: only a hang fails). The soak (jobs/soak.sh)
# found this hang at random; here the freeze is placed on purpose by a shell that stops itself
# before it execs tripar.
set -euo pipefail
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
here=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$out"
run="$out/startup-stall.h5" log="$out/startup-stall.log"
rm -f "$run" "$run".partial*
# rank 1 stops itself: the launcher's rank process is this shell until the exec
"${MPIEXEC:-mpiexec}" -n 2 --oversubscribe sh -c \
    'if [ "${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}" = 1 ]; then kill -STOP $$; fi; exec "$0" "$@"' \
    "$TRIPAR_BIN" run "$here/mesh.yaml" --out "$run" --set parallel.pp=2 \
    --set record.stall_seconds=5 >"$log" 2>&1 &
mp=$!
t0=$(date +%s)
cleanup() { pkill -KILL -P "$mp" 2>/dev/null || true; kill -KILL "$mp" 2>/dev/null || true; }
trap cleanup EXIT
sleep 1
mapfile -t ranks < <(pgrep -P "$mp" || true)
bound=90 rc=0
for _ in $(seq $((bound * 10))); do
    kill -0 "$mp" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$mp" 2>/dev/null; then
    echo "FAIL: mpirun still running ${bound} s after the start (a rank frozen before MPI_Init)"
    cat "$log"; exit 1
fi
wait "$mp" || rc=$?
elapsed=$(($(date +%s) - t0))
sleep 0.5
left=0
for p in "${ranks[@]}"; do
    st=$(ps -o stat= -p "$p" 2>/dev/null || true)
    [ -n "$st" ] && [ "${st#Z}" = "$st" ] && left=$((left + 1))
done
echo "startup-stall: mpirun exit $rc after ${elapsed} s, $left rank process(es) left"
grep "tripar: stall" "$log" || true
[ "$left" -eq 0 ] || { echo "FAIL: $left rank process(es) outlived mpirun"; exit 1; }
[ "$rc" -ne 0 ] || { echo "FAIL: exit 0"; exit 1; }
[ "$elapsed" -ge 29 ] || { echo "FAIL: ended after ${elapsed} s, before the 30 s set-up timeout"; exit 1; }
[ ! -e "$run" ] || { echo "FAIL: $run exists: a run that never started claims to be complete"; exit 1; }
said=$(grep -cE "^tripar: stall: \[rank 0 host [^]]+\] no progress for [0-9.]+ s, waiting in MPI_Init for every rank of the job to start .*at least 30 s in set-up\)$" "$log" || true)
[ "$said" -eq 1 ] || { echo "FAIL: rank 0's MPI_Init stall line appears $said times, want 1"; cat "$log"; exit 1; }
echo "PASS"
