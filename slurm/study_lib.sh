#!/bin/bash
# Shared code of the study drivers (strategy-sweep.sh, strong-scaling.sh, weak-scaling.sh): option
# parsing, the study folder and manifest, submission as Slurm job arrays plus a report job, or a
# sequential local run under mpirun (--local). Sourced, never run.
# shellcheck disable=SC2154

study_slurm_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Options common to every driver; drivers add their own through study_parse_extra.
study_common_help() {
  cat <<'TXT'
Common options:
  --nodes K              nodes per task (default 1; with --tasks-per-node: ceil(ranks / T))
  --tasks-per-node T     tasks per node (GPU runs: GPUs per node)
  --gpus-per-node G      request G GPUs per node and run one task per GPU (sets --tasks-per-node G)
  --cpus-per-task C      cores per task (default 1)
  --set KEY=VALUE        passed to every run (repeatable)
  --name NAME            study name (default: <kind>-<job file stem>)
  --out-dir DIR          parent of the study folder (default: current directory)
  --time T               Slurm time limit per task (default 00:30:00)
  --partition P, --account A, --qos Q
  --sbatch-arg ARG       extra sbatch argument for the run tasks (repeatable)
  --heads H --layers L --batch B
                         model shape for filtering (default: read from `tripar run JOB --dry-run`)
  --dry-run              write the study folder and manifest, print the sbatch commands, submit nothing
  --local                no Slurm: run every task in turn with mpirun, then the report
  --hostfile FILE        --local: mpirun --hostfile FILE
  --mpirun-arg ARG       --local: extra mpirun argument (repeatable)
  -h, --help
Environment: TRIPAR_BIN (tripar binary, default `tripar` on PATH, else this checkout's build/tripar),
  PYTHON (default /usr/bin/python3).
TXT
}

study_die() {
  echo "$(basename "$0"): $*" >&2
  exit 2
}

# Defaults, then parse. Unknown options go to the driver's study_parse_extra (returns the number of
# words it consumed, 0 if unknown).
study_parse() {
  study_job=""
  study_ranks=""
  study_nodes=""
  study_tpn=""
  study_gpn=""
  study_cpt=1
  study_sets=()
  study_name=""
  study_out_dir=$PWD
  study_time=00:30:00
  study_sbatch_args=()
  study_heads=""
  study_layers=""
  study_batch=""
  study_dry=0
  study_local=0
  study_hostfile=""
  study_mpirun_args=()
  while [ $# -gt 0 ]; do
    case $1 in
      -h|--help) usage; exit 0 ;;
      --ranks) study_ranks=${2:?--ranks needs a value}; shift 2 ;;
      --nodes) study_nodes=${2:?}; shift 2 ;;
      --tasks-per-node) study_tpn=${2:?}; shift 2 ;;
      --gpus-per-node) study_gpn=${2:?}; study_tpn=${study_tpn:-$2}; shift 2 ;;
      --cpus-per-task) study_cpt=${2:?}; shift 2 ;;
      --set) study_sets+=("${2:?--set needs KEY=VALUE}"); shift 2 ;;
      --name) study_name=${2:?}; shift 2 ;;
      --out-dir) study_out_dir=${2:?}; shift 2 ;;
      --time) study_time=${2:?}; shift 2 ;;
      --partition|--account|--qos) study_sbatch_args+=("$1=${2:?}"); shift 2 ;;
      --sbatch-arg) study_sbatch_args+=("${2:?}"); shift 2 ;;
      --heads) study_heads=${2:?}; shift 2 ;;
      --layers) study_layers=${2:?}; shift 2 ;;
      --batch) study_batch=${2:?}; shift 2 ;;
      --dry-run) study_dry=1; shift ;;
      --local) study_local=1; shift ;;
      --hostfile) study_hostfile=${2:?}; shift 2 ;;
      --mpirun-arg) study_mpirun_args+=("${2:?}"); shift 2 ;;
      -*)
        local used=0
        if declare -F study_parse_extra >/dev/null; then
          study_parse_extra "$@"
          used=$study_extra_used
        fi
        [ "$used" -gt 0 ] || study_die "unknown option $1 (see --help)"
        shift "$used" ;;
      *)
        [ -z "$study_job" ] || study_die "one job file only (got '$study_job' and '$1')"
        study_job=$1; shift ;;
    esac
  done
  [ -n "$study_job" ] || study_die "missing JOB.yaml (see --help)"
  [ -f "$study_job" ] || study_die "job file '$study_job' not found"
  study_job=$(cd "$(dirname "$study_job")" && pwd)/$(basename "$study_job")
  [ -n "$study_ranks" ] || study_die "missing --ranks"
  local n
  for n in ${study_ranks//,/ }; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || study_die "--ranks: '$n' is not a positive integer"
  done
  # Default: a tripar on PATH, else this checkout's build (build/ beside slurm/), which a fresh
  # clone has after the README's set-up and which puts nothing on PATH.
  study_bin=${TRIPAR_BIN:-}
  if [ -z "$study_bin" ]; then
    study_bin=tripar
    command -v tripar >/dev/null 2>&1 || study_bin=$(dirname "$study_slurm_dir")/build/tripar
  fi
  command -v "$study_bin" >/dev/null 2>&1 \
    || study_die "TRIPAR_BIN '$study_bin' not found (set TRIPAR_BIN, or build into build/)"
  study_bin=$(command -v "$study_bin")
  [[ "$study_bin" = /* ]] || study_bin=$PWD/$study_bin
  study_python=${PYTHON:-/usr/bin/python3}
  if [ "$study_local" = 0 ] && [ "$study_dry" = 0 ] && ! command -v sbatch >/dev/null 2>&1; then
    study_die "sbatch not found: use --local (mpirun) or --dry-run"
  fi
}

# Reads heads, layers and batch from the resolved job (tripar run JOB --dry-run prints YAML), unless
# given as flags. Sets study_heads, study_layers, study_batch.
study_model_shape() {
  [ -n "$study_heads" ] && [ -n "$study_layers" ] && [ -n "$study_batch" ] && return 0
  local set_args=() s yaml shape
  for s in "${study_sets[@]+"${study_sets[@]}"}"; do set_args+=(--set "$s"); done
  if ! yaml=$("$study_bin" run "$study_job" --dry-run "${set_args[@]+"${set_args[@]}"}" 2>&1); then
    echo "$yaml" >&2
    study_die "'$study_bin run $study_job --dry-run' failed; pass --heads/--layers/--batch"
  fi
  shape=$(printf '%s\n' "$yaml" | "$study_python" -c '
import sys, yaml
# Parse each top-level block on its own, so log lines or warnings printed around the YAML
# document cost nothing.
doc, block = {}, []
def flush():
    try:
        part = yaml.safe_load("\n".join(block))
        if isinstance(part, dict):
            doc.update(part)
    except yaml.YAMLError:
        pass
for line in sys.stdin.read().splitlines() + [""]:
    if line and not line[0].isspace() and block:
        flush(); block = []
    block.append(line)
flush()
def find(node, key):
    if isinstance(node, dict):
        if key in node and not isinstance(node[key], (dict, list)):
            return node[key]
        for v in node.values():
            r = find(v, key)
            if r is not None:
                return r
    return None
model, inp = doc.get("model", {}), doc.get("input", {})
batch = find(inp, "batch")
if batch is None and isinstance(inp.get("tokens"), list):
    batch = len(inp["tokens"])
print(find(model, "heads") or "", find(model, "layers") or "", batch or "")
') || study_die "could not parse the --dry-run YAML; pass --heads/--layers/--batch"
  local h l b
  read -r h l b <<<"$shape"
  study_heads=${study_heads:-$h}
  study_layers=${study_layers:-$l}
  study_batch=${study_batch:-$b}
  [ -n "$study_heads" ] && [ -n "$study_layers" ] && [ -n "$study_batch" ] ||
    study_die "model shape incomplete (heads='$study_heads' layers='$study_layers' batch='$study_batch'); pass --heads/--layers/--batch"
}

# Creates <out-dir>/<name>-<timestamp>/ with runs/ and logs/ and starts the manifest.
study_create() { # kind
  local stem ts base
  stem=$(basename "$study_job"); stem=${stem%.*}
  study_name=${study_name:-$1-$stem}
  ts=$(date +%Y%m%d-%H%M%S)
  base=$study_out_dir/$study_name-${SLURM_JOB_ID:-$ts}
  study_dir=$base
  local k=1
  while ! mkdir "$study_dir" 2>/dev/null; do
    [ -d "$study_out_dir" ] || study_die "--out-dir '$study_out_dir' does not exist"
    k=$((k + 1)); study_dir=$base-$k
  done
  study_dir=$(cd "$study_dir" && pwd)
  mkdir -p "$study_dir/runs" "$study_dir/logs"
  study_manifest=$study_dir/manifest.tsv
  printf 'task\tname\tranks\tnodes\ttasks_per_node\tdp\ttp\tpp\tmicrobatches\tbatch\trun\tsets\n' \
    >"$study_manifest"
  study_ntasks=0
  {
    echo "# tripar study; sourced by study-task.sh and study-report.sh"
    printf 'study_kind=%q\nstudy_name=%q\nstudy_job=%q\nstudy_bin=%q\nstudy_python=%q\n' \
      "$1" "$study_name" "$study_job" "$study_bin" "$study_python"
    printf 'study_slurm_dir=%q\nstudy_source_dir=%q\n' "$study_slurm_dir" "$(dirname "$study_slurm_dir")"
    printf 'study_created=%q\n' "$(date -Is)"
  } >"$study_dir/study.env"
}

# Nodes and tasks per node for a task of R ranks.
study_geometry() { # ranks -> sets geo_nodes geo_tpn
  local r=$1
  if [ -n "$study_tpn" ]; then
    geo_nodes=$(((r + study_tpn - 1) / study_tpn))
    geo_tpn=$((r < study_tpn ? r : study_tpn))
  else
    geo_nodes=${study_nodes:-1}
    geo_tpn=$(((r + geo_nodes - 1) / geo_nodes))
  fi
  [ -z "$study_nodes" ] || [ -z "$study_tpn" ] || geo_nodes=$study_nodes
}

# Appends one task. The run file name encodes the strategy so a folder listing reads as a table.
study_add() { # ranks dp tp pp microbatches batch [extra set...]
  local r=$1 dp=$2 tp=$3 pp=$4 mb=$5 batch=$6
  shift 6
  local name sets s
  name=$(printf 'r%d-dp%d-tp%d-pp%d' "$r" "$dp" "$tp" "$pp")
  [ "$mb" = - ] || name+="-m$mb"
  sets="parallel.dp=$dp parallel.tp=$tp parallel.pp=$pp"
  [ "$mb" = - ] || sets+=" parallel.microbatches=$mb"
  for s in "$@" "${study_sets[@]+"${study_sets[@]}"}"; do
    [[ "$s" != *[[:space:]]* ]] || study_die "--set values may not contain spaces: '$s'"
    sets+=" $s"
  done
  study_geometry "$r"
  printf '%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n' "$study_ntasks" "$name" "$r" \
    "$geo_nodes" "$geo_tpn" "$dp" "$tp" "$pp" "$mb" "$batch" \
    "runs/$(printf 'task-%03d' "$study_ntasks")-$name.h5" "$sets" >>"$study_manifest"
  study_ntasks=$((study_ntasks + 1))
}

# Submits the tasks grouped by geometry (one job array per (ranks, nodes) group: a strategy sweep is
# one array) and the report job after all of them; or runs everything locally.
study_submit() {
  [ "$study_ntasks" -gt 0 ] || study_die "no valid task to run (see the filters in --help)"
  echo "study folder: $study_dir ($study_ntasks tasks)"
  column -t -s $'\t' "$study_manifest" 2>/dev/null || cat "$study_manifest"
  if [ "$study_local" = 1 ]; then
    study_run_local
    return
  fi
  local groups ids=() cmd id
  groups=$(awk -F'\t' 'NR > 1 { k = $3 " " $4 " " $5
                                 if (!(k in seen)) { order[++n] = k; seen[k] = 1; list[k] = $1 }
                                 else list[k] = list[k] "," $1 }
                        END { for (i = 1; i <= n; i++) print order[i], list[order[i]] }' "$study_manifest")
  local gpu_args=()
  [ -z "$study_gpn" ] || gpu_args=(--gpus-per-node="$study_gpn")
  : >"$study_dir/jobs.txt"
  while read -r r nodes tpn list; do
    # shellcheck disable=SC2054 # the commas belong to --export
    cmd=(sbatch --parsable --export=ALL,TRIPAR_STUDY_DIR="$study_dir" --job-name="$study_name"
         --array="$list" --nodes="$nodes" --ntasks="$r" --ntasks-per-node="$tpn"
         --cpus-per-task="$study_cpt" "${gpu_args[@]+"${gpu_args[@]}"}" --time="$study_time"
         --signal=TERM@60 --output="$study_dir/logs/task-%a.out" --chdir="$study_dir"
         "${study_sbatch_args[@]+"${study_sbatch_args[@]}"}" "$study_slurm_dir/study-task.sh")
    if [ "$study_dry" = 1 ]; then
      echo "would run: ${cmd[*]}"
      ids+=(DRYRUN)
      continue
    fi
    id=$("${cmd[@]}") || study_die "sbatch failed for tasks $list"
    id=${id%%;*}
    ids+=("$id")
    echo "array $id: tasks $list ($r ranks on $nodes node(s))" | tee -a "$study_dir/jobs.txt"
  done <<<"$groups"
  local dep
  dep=afterany:$(IFS=:; echo "${ids[*]}")
  # shellcheck disable=SC2054
  cmd=(sbatch --parsable --export=ALL,TRIPAR_STUDY_DIR="$study_dir" --job-name="$study_name-report"
       --dependency="$dep" --nodes=1 --ntasks=1 --time=00:20:00 --output="$study_dir/logs/report.out"
       --chdir="$study_dir" "${study_sbatch_args[@]+"${study_sbatch_args[@]}"}"
       "$study_slurm_dir/study-report.sh" "$study_dir")
  if [ "$study_dry" = 1 ]; then
    echo "would run: ${cmd[*]}"
    return
  fi
  id=$("${cmd[@]}") || study_die "sbatch failed for the report job"
  id=${id%%;*}
  echo "report $id" | tee -a "$study_dir/jobs.txt"
  echo "when job $id ends: $study_dir/report.txt, report.csv, FAILED.txt"
}

# --local: every task in turn under mpirun, then the report, all in this shell.
study_run_local() {
  local task status=0
  [ "$study_dry" = 0 ] || { echo "dry run: nothing started"; return; }
  export TRIPAR_STUDY_DIR=$study_dir TRIPAR_HOSTFILE=$study_hostfile TRIPAR_STUDY_LOCAL=1
  export TRIPAR_MPIRUN_ARGS="${study_mpirun_args[*]+"${study_mpirun_args[*]}"}"
  for ((task = 0; task < study_ntasks; task++)); do
    echo "task $task: $(awk -F'\t' -v t="$task" '$1 == t { print $2 }' "$study_manifest")"
    "$study_slurm_dir/study-task.sh" "$task" >"$study_dir/logs/task-$task.out" 2>&1 ||
      echo "  failed: see logs/task-$task.out"
  done
  "$study_slurm_dir/study-report.sh" "$study_dir" 2>&1 | tee "$study_dir/logs/report.out" || status=$?
  return "$status"
}
