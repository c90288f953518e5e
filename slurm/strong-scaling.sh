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
# shellcheck source=scaling_lib.sh
source "$study_slurm_dir/scaling_lib.sh"
study_parse_extra() { scaling_parse_option "$@"; }
study_parse "$@"
[[ "$axis" =~ ^(dp|tp|pp)$ ]] || study_die "--axis must be dp, tp or pp"
study_model_shape
study_create strong

for r in ${study_ranks//,/ }; do
  scaling_add "$r" "$study_batch"
done
study_submit
