#!/usr/bin/env bash
# test_kill_default.sh MODE OUTDIR: a long 2-rank run (pp2, 20000 new tokens) with every rank
# killed by SIGKILL, as a node loss or the OOM killer would.
#   default  the default flush settings (no flush_every, no flush_seconds), killed 3 s into the
#            generation: the partial file must open (before the fix it was no HDF5 file at
#            all), with the job, the mesh and complete=0.
#   seconds  record.flush_seconds=1 and no flush_every: the timing events of every rank must
#            reach the partial file while the run goes on, from the time-based flush alone.
set -euo pipefail
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
"$py" -c 'import h5py, numpy, yaml' 2>/dev/null || { echo "SKIP: $py lacks h5py/numpy/yaml"; exit 77; }
mode=$1 out=$2
case $mode in
default) extra=() ;;
seconds) extra=(--set record.flush_seconds=1) ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
mkdir -p "$out"
run=$out/kill-$mode.h5
rm -f "$run" "$run".partial*
sets=()
for kv in parallel.pp=2 model.synthetic.layers=2 model.synthetic.ctx=20010 generate.new_tokens=20000 \
    input.synthetic.batch=2 "record.activations=[]" record.timings=layer; do
    sets+=(--set "$kv")
done
"${MPIEXEC:-mpiexec}" -n 2 --oversubscribe "$TRIPAR_BIN" run "$here/mesh.yaml" --out "$run" \
    "${sets[@]}" "${extra[@]}" >"$out/kill-$mode.log" 2>&1 &
mp=$!
ranks=()
cleanup() { for p in "${ranks[@]}" "$mp"; do kill -KILL "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$out/kill-$mode.log"; exit 1; }

partial=
for _ in $(seq 600); do
    found=("$run".partial*) # the run's own partial file, RUN.h5.partial.HOST.PID
    [ -e "${found[0]}" ] && partial=${found[0]} && break
    kill -0 "$mp" 2>/dev/null || fail "the run ended before it started"
    sleep 0.1
done
[ -n "$partial" ] || fail "no $run.partial.* after 60 s"

# Python reads the partial file while the run writes it: the events of every rank must appear
# within 30 s. A read may meet a flush half done: it is retried.
watch_events() {
    "$py" - "$partial" <<'PY'
import sys, time, h5py
path, deadline, last = sys.argv[1], time.time() + 30, "never opened"
while time.time() < deadline:
    try:
        with h5py.File(path, "r") as f:
            rows = [f["timings/rank_%05d/events" % r].shape[0]
                    if "timings/rank_%05d/events" % r in f else 0 for r in range(2)]
        if min(rows) > 0:
            print("events reached the file while running: %s rows per rank" % rows)
            sys.exit(0)
        last = "events per rank %s" % rows
    except (OSError, KeyError) as exc:
        last = str(exc)
    time.sleep(0.5)
print("FAIL: no timing events of every rank in the file after 30 s (%s)" % last)
sys.exit(1)
PY
}
if [ "$mode" = seconds ]; then
    watch_events || fail "the time-based flush wrote nothing"
else
    sleep 3
fi
kill -0 "$mp" 2>/dev/null || fail "the run finished before the kill (raise new_tokens)"
mapfile -t ranks < <(pgrep -P "$mp" || true)
[ "${#ranks[@]}" -eq 2 ] || fail "mpirun has ${#ranks[@]} children, want 2"
for p in "${ranks[@]}"; do kill -KILL "$p"; done
rc=0
for _ in $(seq 300); do kill -0 "$mp" 2>/dev/null || break; sleep 0.1; done
kill -0 "$mp" 2>/dev/null && fail "mpirun still runs 30 s after its ranks were killed"
wait "$mp" || rc=$?
echo "$mode: mpirun exit $rc after SIGKILL of both ranks"
[ "$rc" -ne 0 ] || fail "exit 0 after SIGKILL"
[ ! -e "$run" ] || fail "$run exists: a killed run claims to be complete"
[ "$mode" = default ] || exit 0

"$py" - "$partial" <<'PY'
import sys, h5py, yaml
path = sys.argv[1]
errors = []
try:
    f = h5py.File(path, "r")
except OSError as exc:
    print("FAIL: %s is no HDF5 file after SIGKILL: %s" % (path, exc))
    sys.exit(1)
with f:
    fmt = f.attrs.get("format", b"")
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    if fmt != "tripar-run":
        errors.append("format %r" % fmt)
    if int(f.attrs.get("complete", -1)) != 0:
        errors.append("complete = %s, want 0" % f.attrs.get("complete"))
    job = f.attrs.get("job", b"")
    job = yaml.safe_load(job.decode() if isinstance(job, bytes) else job) or {}
    record = job.get("record", {})
    if record.get("flush_every") != 0 or record.get("flush_seconds") != 10:
        errors.append("not the default flush settings: %s" % record)
    if job.get("generate", {}).get("new_tokens") != 20000:
        errors.append("the job is not this run's: %s" % job.get("generate"))
    if "mesh" not in f or f["mesh"].shape[0] != 2 or int(f.attrs.get("world_size", 0)) != 2:
        errors.append("no /mesh of 2 ranks")
for e in errors:
    print("FAIL: " + e)
if not errors:
    print("default: ok, %s opens after SIGKILL: job, mesh, complete=0" % path)
sys.exit(1 if errors else 0)
PY
