#!/bin/bash
# tripar under a real multi-node Slurm on the emulated cluster (label cluster;slurm). One case per
# call, on a cluster and Slurm already up (the CTest fixtures: cluster.sh up, slurm.sh up):
#   srun      srun -N 2 --mpi=pmix tripar run: /mesh hosts node1,node2, tokens of a 1-rank run
#   sbatch    sbatch slurm/tripar.sbatch (srun inside) across 2 nodes
#   mpirun    sbatch with mpirun inside (Open MPI starts its daemons through Slurm) across 2 nodes
#   sweep     slurm/strategy-sweep.sh over 2 nodes x 2 ranks, then its report job
#   nodekill  a long run; node2's slurmd and tasks are killed: node1's ranks end within 10 s and
#             the partial run file reads complete=0
# Usage: slurm_tests.sh CASE STATE WORK   (env: TRIPAR_BIN, TRIPAR_SOURCE_DIR). Exit 77 = skipped.
#        slurm_tests.sh all WORK          by hand: brings up its own 2-node cluster and Slurm under
#                                         WORK/state, runs every case, tears everything down.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=${TRIPAR_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
bin=${TRIPAR_BIN:?slurm_tests.sh: set TRIPAR_BIN to the tripar binary}
py=/usr/bin/python3
case_name=${1:?usage: slurm_tests.sh CASE STATE WORK | all WORK}

if [ "$case_name" = all ]; then
  work=${2:?usage: slurm_tests.sh all WORK}
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
  state=$work/state
  trap '"$here/slurm.sh" down "$state"; "$here/cluster.sh" down "$state" >/dev/null' EXIT
  trap 'exit 143' TERM INT
  rc=0
  "$here/cluster.sh" up "$state" 2 || rc=$?
  [ "$rc" = 0 ] || exit "$rc"
  "$here/slurm.sh" up "$state" || rc=$?
  [ "$rc" = 0 ] || exit "$rc"
  failed=()
  for c in srun sbatch mpirun sweep nodekill; do
    start=$SECONDS
    "${BASH_SOURCE[0]}" "$c" "$state" "$work" || failed+=("$c")
    echo "== $c: $((SECONDS - start)) s"
  done
  [ ${#failed[@]} = 0 ] || { echo "FAILED: ${failed[*]}" >&2; exit 1; }
  echo "all Slurm cluster cases passed"
  exit 0
fi

state=${2:?usage: slurm_tests.sh CASE STATE WORK}
work=${3:?usage: slurm_tests.sh CASE STATE WORK}
# shellcheck source=lib.sh
source "$here/lib.sh"
cluster_require "$state"
if [ ! -s "$state/slurm/up" ]; then
  echo "SKIP: no Slurm on the cluster at $state: $(tail -n 1 "$state/slurm-up.err" 2>/dev/null ||
    echo 'its fixture did not bring one up')"
  exit 77
fi
# shellcheck source=/dev/null
source "$state/slurm/env.sh"
login=$SLURM_LOGIN
"$py" -c 'import h5py, numpy' 2>/dev/null || { echo "SKIP: $py lacks h5py/numpy"; exit 77; }
[ -x "$bin" ] || { echo "slurm_tests.sh: TRIPAR_BIN '$bin' is not executable" >&2; exit 1; }

work=$work/$case_name
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
# Jobs inherit this environment (sbatch and srun default to --export=ALL).
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
export TRIPAR_BIN=$bin

# Whatever a case submitted is cancelled when it ends, passed or failed, so that a failed case
# never holds the nodes for the next one.
job_ids=()
cancel_jobs() {
  [ ${#job_ids[@]} = 0 ] || timeout 20 "$login" scancel "${job_ids[@]}" 2>/dev/null || true
}
trap cancel_jobs EXIT
trap 'exit 143' TERM INT

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
finish() {
  if [ "$failures" -gt 0 ]; then
    echo "$case_name: $failures check(s) failed; logs under $work" >&2
    exit 1
  fi
  echo "$case_name: all checks passed"
  exit 0
}

# "complete world hosts nodes local_ranks" of a run file, e.g. "1 4 node1,node1,node2,node2 0,0,1,1
# 0,1,0,1"; "missing" when the file does not exist.
run_info() {
  "$py" - "$1" <<'PY'
import os, sys, h5py
path = sys.argv[1]
if not os.path.exists(path):
    print("missing"); sys.exit(0)
with h5py.File(path, "r") as f:
    m = f["mesh"][...]
    cols = [",".join(str(v.decode() if isinstance(v, bytes) else int(v)) for v in m[c])
            for c in ("host", "node", "local_rank")]
    print(int(f.attrs["complete"]), int(f.attrs["world_size"]), *cols)
PY
}
want_2x2="1 4 node1,node1,node2,node2 0,0,1,1 0,1,0,1"

# The single-rank reference of a job (no Slurm): the function every strategy must compute.
reference() { # job out [--set ...]
  local job=$1 out=$2
  shift 2
  timeout 120 "$bin" run "$job" --out "$out" "$@" >"$out.log" 2>&1 ||
    { echo "the 1-rank reference run failed:" >&2; cat "$out.log" >&2; exit 1; }
}

# tripar diff of a run against the reference (tokens identical, activations within 1e-5).
same_function() { # what ref run
  if "$bin" diff "$2" "$3" --rtol 1e-5 >"$3.diff" 2>&1; then
    pass "$1: tokens and activations equal the 1-rank run's"
  else
    fail "$1: differs from the 1-rank run:"; cat "$3.diff" >&2
  fi
}

# Waits (bounded) until none of the given job ids is pending or running.
wait_jobs() { # timeout_s id...
  local deadline=$((SECONDS + $1)) ids
  shift
  ids=$(IFS=,; echo "$*")
  while [ -n "$(timeout 20 "$login" squeue -h -j "$ids" -o %i 2>/dev/null)" ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      timeout 20 "$login" squeue >&2 || true
      return 1
    fi
    sleep 1
  done
}

# The job file of the srun, sbatch and mpirun cases: every factorization of 4 ranks is valid.
factor=$src/data/fixtures/factor.yaml

case_srun() {
  reference "$factor" "$work/ref.h5"
  local s out
  # dp2-tp2 keeps each TP group inside a node (DP across); tp2-pp2 sends PP activations across.
  for s in "dp=2 tp=2 pp=1" "dp=1 tp=2 pp=2"; do
    read -r dp tp pp <<<"${s//[a-z=]/ }"
    out=$work/srun-dp$dp-tp$tp-pp$pp.h5
    if timeout 180 "$login" srun -N 2 --ntasks-per-node=2 --mpi=pmix "$bin" run "$factor" \
         --out "$out" --set parallel.dp="$dp" --set parallel.tp="$tp" --set parallel.pp="$pp" \
         >"$out.log" 2>&1; then
      info=$(run_info "$out")
      [ "$info" = "$want_2x2" ] &&
        pass "srun -N 2 dp$dp-tp$tp-pp$pp: complete, /mesh hosts node1,node1,node2,node2" ||
        fail "srun -N 2 dp$dp-tp$tp-pp$pp: run file says '$info', want '$want_2x2'"
      grep -q "spans nodes" "$out.log" && fail "dp$dp-tp$tp-pp$pp warned that a TP group spans nodes"
      same_function "srun -N 2 dp$dp-tp$tp-pp$pp" "$work/ref.h5" "$out"
    else
      fail "srun -N 2 dp$dp-tp$tp-pp$pp failed:"; tail -n 20 "$out.log" >&2
    fi
  done
  finish
}

# sbatch --wait of SCRIPT with the 2-node geometry; the run file must be a complete 2x2 run of
# the reference's function.
sbatch_check() { # what script out [script args...]
  local what=$1 script=$2 out=$3 id
  shift 3
  reference "$factor" "$work/ref.h5"
  id=$(timeout 20 "$login" sbatch --parsable --nodes=2 --ntasks-per-node=2 --time=5 \
         --output="$out.out" "$script" "$@") || { fail "$what: sbatch refused the job"; finish; }
  job_ids+=("$id")
  if wait_jobs 240 "$id"; then
    state_line=$(timeout 20 "$login" scontrol show job "$id" | grep -o 'JobState=[A-Z_]*' || true)
    info=$(run_info "$out")
    [ "$info" = "$want_2x2" ] && pass "$what (job $id, $state_line): complete, hosts node1,node2" ||
      { fail "$what: run file says '$info', want '$want_2x2'"; tail -n 20 "$out.out" >&2; }
    [ -f "$out" ] && same_function "$what" "$work/ref.h5" "$out"
    if grep -q "host node1 " "$out.out"; then pass "$what: the batch script ran on node1"
    else fail "$what: the batch script did not log 'host node1'"; fi
  else
    fail "$what: job $id did not end within 240 s"
  fi
  finish
}

case_sbatch() {
  local out=$work/sbatch.h5
  sbatch_check "sbatch tripar.sbatch" "$src/slurm/tripar.sbatch" "$out" "$factor" "$out" \
    --set parallel.tp=2 --set parallel.pp=2
}

case_mpirun() {
  local out=$work/mpirun.h5
  cat >"$work/mpirun.sbatch" <<SH
#!/bin/bash
# mpirun inside a 2-node allocation: Open MPI reads the allocation and starts its daemon on the
# second node through srun; its ranks then talk TCP between the node namespaces.
echo "batch host \$(hostname) nodes \$SLURM_JOB_NODELIST tasks \$SLURM_NTASKS"
exec mpirun -n "\$SLURM_NTASKS" "$bin" run "$factor" --out "$out" --set parallel.dp=2 --set parallel.tp=2
SH
  sbatch_check "sbatch with mpirun" "$work/mpirun.sbatch" "$out"
}

case_sweep() {
  # The tiny model (2 heads, 2 layers, 2 prompts) allows exactly (dp,tp,pp) = (1,2,2), (2,1,2),
  # (2,2,1) on 4 ranks: 3 array tasks of 2 nodes x 2 ranks each, then the report job.
  local job=$src/jobs/tiny.yaml sweep_log=$work/sweep.log study ids
  if ! timeout 60 "$login" "$src/slurm/strategy-sweep.sh" "$job" --ranks 4 --nodes 2 \
       --tasks-per-node 2 --time 5 --out-dir "$work" --name sweep >"$sweep_log" 2>&1; then
    fail "strategy-sweep.sh failed:"; cat "$sweep_log" >&2; finish
  fi
  study=$(sed -n 's/^study folder: \(.*\) (.*/\1/p' "$sweep_log")
  mapfile -t ids < <(awk '{ print $2 }' "$study/jobs.txt" | tr -d :)
  job_ids+=("${ids[@]}")
  wait_jobs 240 "${ids[@]}" || { fail "sweep jobs did not end within 240 s"; finish; }
  local n_tasks
  n_tasks=$(($(wc -l <"$study/manifest.tsv") - 1))
  [ "$n_tasks" = 3 ] && pass "sweep enumerated 3 strategies" ||
    fail "sweep enumerated $n_tasks strategies, want 3"
  while IFS=$'\t' read -r task name _ nodes tpn _ _ _ _ _ run _; do
    [ "$task" != task ] || continue
    [ "$nodes $tpn" = "2 2" ] || fail "task $task $name asked for $nodes node(s) x $tpn, want 2 x 2"
    info=$(run_info "$study/$run")
    if [ "$info" = "$want_2x2" ]; then
      pass "task $task $name: complete on node1,node1,node2,node2"
    else
      # CI keeps only this output, not the build tree: show why the task failed.
      fail "task $task $name: run file says '$info', want '$want_2x2' (log $study/logs/task-$task.out)"
      tail -n 40 "$study/logs/task-$task.out" "$study/logs/task-$task.err" 2>/dev/null | sed 's/^/    /' >&2
      grep -h "error" "$state"/slurm/log/*.log 2>/dev/null | tail -n 20 | sed 's/^/    /' >&2
    fi
  done <"$study/manifest.tsv"
  [ -f "$study/FAILED.txt" ] && [ ! -s "$study/FAILED.txt" ] && pass "FAILED.txt empty" ||
    fail "FAILED.txt missing or not empty"
  local rows
  rows=$(($(wc -l <"$study/report.csv" 2>/dev/null || echo 1) - 1))
  [ "$rows" = 3 ] && pass "report.csv has one row per strategy" ||
    fail "report.csv has $rows rows, want 3 (log $study/logs/report.out)"
  grep -q "3 complete, 0 failed" "$study/logs/report.out" 2>/dev/null && pass "the report job ran" ||
    fail "the report job left no '3 complete' in $study/logs/report.out"
  # The report counts the groups that cross nodes: with 2 ranks per node, TP (tp = 2) stays inside
  # a node in every strategy; PP crosses only in dp1-tp2-pp2 (stages on node1 and node2).
  local crossing want="dp1-tp2-pp2 2 0 2
dp2-tp1-pp2 2 0 0
dp2-tp2-pp1 2 0 0"
  crossing=$("$py" - "$study/report.csv" <<'PY'
import csv, sys
for row in sorted(csv.DictReader(open(sys.argv[1])), key=lambda r: r["strategy"]):
    print(row["strategy"].split()[0], *(row.get(k, "absent").split(".")[0] for k in
          ("nodes", "tp_groups_crossing_nodes", "pp_groups_crossing_nodes")))
PY
  ) || crossing="unreadable"
  [ "$crossing" = "$want" ] && pass "report.csv: 2 nodes, TP and PP groups crossing nodes as placed" ||
    fail "report.csv strategy/nodes/TP/PP crossing says '${crossing//$'\n'/; }', want '${want//$'\n'/; }'"
  finish
}

# Processes (other than the holder itself) inside node K's network namespace, by the namespace of
# the node's holder: the slurmd, its slurmstepds and their tasks there.
node_pids() { # K
  local holder netns p
  holder=$(awk -v n="node$1" '$1 == n { print $3 }' "$state/nodes")
  netns=$(readlink "/proc/$holder/ns/net")
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" != "$holder" ] || continue
    [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$netns" ] && echo "${p#/proc/}"
  done
  return 0
}
tripar_pids_on() { # K
  local p
  for p in $(node_pids "$1"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = tripar ] && echo "$p"
  done
  return 0
}

case_nodekill() {
  # tp2-pp2: node1 holds PP stage 0, node2 stage 1, so node1's ranks send to node2 every step.
  # 20000 new tokens cannot end before the kill on this machine.
  local out=$work/kill.h5 srun_pid partial=""
  "$login" srun -N 2 --ntasks-per-node=2 --mpi=pmix --kill-on-bad-exit=1 "$bin" run \
    "$src/jobs/tiny.yaml" --out "$out" \
    --set parallel.tp=2 --set parallel.pp=2 --set model.synthetic.ctx=20010 \
    --set generate.new_tokens=20000 "--set" "record.activations=[]" >"$work/kill.log" 2>&1 &
  srun_pid=$!
  local deadline=$((SECONDS + 60))
  while [ "$SECONDS" -lt "$deadline" ]; do
    # The run's own partial file, RUN.h5.partial.HOST.PID (not a lock file beside it).
    partial=$(compgen -G "$out.partial.*" | grep -E '\.partial\.[^.]+\.[0-9]+$' | head -n 1 || true)
    [ -n "$partial" ] && [ "$(tripar_pids_on 1 | wc -l)" = 2 ] && [ "$(tripar_pids_on 2 | wc -l)" = 2 ] && break
    kill -0 "$srun_pid" 2>/dev/null || break
    sleep 0.2
  done
  [ -n "$partial" ] || { fail "no $out.partial.* within 60 s"; cat "$work/kill.log" >&2; finish; }
  sleep 2 # into the generation
  kill -0 "$srun_pid" 2>/dev/null || { fail "the run ended before the kill"; cat "$work/kill.log" >&2; finish; }
  mapfile -t survivors < <(tripar_pids_on 1)
  [ ${#survivors[@]} = 2 ] || fail "node1 runs ${#survivors[@]} tripar ranks, want 2"
  # The issue's case: the node's slurmd and its tasks die (slurmstepd, which reports the tasks'
  # deaths to srun, survives). SLURM_KILL_WHOLE_NODE=1: every process of the node (a lost node).
  local victim_kind="slurmd and tasks"
  if [ "${SLURM_KILL_WHOLE_NODE:-0}" = 1 ]; then
    victim_kind="processes (slurmd, slurmstepd, tasks)"
    mapfile -t victims < <(node_pids 2)
  else
    mapfile -t victims < <(cat "$state/slurm/slurmd-node2.pid"; tripar_pids_on 2)
  fi
  # node2's slurmd comes back when the case ends, passed or failed, for any later case.
  trap 'cancel_jobs; "$here/slurm.sh" node-up "$state" 2 >/dev/null || true' EXIT
  echo "killing node2: $(for p in "${victims[@]}"; do printf '%s(%s) ' "$p" "$(cat /proc/"$p"/comm 2>/dev/null)"; done)"
  local t0=$SECONDS
  kill -KILL "${victims[@]}" 2>/dev/null || true
  # Every rank on node1 must end within 10 s (10 s more before the test gives up on them). When
  # the whole node goes, slurmstepd included, nothing reports the lost tasks: the step ends only
  # once slurmctld sets the node DOWN (SlurmdTimeout after its last answer to a ping, plus up to
  # a ping interval), then KillWait: 50 s measured with SlurmdTimeout=30 and KillWait=5.
  local limit_ms=10000 ended_ms="" start_ns
  if [ "${SLURM_KILL_WHOLE_NODE:-0}" = 1 ]; then
    limit_ms=$((($(sed -n 's/^SlurmdTimeout=//p' "$SLURM_CONF") + 30) * 1000))
  fi
  start_ns=$(date +%s%N)
  for _ in $(seq 1 $((limit_ms / 100 + 100))); do
    local left=0
    for p in "${survivors[@]}"; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
    [ "$left" = 0 ] && { ended_ms=$((($(date +%s%N) - start_ns) / 1000000)); break; }
    sleep 0.1
  done
  if [ -z "$ended_ms" ]; then
    fail "node1's ranks still run $((limit_ms / 1000 + 10)) s after node2 was killed"
    kill -KILL "${survivors[@]}" 2>/dev/null || true
  elif [ "$ended_ms" -le "$limit_ms" ]; then
    pass "node1's ranks ended ${ended_ms} ms after node2's ${victim_kind} were killed"
  else
    fail "node1's ranks took ${ended_ms} ms (> $((limit_ms / 1000)) s) to end after node2 was killed"
  fi
  # srun itself ends too (bounded), whatever its exit status.
  for _ in $(seq 1 300); do kill -0 "$srun_pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$srun_pid" 2>/dev/null; then
    fail "srun still runs $((SECONDS - t0)) s after the kill"
    kill -TERM "$srun_pid" 2>/dev/null || true
  fi
  local rc=0
  wait "$srun_pid" || rc=$?
  echo "srun exit $rc; its log ends:"; tail -n 8 "$work/kill.log"
  [ ! -e "$out" ] || fail "$out exists: the killed run was taken for a complete one"
  if info=$("$py" - "$partial" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    print(int(f.attrs["complete"]), int(f.attrs["world_size"]), "mesh" in f)
PY
  ); then
    [ "$info" = "0 4 True" ] && pass "the partial run file $(basename "$partial") reads complete=0, world 4, /mesh" ||
      fail "the partial file says '$info', want '0 4 True'"
  else
    fail "the partial file $partial is not readable"
  fi
  finish
}

case $case_name in
  srun) case_srun ;;
  sbatch) case_sbatch ;;
  mpirun) case_mpirun ;;
  sweep) case_sweep ;;
  nodekill) case_nodekill ;;
  *) echo "slurm_tests.sh: unknown case '$case_name'" >&2; exit 2 ;;
esac
