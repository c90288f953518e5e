#!/usr/bin/env bash
# An impossible mesh must make every rank exit 2, with the reason printed exactly once, and
# nothing may hang (the test runs under a timeout).
# usage: check_bad_mesh.sh NP REGEX JOB [--set K=V]...
set -uo pipefail
: "${TRIPAR_BIN:?}"
np=$1 regex=$2
shift 2
log=$(mktemp)
timeout 60 "${MPIEXEC:-mpiexec}" -n "$np" --oversubscribe "$TRIPAR_BIN" run "$@" >"$log" 2>&1
rc=$?
cat "$log"
fail=0
[ $rc -eq 2 ] || { echo "expected exit 2, got $rc"; fail=1; }
n=$(grep -c "tripar: error:" "$log" || true)
[ "$n" -eq 1 ] || { echo "expected the error once, printed $n times"; fail=1; }
grep -Eq "$regex" "$log" || { echo "message does not match /$regex/"; fail=1; }
rm -f "$log"
exit $fail
