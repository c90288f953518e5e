#!/bin/bash
# End-to-end Slurm test (CTest label slurm): starts a private single-node cluster, then runs tripar
# (a) directly with srun --mpi=pmix, (b) with mpirun inside an sbatch allocation, (c) as a strategy
# sweep (job array + report job), (d) into its time limit, checking the run files each leaves.
# Usage: test_slurm.sh WORK_DIR   (env: TRIPAR_BIN, TRIPAR_SOURCE_DIR). Exit 77 = skipped.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=${TRIPAR_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
work=${1:-$PWD/slurm-work}
bin=${TRIPAR_BIN:?test_slurm.sh: set TRIPAR_BIN to the tripar binary}
py=/usr/bin/python3
job=$src/jobs/tiny.yaml

for b in slurmctld slurmd munged srun sbatch; do
  command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || { echo "SKIP: no $b"; exit 77; }
done
[ -x "$bin" ] || { echo "test_slurm.sh: TRIPAR_BIN '$bin' is not executable" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
state=$work/state
rc=0
"$here/start_cluster.sh" "$state" || rc=$?
[ "$rc" != 77 ] || exit 77
[ "$rc" = 0 ] || { echo "FAIL: the test cluster did not start" >&2; exit 1; }
trap '"$here/stop_cluster.sh" "$state"' EXIT
trap 'exit 143' TERM INT   # a CTest timeout still runs the EXIT trap and stops the daemons
# shellcheck source=/dev/null
source "$state/env.sh"
# Jobs inherit this environment (sbatch/srun default to --export=ALL).
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
export TRIPAR_BIN=$bin

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# Prints "complete world mesh_rows" of a run file (or .partial), "missing" if neither exists.
run_info() {
  "$py" - "$1" <<'PY'
import os, sys, h5py
path = sys.argv[1]
if not os.path.exists(path):
    print("missing"); sys.exit(0)
with h5py.File(path, "r") as f:
    mesh = f["mesh"].shape[0] if "mesh" in f else -1
    print(int(f.attrs["complete"]), int(f.attrs["world_size"]), mesh)
PY
}

# Waits (bounded) until none of the given job ids is pending or running.
wait_jobs() { # timeout_s id...
  local limit=$1 t=0
  shift
  local ids
  ids=$(IFS=,; echo "$*")
  while [ -n "$(squeue -h -j "$ids" -o %i 2>/dev/null)" ]; do
    if [ "$t" -ge "$limit" ]; then
      squeue >&2 || true
      return 1
    fi
    sleep 5; t=$((t + 5))
  done
}

# (d) first, so its time limit runs out while (a)-(c) work. 1M iterations of a 256-wide model
# cannot finish in 2 minutes on any CPU; the script's --signal=TERM@60 stops it near 60-90 s.
d_out=$work/timelimit.h5
d_id=$(sbatch --parsable --job-name=timelimit --ntasks=2 --time=2 --output="$work/timelimit.out" \
  "$src/slurm/tripar.sbatch" "$job" "$d_out" --set parallel.dp=2 --set model.synthetic.embd=256 \
  --set generate.new_tokens=20 --set bench.iterations=1000000 --set record.timings=off)
echo "(d) submitted time-limited job $d_id"

# (a) srun straight from the "login node".
a_out=$work/srun.h5
if timeout 300 srun --ntasks=4 --mpi=pmix "$bin" run "$job" --out "$a_out" \
     --set parallel.dp=2 --set parallel.tp=2 >"$work/srun.log" 2>&1; then
  info=$(run_info "$a_out")
  [ "$info" = "1 4 4" ] && pass "(a) srun -n 4 --mpi=pmix: complete run, world 4, 4 mesh rows" ||
    fail "(a) run file says '$info', want '1 4 4'"
else
  fail "(a) srun failed:"; tail -n 20 "$work/srun.log" >&2
fi

# (b) mpirun inside an sbatch allocation (Open MPI launches its daemons through Slurm).
b_out=$work/mpirun.h5
cat >"$work/mpirun.sbatch" <<SH
#!/bin/bash
mpirun -n \$SLURM_NTASKS "$bin" run "$job" --out "$b_out" --set parallel.dp=2 --set parallel.tp=2
SH
if timeout 300 sbatch --wait --ntasks=4 --time=5 --output="$work/mpirun.out" "$work/mpirun.sbatch" \
     >/dev/null; then
  info=$(run_info "$b_out")
  [ "$info" = "1 4 4" ] && pass "(b) mpirun in sbatch: complete run, world 4, 4 mesh rows" ||
    fail "(b) run file says '$info', want '1 4 4'"
  if [ -f "$a_out" ] && "$py" - "$a_out" "$b_out" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r")["output/tokens"][...] for p in sys.argv[1:3])
sys.exit(0 if a.shape == b.shape and np.array_equal(a, b) else 1)
PY
  then pass "(a) and (b) generated the same tokens"; else fail "(a) and (b) tokens differ"; fi
else
  fail "(b) sbatch --wait mpirun job failed:"; tail -n 20 "$work/mpirun.out" >&2 || true
fi

# (c) strategy sweep over 4 ranks: the tiny model (2 heads, 2 layers, 2 prompts) allows exactly
# (dp,tp,pp) = (1,2,2), (2,1,2), (2,2,1).
sweep_log=$work/sweep.log
if "$src/slurm/strategy-sweep.sh" "$job" --ranks 4 --time 5 --out-dir "$work" \
     --name sweep >"$sweep_log" 2>&1; then
  study=$(sed -n 's/^study folder: \(.*\) (.*/\1/p' "$sweep_log")
  mapfile -t ids < <(awk '{ print $2 }' "$study/jobs.txt" | tr -d :)
  if wait_jobs 600 "${ids[@]}"; then
    n_tasks=$(($(wc -l <"$study/manifest.tsv") - 1))
    [ "$n_tasks" = 3 ] && pass "(c) sweep enumerated 3 strategies" ||
      fail "(c) sweep enumerated $n_tasks strategies, want 3"
    for s in dp1-tp2-pp2 dp2-tp1-pp2 dp2-tp2-pp1; do
      grep -q "r4-$s" "$study/manifest.tsv" || fail "(c) manifest lacks $s"
    done
    while IFS=$'\t' read -r task name _ _ _ _ _ _ _ _ run _; do
      [ "$task" != task ] || continue
      info=$(run_info "$study/$run")
      [ "$info" = "1 4 4" ] && pass "(c) task $task $name: complete" ||
        fail "(c) task $task $name: run file says '$info' (log $study/logs/task-$task.out)"
    done <"$study/manifest.tsv"
    [ -f "$study/FAILED.txt" ] && [ ! -s "$study/FAILED.txt" ] && pass "(c) FAILED.txt empty" ||
      fail "(c) FAILED.txt missing or not empty"
    for f in report.txt report.csv; do
      [ -s "$study/$f" ] || fail "(c) report job left no $f (log $study/logs/report.out)"
    done
    while IFS=$'\t' read -r task _ _ _ _ _ _ _ _ _ run _; do
      [ "$task" != task ] || continue
      grep -q "$(basename "$run")" "$study/report.csv" 2>/dev/null ||
        fail "(c) report.csv does not list $run"
    done <"$study/manifest.tsv"
    rows=$(($(wc -l <"$study/report.csv" 2>/dev/null || echo 1) - 1))
    [ "$rows" = 3 ] && pass "(c) report.csv has one row per strategy" ||
      fail "(c) report.csv has $rows rows, want 3"
    grep -q "3 complete, 0 failed" "$study/logs/report.out" && pass "(c) the report job ran" ||
      fail "(c) no report job log $study/logs/report.out"
    if [ -f "$src/tools/plot.py" ]; then
      [ -s "$study/plots/phases.png" ] && [ -s "$study/plots/scaling.png" ] &&
        pass "(c) plots written" || fail "(c) plots missing (see $study/logs/plot.out)"
    fi
  else
    fail "(c) sweep jobs did not finish within 600 s"
  fi
else
  fail "(c) strategy-sweep.sh failed:"; cat "$sweep_log" >&2
fi

# (d) the time-limited job: stopped by SIGTERM, run file left as .partial with complete=0.
if wait_jobs 400 "$d_id"; then
  d_partial=$(ls -d "$d_out".partial.* 2>/dev/null | head -n 1 || true) # the run's own
  info=$(run_info "${d_partial:-$d_out.partial}")
  [ ! -e "$d_out" ] || fail "(d) $d_out exists: the run was not stopped"
  case $info in
    "0 2 2") pass "(d) time limit: $d_partial has complete=0" ;;
    *) fail "(d) $d_out.partial.* says '$info', want '0 2 2'"; tail -n 20 "$work/timelimit.out" >&2 ;;
  esac
  grep -q "stopped by signal" "$work/timelimit.out" && pass "(d) tripar reported the signal" ||
    fail "(d) no 'stopped by signal' in $work/timelimit.out"
  scontrol show job "$d_id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' || true
else
  fail "(d) time-limited job still running after 400 s"
  scancel "$d_id" || true
fi

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed; logs under $work" >&2
  exit 1
fi
echo "all Slurm checks passed"
