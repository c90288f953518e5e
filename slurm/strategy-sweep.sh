#!/bin/bash
# Strategy sweep: runs one job file under every valid (dp, tp, pp) factorization of N ranks, as one
# Slurm job array plus a report job (or sequentially under mpirun with --local).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
# shellcheck source=study_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/study_lib.sh"

usage() {
  cat <<'TXT'
Usage: strategy-sweep.sh JOB.yaml --ranks N [--microbatches M1,M2,...] [options]

Every (dp, tp, pp) with dp*tp*pp = N, tp dividing the model's heads, pp <= layers and dp <= batch
becomes one array task (run with --set parallel.dp=..,parallel.tp=..,parallel.pp=..). With
--microbatches, each strategy with pp > 1 runs once per microbatch count (pp = 1 runs once).
The study folder <name>-<timestamp>/ holds manifest.tsv (task -> strategy), runs/, logs/, and
after the report job: summary.tsv, report.txt, report.csv, FAILED.txt, plots/.
TXT
  study_common_help
}

sweep_mb=""
study_parse_extra() {
  study_extra_used=0
  case $1 in
    --microbatches) sweep_mb=${2:?}; study_extra_used=2 ;;
  esac
}
study_parse "$@"
[[ "$study_ranks" =~ ^[1-9][0-9]*$ ]] || study_die "--ranks takes one number for a sweep"
study_model_shape
study_create sweep

n=$study_ranks
for ((tp = 1; tp <= n; tp++)); do
  ((n % tp == 0)) || continue
  ((study_heads % tp == 0)) || continue
  for ((pp = 1; pp <= n / tp; pp++)); do
    (((n / tp) % pp == 0)) || continue
    ((pp <= study_layers)) || continue
    dp=$((n / tp / pp))
    ((dp <= study_batch)) || continue
    if [ -n "$sweep_mb" ] && ((pp > 1)); then
      for mb in ${sweep_mb//,/ }; do
        study_add "$n" "$dp" "$tp" "$pp" "$mb" "$study_batch"
      done
    elif [ -n "$sweep_mb" ]; then
      study_add "$n" "$dp" "$tp" "$pp" 1 "$study_batch"
    else
      study_add "$n" "$dp" "$tp" "$pp" - "$study_batch"
    fi
  done
done
study_submit
