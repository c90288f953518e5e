#!/bin/bash
# Weak scaling: the batch grows with the ranks (batch = base * ranks via input.synthetic.batch).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
# shellcheck source=study_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/study_lib.sh"

usage() {
  cat <<'TXT'
Usage: weak-scaling.sh JOB.yaml --ranks 1,2,4,8 [--base-batch B] [--axis dp|tp|pp] [options]

For each rank count R the job runs with --set input.synthetic.batch=B*R (B: --base-batch, default
the job's batch), the ranks going to one axis (default dp) as in strong-scaling.sh. The job must
use input.synthetic.
TXT
  study_common_help
}

axis=dp
# shellcheck source=scaling_lib.sh
source "$study_slurm_dir/scaling_lib.sh"
base_batch=""
study_parse_extra() {
  scaling_parse_option "$@"
  if [ "$study_extra_used" -eq 0 ] && [ "$1" = --base-batch ]; then
    base_batch=${2:?}
    study_extra_used=2
  fi
}
study_parse "$@"
[[ "$axis" =~ ^(dp|tp|pp)$ ]] || study_die "--axis must be dp, tp or pp"
study_model_shape
base_batch=${base_batch:-$study_batch}
study_create weak

for r in ${study_ranks//,/ }; do
  scaling_add "$r" $((base_batch * r)) "input.synthetic.batch=$((base_batch * r))"
done
study_submit
