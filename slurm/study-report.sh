#!/bin/bash
# Final step of a study: checks that every task of STUDY/manifest.tsv left a run file with
# complete=1 (FAILED.txt lists the others), writes summary.tsv, runs `tripar report` over the
# complete runs (report.txt, report.csv, report.json) and tools/plot.py when present (plots/).
# Usage: study-report.sh STUDY_DIR   (the drivers submit it with --dependency=afterany:<arrays>)
# shellcheck disable=SC2154 # study_* come from study.env
set -euo pipefail
if [[ "${1:-}" = -h || "${1:-}" = --help ]]; then
  sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
study_dir=${1:-${TRIPAR_STUDY_DIR:?usage: study-report.sh STUDY_DIR}}
study_dir=$(cd "$study_dir" && pwd)
# shellcheck source=/dev/null
source "$study_dir/study.env"
cd "$study_dir"

# complete attribute of a run file: 1, 0, or "missing"/"unreadable".
run_complete() { # file
  local f=$1
  if [ ! -f "$f" ]; then
    # the run's own partial file, RUN.h5.partial.HOST.PID (the newest, if several)
    local p
    # shellcheck disable=SC2012 # tripar names these files: no odd characters
    p=$(ls -t "$f".partial.* "$f.partial" 2>/dev/null | head -n 1 || true)
    if [ -n "$p" ]; then
      f=$p
    else
      echo missing; return
    fi
  fi
  "$study_python" - "$f" 2>/dev/null <<'PY' && return
import sys, h5py
with h5py.File(sys.argv[1], "r") as h:
    print(int(h.attrs["complete"]))
PY
  # No h5py: h5dump prints the attribute's DATA block, the value after "(0):".
  local v
  v=$(h5dump -a /complete "$f" 2>/dev/null | sed -n 's/.*(0): *\([0-9-]*\).*/\1/p' | head -n1)
  echo "${v:-unreadable}"
}

: >FAILED.txt
printf 'task\tname\tstatus\trun\tlog\n' >summary.tsv
ok_runs=()
n_ok=0
n_bad=0
while IFS=$'\t' read -r task name _ _ _ _ _ _ _ _ run _; do
  [ "$task" != task ] || continue
  c=$(run_complete "$run")
  if [ -f "$run" ] && [ "$c" = 1 ]; then
    status=complete; ok_runs+=("$run"); n_ok=$((n_ok + 1))
  else
    case $c in
      missing) status=missing ;;
      0) status=incomplete ;;
      *) status="bad($c)" ;;
    esac
    n_bad=$((n_bad + 1))
    printf 'task %s %s: %s (run %s, log logs/task-%s.out)\n' "$task" "$name" "$status" "$run" "$task" \
      >>FAILED.txt
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$task" "$name" "$status" "$run" "logs/task-$task.out" >>summary.tsv
done <manifest.tsv
echo "study-report.sh: $n_ok complete, $n_bad failed or incomplete"
[ "$n_bad" = 0 ] || cat FAILED.txt

if [ "$n_ok" -gt 0 ]; then
  # One comparison table over every complete run: text on stdout, CSV and JSON beside it.
  "$study_bin" report "${ok_runs[@]}" --csv report.csv --json report.json >report.txt \
    2>logs/report.err || echo "study-report.sh: tripar report failed (logs/report.err)" >&2
  plot=$study_source_dir/tools/plot.py
  if [ -f "$plot" ]; then
    mkdir -p plots
    # plot.py scaling globs a folder's *.h5: runs/ holds exactly the study's run files.
    "$study_python" "$plot" phases "${ok_runs[@]}" -o plots/phases.png >logs/plot.out 2>&1 ||
      echo "study-report.sh: plot.py phases failed (logs/plot.out)" >&2
    "$study_python" "$plot" scaling runs -o plots/scaling.png >>logs/plot.out 2>&1 ||
      echo "study-report.sh: plot.py scaling failed (logs/plot.out)" >&2
  fi
fi
cat report.txt 2>/dev/null || true
[ "$n_bad" = 0 ]
