#!/usr/bin/env bash
# On one node parallel.order auto is tp-pp-dp: for every dp x tp x pp factorization of NP ranks
# the two runs have the same /mesh coordinates and the same tokens and activations (tripar
# diff), the auto file says order "auto", and neither node warning appears. A dry run with auto
# says what it assumes about nodes.
# usage: check_auto_order.sh WORKDIR JOB NP
set -euo pipefail
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
MPIEXEC=${MPIEXEC:-mpiexec}
PYTHON=${PYTHON:-/usr/bin/python3}
work=$1 job=$2 np=$3
mkdir -p "$work"
fail=0 count=0
for tp in $(seq 1 "$np"); do
    [ $((np % tp)) -eq 0 ] || continue
    for pp in $(seq 1 $((np / tp))); do
        [ $((np / tp % pp)) -eq 0 ] || continue
        dp=$((np / tp / pp))
        name="dp${dp}-tp${tp}-pp${pp}"
        for order in tp-pp-dp auto; do
            if ! timeout 240 "$MPIEXEC" -n "$np" --oversubscribe "$TRIPAR_BIN" run "$job" \
                --out "$work/$name-$order.h5" --set parallel.dp=$dp --set parallel.tp=$tp \
                --set parallel.pp=$pp --set parallel.order=$order \
                >"$work/$name-$order.log" 2>&1; then
                echo "FAIL $name $order: run failed"; cat "$work/$name-$order.log"; fail=1
                continue 2
            fi
        done
        if grep -E "spans nodes|different numbers of ranks" "$work/$name-auto.log"; then
            echo "FAIL $name: a node warning on one node"; fail=1
        fi
        if ! "$TRIPAR_BIN" diff "$work/$name-tp-pp-dp.h5" "$work/$name-auto.h5" --rtol 0 \
            >"$work/$name.diff" 2>&1; then
            echo "FAIL $name: auto differs from tp-pp-dp"; cat "$work/$name.diff"; fail=1
        fi
        if ! "$PYTHON" - "$work/$name-tp-pp-dp.h5" "$work/$name-auto.h5" <<'EOF'; then
import sys
import h5py
explicit, auto = (h5py.File(p, "r") for p in sys.argv[1:3])
cols = ("rank", "host", "node", "local_rank", "tp_rank", "pp_rank", "dp_rank")
rows = [[tuple(r[c] for c in cols) for r in f["mesh"][:]] for f in (explicit, auto)]
assert rows[0] == rows[1], "mesh differs:\n%s\n%s" % (rows[0], rows[1])
assert auto.attrs["order"] == b"auto", auto.attrs["order"]
assert explicit.attrs["order"] == b"tp-pp-dp", explicit.attrs["order"]
EOF
            echo "FAIL $name: /mesh or order attribute"; fail=1
        else
            echo "ok   $name: auto = tp-pp-dp (mesh, tokens, activations)"
        fi
        count=$((count + 1))
    done
done
# --dry-run plans without nodes and says so
plan=$("$TRIPAR_BIN" run "$job" --dry-run --set parallel.order=auto --set parallel.tp=2)
if grep -q "parallel.order auto: a dry run sees no nodes; it assumes one node" <<<"$plan"; then
    echo "ok   dry run states its node assumption"
else
    echo "FAIL dry run: no note on nodes"; echo "$plan"; fail=1
fi
echo "$count factorizations checked"
[ "$count" -gt 0 ] || { echo "no factorization ran"; exit 1; }
exit $fail
