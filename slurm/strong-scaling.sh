#!/bin/bash
# Strong scaling: the same job (same batch) at several rank counts, the ranks going to one axis.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
# shellcheck source=study_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/study_lib.sh"

usage() {
  cat <<'TXT'
Usage: strong-scaling.sh JOB.yaml --ranks 1,2,4,8 [--axis tp|pp|dp] [--dp D --tp T --pp P] [options]

The problem stays fixed; for each rank count R the axis (default tp) gets R / (product of the
other two, from --dp/--tp/--pp, default 1). Counts that do not divide, or that break the filters
(tp divides heads, pp <= layers, dp <= batch), are skipped with a warning. Each rank count is one
Slurm job (an array of one task per geometry) and a report job follows all of them.
TXT
  study_common_help
}

axis=tp
fixed_dp=1 fixed_tp=1 fixed_pp=1
study_parse_extra() {
  study_extra_used=0
  case $1 in
    --axis) axis=${2:?}; study_extra_used=2 ;;
    --dp) fixed_dp=${2:?}; study_extra_used=2 ;;
    --tp) fixed_tp=${2:?}; study_extra_used=2 ;;
    --pp) fixed_pp=${2:?}; study_extra_used=2 ;;
  esac
}
study_parse "$@"
[[ "$axis" =~ ^(dp|tp|pp)$ ]] || study_die "--axis must be dp, tp or pp"
study_model_shape
study_create strong

# shellcheck source=scaling_lib.sh
source "$study_slurm_dir/scaling_lib.sh"
for r in ${study_ranks//,/ }; do
  scaling_add "$r" "$study_batch"
done
study_submit
