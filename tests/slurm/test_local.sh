#!/bin/bash
# Study drivers without Slurm (CTest label slurm, no cluster needed): the strategy sweep in --local
# mode under mpirun --hostfile, and the task lists that strong-/weak-scaling.sh build (--dry-run).
# Usage: test_local.sh WORK_DIR   (env: TRIPAR_BIN, TRIPAR_SOURCE_DIR)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=${TRIPAR_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
work=${1:-$PWD/slurm-local}
export TRIPAR_BIN=${TRIPAR_BIN:?test_local.sh: set TRIPAR_BIN}
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
job=$src/jobs/tiny.yaml
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# Column 'name' of manifest.tsv, one per line.
names() { awk -F'\t' 'NR > 1 { print $2 }' "$1/manifest.tsv" | tr '\n' ' '; }
study_of() { sed -n 's/^study folder: \(.*\) (.*/\1/p' "$1"; }

# Sweep, run for real: tiny (2 heads, 2 layers, 2 prompts) on 4 ranks allows 3 strategies.
echo "localhost slots=4" >"$work/hostfile"
if "$src/slurm/strategy-sweep.sh" "$job" --ranks 4 --local --hostfile "$work/hostfile" \
     --mpirun-arg --oversubscribe --out-dir "$work" --name local >"$work/sweep.log" 2>&1; then
  study=$(study_of "$work/sweep.log")
  [ "$(names "$study")" = "r4-dp2-tp1-pp2 r4-dp2-tp2-pp1 r4-dp1-tp2-pp2 " ] &&
    pass "sweep strategies: $(names "$study")" || fail "sweep strategies: $(names "$study")"
  n=$(awk -F'\t' 'NR > 1 && $3 == "complete"' "$study/summary.tsv" | wc -l)
  [ "$n" = 3 ] && pass "3 complete runs" || fail "$n complete runs, want 3"
  [ ! -s "$study/FAILED.txt" ] && pass "FAILED.txt empty" || fail "FAILED.txt: $(cat "$study/FAILED.txt")"
  rows=$(($(wc -l <"$study/report.csv") - 1))
  [ "$rows" = 3 ] && pass "report.csv: 3 rows" || fail "report.csv: $rows rows"
  if [ -f "$src/tools/plot.py" ]; then
    [ -s "$study/plots/phases.png" ] && [ -s "$study/plots/scaling.png" ] && pass "plots written" ||
      fail "plots missing (see $study/logs/plot.out)"
  fi
else
  fail "local sweep failed"; cat "$work/sweep.log" >&2
fi

# A failing task is listed in FAILED.txt and fails the study: --heads/--layers/--batch skip the
# dry-run, so every run meets its bad input (prompt + new tokens > ctx) only when it starts.
if "$src/slurm/strategy-sweep.sh" "$job" --ranks 2 --local --mpirun-arg --oversubscribe \
     --heads 2 --layers 2 --batch 2 \
     --set generate.new_tokens=40 --out-dir "$work" --name broken >"$work/broken.log" 2>&1; then
  fail "a study whose runs all fail exited 0"
else
  study=$(study_of "$work/broken.log")
  n=$(wc -l <"${study:-/nonexistent}/FAILED.txt" || echo 0)
  want=$(($(wc -l <"$study/manifest.tsv") - 1))
  [ "$n" = "$want" ] && [ "$n" -gt 0 ] && pass "FAILED.txt lists all $n failed tasks" ||
    fail "FAILED.txt has $n lines, want $want"
fi

# Strong scaling along tp: 4 ranks would need tp=4, which does not divide 2 heads: skipped.
"$src/slurm/strong-scaling.sh" "$job" --ranks 1,2,4 --axis tp --dry-run --out-dir "$work" \
  --name strong >"$work/strong.log" 2>&1 || fail "strong-scaling --dry-run failed"
study=$(study_of "$work/strong.log")
[ "$(names "$study")" = "r1-dp1-tp1-pp1 r2-dp1-tp2-pp1 " ] && pass "strong: $(names "$study")" ||
  fail "strong: $(names "$study")"
grep -q "skip 4 ranks: tp=4" "$work/strong.log" && pass "strong: 4 ranks skipped" ||
  fail "strong: no skip message for 4 ranks"
grep -q -- "--array=0 --nodes=1 --ntasks=1" "$work/strong.log" &&
  grep -q -- "--array=1 --nodes=1 --ntasks=2" "$work/strong.log" &&
  grep -q -- "--dependency=afterany:DRYRUN:DRYRUN" "$work/strong.log" &&
  pass "strong: one array per rank count, report after both" || fail "strong: sbatch commands"

# Weak scaling along dp: batch = base * ranks, passed as input.synthetic.batch.
"$src/slurm/weak-scaling.sh" "$job" --ranks 1,2,4 --base-batch 3 --dry-run --out-dir "$work" \
  --name weak >"$work/weak.log" 2>&1 || fail "weak-scaling --dry-run failed"
study=$(study_of "$work/weak.log")
sets=$(awk -F'\t' 'NR > 1 { print $10 ":" $12 }' "$study/manifest.tsv" | tr '\n' ' ')
want="3:parallel.dp=1 parallel.tp=1 parallel.pp=1 input.synthetic.batch=3 6:parallel.dp=2 parallel.tp=1 parallel.pp=1 input.synthetic.batch=6 12:parallel.dp=4 parallel.tp=1 parallel.pp=1 input.synthetic.batch=12 "
[ "$sets" = "$want" ] && pass "weak: batch grows with ranks" || fail "weak: got '$sets'"

# Weak scaling run for real on a synthetic-input copy of tiny: batch 1 on 1 rank, 2 on 2 ranks.
/usr/bin/python3 -c '
import sys, yaml
j = yaml.safe_load(open(sys.argv[1]))
j["input"] = {"synthetic": {"batch": 1, "length": 4, "seed": 3}}
yaml.safe_dump(j, open(sys.argv[2], "w"))' "$job" "$work/tiny-synth.yaml"
if "$src/slurm/weak-scaling.sh" "$work/tiny-synth.yaml" --ranks 1,2 --local \
     --mpirun-arg --oversubscribe --out-dir "$work" --name weakrun >"$work/weakrun.log" 2>&1; then
  study=$(study_of "$work/weakrun.log")
  shapes=$(/usr/bin/python3 - "$study"/runs/*.h5 <<'PY2'
import sys, h5py
print(" ".join("%d:%d" % (h5py.File(p, "r").attrs["world_size"], h5py.File(p, "r")["output/tokens"].shape[0])
               for p in sys.argv[1:]))
PY2
)
  [ "$shapes" = "1:1 2:2" ] && pass "weak run: ranks:batch $shapes" || fail "weak run: ranks:batch '$shapes'"
else
  fail "weak-scaling --local failed"; cat "$work/weakrun.log" >&2
fi

# Bad usage is reported, not crashed on.
if "$src/slurm/strategy-sweep.sh" "$job" --ranks x --local >/dev/null 2>&1; then
  fail "--ranks x accepted"
else
  pass "--ranks x rejected"
fi

[ "$failures" = 0 ] || { echo "$failures check(s) failed; logs under $work" >&2; exit 1; }
echo "all local study checks passed"
