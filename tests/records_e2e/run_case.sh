#!/usr/bin/env bash
# run_case.sh OUTDIR NAME NP [KEY=VALUE ...]: one real run of tests/records_e2e/mesh.yaml on NP
# ranks with the given overrides, left in OUTDIR/NAME.h5 for the tool tests, then checked by
# check_events.py (event counts against the schedule, fields, nesting, cross-rank clocks).
set -euo pipefail
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
"$py" -c 'import h5py, numpy, yaml' 2>/dev/null || { echo "SKIP: $py lacks h5py/numpy/yaml"; exit 77; }
out=$1 name=$2 np=$3
shift 3
sets=()
for kv in "$@"; do sets+=(--set "$kv"); done
mkdir -p "$out"
rm -f "$out/$name.h5" "$out/$name.h5".partial*
if ! timeout 120 "${MPIEXEC:-mpiexec}" -n "$np" --oversubscribe "$TRIPAR_BIN" run "$here/mesh.yaml" \
    --out "$out/$name.h5" "${sets[@]}" >"$out/$name.log" 2>&1; then
    echo "FAIL: the run failed"; cat "$out/$name.log"; exit 1
fi
exec "$py" "$here/check_events.py" "$out/$name.h5"
