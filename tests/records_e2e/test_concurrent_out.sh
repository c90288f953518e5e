#!/usr/bin/env bash
# test_concurrent_out.sh OUTDIR: two runs (2 ranks each) writing one --out at once, with
# different model seeds, so their tokens differ. Each must succeed (before the fix they shared
# RUN.h5.partial: one exited 1 and the file held its job), and RUN.h5 must be whole and one
# run's own: complete=1, and the tokens of the seed its job records, as a run of that seed
# alone writes them. No partial file is left behind.
set -euo pipefail
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
"$py" -c 'import h5py, numpy, yaml' 2>/dev/null || { echo "SKIP: $py lacks h5py/numpy/yaml"; exit 77; }
out=$1
mkdir -p "$out"
run=$out/shared.h5
rm -f "$out"/shared.h5* "$out"/alone-*.h5*
sets=()
for kv in parallel.pp=2 model.synthetic.layers=2 model.synthetic.ctx=1010 generate.new_tokens=1000 \
    input.synthetic.batch=2 "record.activations=[]"; do
    sets+=(--set "$kv")
done
start() { # seed out log: one run in the background
    "${MPIEXEC:-mpiexec}" -n 2 --oversubscribe "$TRIPAR_BIN" run "$here/mesh.yaml" --out "$2" \
        "${sets[@]}" --set "model.synthetic.seed=$1" >"$3" 2>&1 &
}
pids=()
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# the two at once, each some seconds long
start 5 "$run" "$out/shared-5.log"
pids+=($!)
start 7 "$run" "$out/shared-7.log"
pids+=($!)
rc5=0 rc7=0
wait "${pids[0]}" || rc5=$?
wait "${pids[1]}" || rc7=$?
pids=()
echo "seed 5: exit $rc5; seed 7: exit $rc7"
tail -n 3 "$out/shared-5.log" "$out/shared-7.log"

# each seed alone, for its tokens
for seed in 5 7; do
    start "$seed" "$out/alone-$seed.h5" "$out/alone-$seed.log"
    wait $! || { echo "FAIL: the run of seed $seed alone failed"; cat "$out/alone-$seed.log"; exit 1; }
done

"$py" - "$run" "$out" "$rc5" "$rc7" <<'PY'
import glob, sys, h5py, numpy as np, yaml
run, out, rc = sys.argv[1], sys.argv[2], {5: int(sys.argv[3]), 7: int(sys.argv[4])}
errors = []
for seed, code in rc.items():
    if code != 0:
        errors.append("the run of seed %d exited %d, want 0: concurrent runs must not break "
                      "each other (see %s/shared-%d.log)" % (seed, code, out, seed))
left = glob.glob(run + ".partial*")
if left:
    errors.append("partial files left behind: %s" % left)
try:
    with h5py.File(run, "r") as f:
        job = f.attrs["job"]
        job = yaml.safe_load(job.decode() if isinstance(job, bytes) else job)
        seed = job["model"]["synthetic"]["seed"]
        complete = int(f.attrs["complete"])
        tokens = f["output/tokens"][()]
except (OSError, KeyError) as exc:
    errors.append("%s: %s" % (run, exc))
    seed = None
if seed is not None:
    if complete != 1:
        errors.append("%s has complete=%d" % (run, complete))
    if rc.get(seed, 1) != 0:
        errors.append("%s holds the job of seed %s, which did not succeed" % (run, seed))
    with h5py.File("%s/alone-%d.h5" % (out, seed), "r") as f:
        alone = f["output/tokens"][()]
    if not np.array_equal(tokens, alone):
        errors.append("%s records seed %d but its tokens are not that run's" % (run, seed))
    with h5py.File("%s/alone-%d.h5" % (out, 12 - seed), "r") as f:
        if np.array_equal(alone, f["output/tokens"][()]):
            errors.append("seeds 5 and 7 give the same tokens: the check proves nothing")
for e in errors:
    print("FAIL: " + e)
if not errors:
    print("ok: both runs succeeded; %s is the whole run of seed %d" % (run, seed))
sys.exit(1 if errors else 0)
PY
