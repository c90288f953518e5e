#!/usr/bin/env bash
# test_signal.sh MODE OUTDIR: a long real run (20000 new tokens) interrupted mid-run.
#   term-mpirun  SIGTERM to mpirun, which forwards it to the 4 ranks (tp2 pp2)
#   term-rank    SIGTERM to one of 2 ranks (pp2) only: the stop vote must stop both
#   kill-rank    SIGKILL to one of 4 ranks (tp2 pp2), not to mpirun
#   kill-alone   SIGKILL to one of 2 ranks (pp2), the run in a folder of its own, with Open MPI's
#                node-local shared-file-pointer module (sm) ruled out as on several nodes: the
#                folder must then hold the partial file and nothing else (no OMPIO `.lock`,
#                `.data.N` or `.metadata.N` side file; docs/schema.md)
#   term-stalled SIGSTOP to one of 2 ranks (pp2), then SIGTERM to the other: the stop vote can
#                never complete, so the signalled rank leaves by itself after
#                record.stop_grace_seconds (2 here) and the launcher ends the stopped one
#   stall        SIGSTOP to one of 2 ranks (pp2) and no signal at all: the other's stall
#                watchdog (record.stall_seconds 5 here) reports what it waits in and for whom,
#                and ends the run
# term-*: exit 1 within a bound, RUN.h5 absent, RUN.h5.partial.HOST.PID (the run's own partial
# file, named in the stop message) readable with complete=0, every
# rank's events present (flushed), all ranks stopped after the same step, tools accept the file.
# kill-rank: every rank gone within 30 s, mpirun exits non-zero, no file claims complete=1.
# term-stalled: every rank gone within 10 s, no sooner than the grace, its message once, the
# partial file readable with complete=0.
# stall: every rank gone no sooner than the 5 s timeout and within 60 s (the contract is 5 + 10 s;
# the rest is slack for a busy machine: only a hang fails), rank 0's stall line naming rank 1
# (or the run file's collective write, when the stop lands in a flush),
# exit 1, the partial file readable with complete=0.
# SIGNAL_EXTRA_SETS (space-separated KEY=V) adds --sets to the run: tests/gpu/e2e.sh runs the
# stall mode on the cuda backend with it (NCCL, or the staged MPI comm on one GPU).
# The run takes minutes uninterrupted, so the signal always lands while it generates; the test
# itself takes a few seconds. Nothing here depends on machine speed beyond "not 1000x faster".
set -euo pipefail
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
"$py" -c 'import h5py, numpy, yaml' 2>/dev/null || { echo "SKIP: $py lacks h5py/numpy/yaml"; exit 77; }
mode=$1 out=$2
mkdir -p "$out"
run="$out/$mode.h5"
[ "$mode" = kill-alone ] && rm -rf "${out:?}/$mode" && mkdir "$out/$mode" && run="$out/$mode/$mode.h5"
rm -f "$run" "$run".partial*
case $mode in
term-mpirun) np=4 mesh=(parallel.tp=2 parallel.pp=2) ;;
term-rank) np=2 mesh=(parallel.pp=2 parallel.microbatches=2) ;;
kill-rank) np=4 mesh=(parallel.tp=2 parallel.pp=2) ;;
kill-alone) np=2 mesh=(parallel.pp=2) && export OMPI_MCA_sharedfp_sm_priority=0 ;;
term-stalled) np=2 mesh=(parallel.pp=2 record.stop_grace_seconds=2) ;;
stall) np=2 mesh=(parallel.pp=2 record.stall_seconds=5) ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
sets=()
for kv in "${mesh[@]}" model.synthetic.layers=2 model.synthetic.ctx=20010 generate.new_tokens=20000 \
    input.synthetic.batch=2 "record.activations=[]" record.timings=layer record.flush_every=20 \
    ${SIGNAL_EXTRA_SETS:-}; do
    sets+=(--set "$kv")
done

"${MPIEXEC:-mpiexec}" -n "$np" --oversubscribe "$TRIPAR_BIN" run "$here/mesh.yaml" --out "$run" \
    "${sets[@]}" >"$out/$mode.log" 2>&1 &
mp=$!
ranks=()
cleanup() { # only what this script started, by pid
    for p in "${ranks[@]}" "$mp"; do kill -KILL "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# Running means: the run file exists and the first flushes went out.
partial=
for _ in $(seq 600); do
    found=("$run".partial.*) # the run's own partial file, RUN.h5.partial.HOST.PID
    [ -e "${found[0]}" ] && partial=${found[0]} && break
    kill -0 "$mp" 2>/dev/null || { echo "FAIL: the run ended before it started"; cat "$out/$mode.log"; exit 1; }
    sleep 0.1
done
[ -n "$partial" ] || { echo "FAIL: no $run.partial.* after 60 s"; exit 1; }
sleep 1.5
mapfile -t ranks < <(pgrep -P "$mp" || true)
[ "${#ranks[@]}" -eq "$np" ] || { echo "FAIL: mpirun has ${#ranks[@]} children, want $np"; exit 1; }
kill -0 "$mp" 2>/dev/null || { echo "FAIL: the run finished before the signal (raise new_tokens)"; exit 1; }

t0=$(date +%s)
case $mode in
term-mpirun) kill -TERM "$mp" ;;
term-rank) kill -TERM "${ranks[1]}" ;;
kill-rank) kill -KILL "${ranks[2]}" ;;
kill-alone) kill -KILL "${ranks[1]}" ;;
term-stalled) kill -STOP "${ranks[1]}" && kill -TERM "${ranks[0]}" ;;
stall) kill -STOP "${ranks[1]}" ;;
esac
bound=30
[ "$mode" = term-stalled ] && bound=10
[ "$mode" = stall ] && bound=60
rc=0
for _ in $(seq $((bound * 10))); do
    kill -0 "$mp" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$mp" 2>/dev/null; then
    echo "FAIL: mpirun still running ${bound} s after the signal"; exit 1
fi
wait "$mp" || rc=$?
left=0
alive() { # a zombie (exited, not yet reaped by its new parent) is gone
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null || true)
    [ -n "$st" ] && [ "${st#Z}" = "$st" ]
}
for _ in $(seq 50); do # mpirun reaps its ranks before exiting; allow a moment for stragglers
    left=0
    for p in "${ranks[@]}"; do alive "$p" && left=$((left + 1)); done
    [ "$left" -eq 0 ] && break
    sleep 0.1
done
elapsed=$(($(date +%s) - t0))
echo "$mode: mpirun exit $rc after ${elapsed} s, $left rank(s) left"
tail -3 "$out/$mode.log"
[ "$left" -eq 0 ] || { echo "FAIL: $left rank(s) outlived mpirun"; exit 1; }
[ "$rc" -ne 0 ] || { echo "FAIL: exit 0 after a signal"; exit 1; }
[ ! -e "$run" ] || { echo "FAIL: $run exists: a killed run claims to be complete"; exit 1; }

if [ "$mode" = stall ]; then
    [ "$elapsed" -ge 5 ] || { echo "FAIL: ended after ${elapsed} s, before the 5 s timeout"; exit 1; }
    [ "$rc" -eq 1 ] || { echo "FAIL: exit $rc, want 1"; exit 1; }
    # rank 0 (stage 0) waits for rank 1: its next tokens, its activations, the stop vote, the
    # flush vote, or a flush's collective write (every 20 steps here) that rank 1 never joins
    grep -E "^tripar: stall: \[rank 0 host [^]]+\] no progress for [0-9.]+ s, waiting in (PP receive from rank 1 \(host [^)]+\)|(PP|world|flush-vote) [a-z-]+ of ranks 0,1 \(hosts [^)]+\)|run-file write \(collective over every rank\)|NCCL stream wait \(its TP and PP groups\))" \
        "$out/$mode.log" || { echo "FAIL: no stall line of rank 0 naming rank 1"; cat "$out/$mode.log"; exit 1; }
fi
if [ "$mode" = term-stalled ]; then
    [ "$elapsed" -ge 2 ] || { echo "FAIL: ended after ${elapsed} s, before the 2 s grace"; exit 1; }
    said=$(grep -c "tripar: error: not stopped 2 s after the signal" "$out/$mode.log" || true)
    [ "$said" -eq 1 ] || { echo "FAIL: the overdue-stop message appears $said times, want 1"; exit 1; }
fi
if [ "$mode" = term-stalled ] || [ "$mode" = stall ]; then
    exec "$py" - "$partial" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
c = int(f.attrs["complete"])
print("partial file readable: complete=%d, world %d" % (c, int(f.attrs["world_size"])))
sys.exit(0 if c == 0 else 1)
PY
fi
if [ "$mode" = kill-alone ]; then
    mapfile -t beside < <(find "$out/$mode" -mindepth 1 ! -path "$partial")
    [ "${#beside[@]}" -eq 0 ] || { echo "FAIL: beside the partial file: ${beside[*]}"; exit 1; }
    echo "kill-alone: the folder holds only $(basename "$partial")"
fi
if [ "$mode" = kill-rank ] || [ "$mode" = kill-alone ]; then
    exec "$py" - "$partial" <<'PY'
import sys, h5py
path = sys.argv[1]
try:
    f = h5py.File(path, "r")
except OSError as exc:
    print("partial file unreadable after SIGKILL (allowed): %s" % exc)
    sys.exit(0)
c = int(f.attrs.get("complete", -1))
n = [f["timings/rank_%05d/events" % r].shape[0] for r in range(int(f.attrs["world_size"]))
     if "timings/rank_%05d/events" % r in f]
print("partial file readable: complete=%d, events per rank %s" % (c, n))
sys.exit(0 if c == 0 else 1)
PY
fi

[ "$rc" -eq 1 ] || { echo "FAIL: exit $rc, want 1 (runtime failure: stopped)"; exit 1; }
grep -qF "stopped by signal; $partial holds" "$out/$mode.log" ||
    { echo "FAIL: no 'stopped by signal; $partial holds' message"; exit 1; }
"$py" "$here/check_schema.py" "$here/../../docs/schema.md" "$partial" --partial
HERE=$here "$py" - "$partial" <<'PY'
import os, sys
sys.path.insert(0, os.environ["HERE"])
import e2e_lib as L
from e2e_lib import expect, np
run = L.Run(sys.argv[1])
expect(int(run.attrs["complete"]) == 0, "complete = %s" % run.attrs["complete"])
last = []
for r, ev in enumerate(run.events):
    if not expect(ev is not None and len(ev["phase"]) > 0, "rank %d: no events flushed" % r):
        continue
    expect(bool((ev["t_end"] >= ev["t_start"]).all()), "rank %d: t_end < t_start" % r)
    steps = ev["step"][ev["phase"] == "step"]
    n_micro = len(run.mb_sizes(r))
    s = int(steps.max())
    last.append(s)
    # whole steps only: every micro-batch of steps 0..s, each once
    expect(len(steps) == (s + 1) * n_micro, "rank %d: %d step events for steps 0..%d x %d "
           "micro-batches" % (r, len(steps), s, n_micro))
    expect(0 < s < run.new_tokens - 1, "rank %d: last step %d is not mid-run" % (r, s))
    expect((ev["phase"] == "iteration").sum() == 1, "rank %d: the interrupted iteration's "
           "event is missing" % r)
expect(len(set(last)) == 1, "ranks stopped after different steps: %s" % last)
print("stopped after step %s on every rank" % (last[0] if last else "?"))
L.finish("partial file")
PY
rc=0
"$TRIPAR_BIN" report "$partial" >"$out/$mode.report" 2>&1 || rc=$?
[ $rc -eq 0 ] && grep -q "incomplete run file" "$out/$mode.report" ||
    { echo "FAIL: report on the partial file (exit $rc)"; cat "$out/$mode.report"; exit 1; }
rc=0
"$TRIPAR_BIN" trace "$partial" -o "$out/$mode.trace.json" >"$out/$mode.trace.log" 2>&1 || rc=$?
[ $rc -eq 0 ] && grep -q "incomplete" "$out/$mode.trace.log" ||
    { echo "FAIL: trace on the partial file (exit $rc)"; cat "$out/$mode.trace.log"; exit 1; }
echo "$mode: ok"
