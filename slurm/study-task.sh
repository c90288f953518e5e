#!/bin/bash
# One task of a study: looks up its row in STUDY/manifest.tsv (row = Slurm array index, or the
# argument) and runs slurm/tripar.sbatch with that row's --set options. Submitted by the drivers.
# shellcheck disable=SC2154 # study_* come from study.env
set -euo pipefail
study_dir=${TRIPAR_STUDY_DIR:?study-task.sh: TRIPAR_STUDY_DIR is not set}
task=${1:-${SLURM_ARRAY_TASK_ID:?study-task.sh: no task index (argument or SLURM_ARRAY_TASK_ID)}}
# shellcheck source=/dev/null
source "$study_dir/study.env"

row=$(awk -F'\t' -v t="$task" 'NR > 1 && $1 == t' "$study_dir/manifest.tsv")
[ -n "$row" ] || { echo "study-task.sh: task $task is not in $study_dir/manifest.tsv" >&2; exit 2; }
IFS=$'\t' read -r _ name ranks _ _ dp tp pp mb batch run sets <<<"$row"
set_args=()
for s in $sets; do set_args+=(--set "$s"); done

echo "study-task.sh: task $task ($name): ranks $ranks dp $dp tp $tp pp $pp microbatches $mb" \
     "batch $batch -> $run"
export TRIPAR_BIN=$study_bin
if [ -z "${SLURM_JOB_ID:-}" ] || [ "${TRIPAR_STUDY_LOCAL:-0}" = 1 ]; then
  export TRIPAR_NP=$ranks
fi
rm -f "$study_dir/$run" "$study_dir/$run".partial*
exec bash "$study_slurm_dir/tripar.sbatch" "$study_job" "$study_dir/$run" "${set_args[@]}"
