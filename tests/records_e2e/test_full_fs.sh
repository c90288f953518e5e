#!/usr/bin/env bash
# test_full_fs.sh MODE OUTDIR: a dp=2 run writing to a small tmpfs that it fills.
#   activations  3 MiB; record.activations: all (the logits alone are 6 MiB), timings: layer.
#                It fills at the end of the run, in the collective activation writes.
#   events       1 MiB; timings: layer, flush_every: 1, 20000 new tokens (minutes of work).
#                It fills mid-run, in a timing flush, and the run must stop there.
# Both: exit 1 well within 60 s (before the fix: a hang in H5Fflush, or an abort with an HDF5
# error stack), tripar's "no space left on device writing RUN.h5.partial..." exactly once, no
# HDF5 error stack, and the run's partial file opens with complete=0 and the job in it.
# Needs root to mount; otherwise skipped (exit 77) with the reason. Unmounts on any exit.
set -euo pipefail
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
"$py" -c 'import h5py, numpy, yaml' 2>/dev/null || { echo "SKIP: $py lacks h5py/numpy/yaml"; exit 77; }
mode=$1 out=$2
case $mode in
activations) size=3m sets=(model.synthetic.embd=256 model.synthetic.vocab=4000
    model.synthetic.ctx=80 input.synthetic.length=64 generate.new_tokens=4 "record.activations=all") ;;
events) size=1m sets=(model.synthetic.layers=2 model.synthetic.ctx=20010 generate.new_tokens=20000
    input.synthetic.batch=2 "record.activations=[]" record.flush_every=1) ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "SKIP: mounting a tmpfs needs root (uid $(id -u))"; exit 77; }
mkdir -p "$out"
mnt=$(mktemp -d "$out/full-$mode.XXXXXX")
if ! err=$(mount -t tmpfs -o "size=$size" tmpfs "$mnt" 2>&1); then
    rmdir "$mnt"
    echo "SKIP: cannot mount a $size tmpfs at $mnt: $err"
    exit 77
fi
mp=
cleanup() { # only what this script started, by pid; then the mount, lazily if still busy
    if [ -n "$mp" ]; then
        for p in $(pgrep -P "$mp" || true) "$mp"; do kill -KILL "$p" 2>/dev/null || true; done
    fi
    umount "$mnt" 2>/dev/null || { sleep 1; umount "$mnt" 2>/dev/null; } || umount -l "$mnt" || true
    rmdir "$mnt" 2>/dev/null || true
}
trap cleanup EXIT

run=$mnt/run.h5 log=$out/full-$mode.log
args=(--set parallel.dp=2 --set record.timings=layer)
for kv in "${sets[@]}"; do args+=(--set "$kv"); done
t0=$(date +%s)
"${MPIEXEC:-mpiexec}" -n 2 --oversubscribe "$TRIPAR_BIN" run "$here/mesh.yaml" --out "$run" \
    "${args[@]}" >"$log" 2>&1 &
mp=$!
for _ in $(seq 600); do # 60 s
    kill -0 "$mp" 2>/dev/null || break
    sleep 0.1
done
rc=0
if kill -0 "$mp" 2>/dev/null; then
    rc=124 # hung: cleanup ends it
else
    wait "$mp" || rc=$?
    mp=
fi
echo "$mode: exit $rc after $(($(date +%s) - t0)) s on a $size tmpfs"
sed -n '1,12p' "$log"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -ne 124 ] || fail "the run still runs 60 s later: hung on the full file system"
[ "$rc" -eq 1 ] || fail "exit $rc, want 1 (a runtime failure)"
n=$(grep -c "tripar: error: no space left on device writing $run.partial" "$log" || true)
[ "$n" -eq 1 ] || fail "tripar's 'no space left on device writing $run.partial...' printed $n times, want 1"
! grep -q "HDF5-DIAG" "$log" || fail "an HDF5 error stack was printed"
[ ! -e "$run" ] || fail "$run exists: a failed run claims to be complete"
partials=("$run".partial.*)
[ -e "${partials[0]}" ] || fail "no $run.partial.* left"
[ "${#partials[@]}" -eq 1 ] || fail "${#partials[@]} partial files: ${partials[*]}"
grep -qF "${partials[0]}" "$log" || fail "the message does not name ${partials[0]}"

"$py" - "${partials[0]}" "$mode" <<'PY'
import sys, h5py, yaml
path, mode = sys.argv[1], sys.argv[2]
with h5py.File(path, "r") as f:  # the file must open: it was closed, incomplete, by every rank
    fmt = f.attrs["format"]
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    job = f.attrs["job"]
    job = yaml.safe_load(job.decode() if isinstance(job, bytes) else job)
    errors = []
    if fmt != "tripar-run":
        errors.append("format %r" % fmt)
    if int(f.attrs["complete"]) != 0:
        errors.append("complete = %s, want 0" % f.attrs["complete"])
    if job["parallel"]["dp"] != 2 or f["mesh"].shape[0] != 2:
        errors.append("job or mesh not this run's: dp %s, %d mesh rows"
                      % (job["parallel"]["dp"], f["mesh"].shape[0]))
    if mode == "events":  # what was flushed before the file system filled is kept
        rows = [f["timings/rank_%05d/events" % r].shape[0] if "timings/rank_%05d/events" % r in f
                else 0 for r in range(2)]
        if min(rows) == 0:
            errors.append("events per rank %s: the flushes before the failure are lost" % rows)
for e in errors:
    print("FAIL: " + e)
if not errors:
    print("%s: ok, %s opens with complete=0" % (mode, path))
sys.exit(1 if errors else 0)
PY
# (no exec: the EXIT trap unmounts)
