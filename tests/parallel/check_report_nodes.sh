#!/usr/bin/env bash
# tripar report's nodes line, counted from /mesh: a one-node run crosses nothing; the same file
# with its node column rewritten to two nodes (by block, then cyclic) counts the TP and PP
# groups that would cross; a file without the node column counts its hosts as nodes; the
# comparison table and --json carry the counts per strategy.
# usage: check_report_nodes.sh WORKDIR JOB
set -euo pipefail
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
MPIEXEC=${MPIEXEC:-mpiexec}
PYTHON=${PYTHON:-/usr/bin/python3}
work=$1 job=$2
mkdir -p "$work"
run="$work/dp1-tp2-pp2.h5"
timeout 240 "$MPIEXEC" -n 4 --oversubscribe "$TRIPAR_BIN" run "$job" --out "$run" \
    --set parallel.tp=2 --set parallel.pp=2 >"$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
fail=0
expect_line() { # FILE REGEX
    local out
    out=$("$TRIPAR_BIN" report "$1" 2>&1) || { echo "FAIL report $1 exited $?"; echo "$out"; fail=1; return; }
    if grep -Eq "$2" <<<"$out"; then
        echo "ok   $(basename "$1"): $(grep -E '^  nodes ' <<<"$out")"
    else
        echo "FAIL $(basename "$1"): no line matching /$2/"; echo "$out"; fail=1
    fi
}
expect_line "$run" '^  nodes 1 \(4 ranks\); TP groups crossing nodes 0/2, PP groups crossing nodes 0/2$'

# Copies whose /mesh says two nodes: ranks 0,1 | 2,3 (TP groups inside, both PP groups across),
# ranks 0,2 | 1,3 (both TP groups across, PP inside); and one without the node column, whose
# hosts a, a, b, b are its nodes.
"$PYTHON" - "$run" "$work" <<'EOF'
import shutil, sys
import h5py
import numpy as np
src, work = sys.argv[1:3]
for name, nodes in (("block", [0, 0, 1, 1]), ("cyclic", [0, 1, 0, 1])):
    path = "%s/%s.h5" % (work, name)
    shutil.copy(src, path)
    with h5py.File(path, "r+") as f:
        rows = f["mesh"][:]
        rows["node"] = nodes
        f["mesh"][...] = rows
path = "%s/no_node_column.h5" % work
shutil.copy(src, path)
with h5py.File(path, "r+") as f:
    rows = f["mesh"][:]
    names = [n for n in rows.dtype.names if n != "node"]
    old = np.zeros(len(rows), dtype=[(n, rows.dtype[n]) for n in names])
    for n in names:
        old[n] = rows[n]
    old["host"] = [b"a", b"a", b"b", b"b"]
    del f["mesh"]
    f.create_dataset("mesh", data=old)
EOF
expect_line "$work/block.h5" '^  nodes 2 \(2 ranks each\); TP groups crossing nodes 0/2, PP groups crossing nodes 2/2$'
expect_line "$work/cyclic.h5" '^  nodes 2 \(2 ranks each\); TP groups crossing nodes 2/2, PP groups crossing nodes 0/2$'
expect_line "$work/no_node_column.h5" '^  nodes 2 \(2 ranks each\); TP groups crossing nodes 0/2, PP groups crossing nodes 2/2$'

"$TRIPAR_BIN" report "$run" "$work/cyclic.h5" --json "$work/report.json" >"$work/compare.txt"
# the comparison table: nodes, then TP and PP groups crossing, per strategy
if grep -Eq '^dp1-tp2-pp2 m1 .* 1 +0/2 +0/2$' "$work/compare.txt" &&
    grep -Eq '^dp1-tp2-pp2 m1 .* 2 +2/2 +0/2$' "$work/compare.txt"; then
    echo "ok   comparison table: nodes and groups crossing per strategy"
else
    echo "FAIL comparison table lacks the per-strategy crossing columns"; cat "$work/compare.txt"; fail=1
fi
if "$PYTHON" - "$work/report.json" <<'EOF'; then
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
got = [(r["nodes"], r["tp_groups_crossing_nodes"], r["pp_groups_crossing_nodes"]) for r in runs]
assert got == [(1, 0, 0), (2, 2, 0)], got
EOF
    echo "ok   --json: nodes and groups crossing per run"
else
    echo "FAIL --json counts"; fail=1
fi
exit $fail
