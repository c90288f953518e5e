#!/usr/bin/env bash
# test_preempt.sh OUTDIR: plants preemption and checks /sched sees it. Two ranks (tp = 2), each
# pinned to its own core; a busy loop pinned to rank 1's core (raised priority when allowed) for
# the whole run. A busy loop sharing one core always leaves the rank there runnable but not
# running, so rank 1's summed run_delay must be > 0 and larger than rank 0's, whatever else the
# machine runs (other load is unpinned and the scheduler moves it off the crowded core). This
# checks behaviour, not speed: no time is compared with a bound.
set -euo pipefail
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
"$py" -c 'import h5py, numpy, yaml' 2>/dev/null || { echo "SKIP: $py lacks h5py/numpy/yaml"; exit 77; }
[ -r /proc/self/schedstat ] || { echo "SKIP: no /proc/self/schedstat (kernel without schedstats)"; exit 77; }
command -v taskset >/dev/null || { echo "SKIP: no taskset"; exit 77; }
read -r -a cpus <<<"$("$py" -c 'import os; print(*sorted(os.sched_getaffinity(0))[:2])')"
[ "${#cpus[@]}" -ge 2 ] || { echo "SKIP: fewer than 2 cores allowed (${#cpus[@]})"; exit 77; }
out=$1
mkdir -p "$out"
rm -f "$out/preempt.h5" "$out/preempt.h5".partial*

# The ranks and the planted load run above normal priority where allowed (root), without
# yielding while they wait (mpi_yield_when_idle 0): a rank that polls for a slow peer is
# runnable all the while, so unpinned load on rank 0's core would delay it as much as the
# planted loops delay rank 1; raised, the ranks outrank that load, and rank 1 still shares its
# core with three loops of its own priority (about a quarter of it left).
prio=()
if nice -n -10 true 2>/dev/null; then prio=(nice -n -10); fi
# each rank pins itself (and the threads it starts) before tripar starts
pin="$out/pin_rank.sh"
cat >"$pin" <<PIN
#!/bin/sh
r=\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}
if [ "\$r" = 0 ]; then c=${cpus[0]}; else c=${cpus[1]}; fi
exec ${prio[*]} taskset -c "\$c" "\$@"
PIN
chmod +x "$pin"

busy=()
for _ in 1 2 3; do # each its own session: with autogroups on, a group of its own, full weight
    setsid taskset -c "${cpus[1]}" "${prio[@]}" sh -c 'while :; do :; done' &
    busy+=($!)
done
trap 'kill "${busy[@]}" 2>/dev/null || true' EXIT

if ! OMPI_MCA_mpi_yield_when_idle=0 timeout 300 "${MPIEXEC:-mpiexec}" -n 2 --oversubscribe --bind-to none "$pin" "$TRIPAR_BIN" \
    run "$here/mesh.yaml" --out "$out/preempt.h5" --set parallel.tp=2 \
    --set model.synthetic.embd=1024 \
    --set generate.new_tokens=8 --set bench.warmup=0 --set bench.iterations=2 \
    --set record.timings=step --set 'record.activations=[]' >"$out/preempt.log" 2>&1; then
    echo "FAIL: the run failed"; cat "$out/preempt.log"; exit 1
fi
kill "${busy[@]}" 2>/dev/null || true

exec "$py" - "$out/preempt.h5" <<'PY'
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1], "r") as f:
    if "sched" not in f:
        print("FAIL: no /sched group"); sys.exit(1)
    delay = [float(np.sum(f["sched/rank_%05d" % r]["run_delay"])) for r in range(2)]
    nivcsw = [int(np.sum(f["sched/rank_%05d" % r]["nivcsw"])) for r in range(2)]
print("summed run_delay over the steps: rank 0 %.4f s, rank 1 %.4f s (busy loop on rank 1's "
      "core); involuntary switches %s" % (delay[0], delay[1], nivcsw))
ok = delay[1] > 0 and delay[1] > delay[0]
print("test_preempt: %s" % ("ok" if ok else "FAIL: rank 1's run_delay is not the larger"))
sys.exit(0 if ok else 1)
PY
