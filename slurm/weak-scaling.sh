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
fixed_dp=1 fixed_tp=1 fixed_pp=1
base_batch=""
study_parse_extra() {
  study_extra_used=0
  case $1 in
    --axis) axis=${2:?}; study_extra_used=2 ;;
    --dp) fixed_dp=${2:?}; study_extra_used=2 ;;
    --tp) fixed_tp=${2:?}; study_extra_used=2 ;;
    --pp) fixed_pp=${2:?}; study_extra_used=2 ;;
    --base-batch) base_batch=${2:?}; study_extra_used=2 ;;
  esac
}
study_parse "$@"
[[ "$axis" =~ ^(dp|tp|pp)$ ]] || study_die "--axis must be dp, tp or pp"
study_model_shape
base_batch=${base_batch:-$study_batch}
study_create weak

# shellcheck source=scaling_lib.sh
source "$study_slurm_dir/scaling_lib.sh"
for r in ${study_ranks//,/ }; do
  scaling_add "$r" $((base_batch * r)) "input.synthetic.batch=$((base_batch * r))"
done
study_submit
