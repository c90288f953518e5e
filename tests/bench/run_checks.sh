#!/bin/sh
# CLI checks of the bench area, one per call: run_checks.sh CHECK WORKDIR. Uses $TRIPAR_BIN,
# $MPIEXEC and $TRIPAR_SOURCE_DIR (set by tests/bench.cmake). Exit 0 when the check passes.
set -eu
check=$1
dir=$2
job=$TRIPAR_SOURCE_DIR/tests/bench/small.yaml
py=/usr/bin/python3
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
run() { # run NP ARGS...: tripar under mpiexec
    np=$1
    shift
    "$MPIEXEC" -n "$np" --oversubscribe --bind-to none "$TRIPAR_BIN" "$@"
}
case $check in
paged)
    # the paged KV cache gives the same tokens and logits as the contiguous one
    run 2 run "$job" --set parallel.tp=2 --set generate.new_tokens=12 --out contiguous.h5 >/dev/null
    run 2 run "$job" --set parallel.tp=2 --set generate.new_tokens=12 --set model.kv_cache=paged \
        --set model.kv_block=3 --out paged.h5 >/dev/null
    "$TRIPAR_BIN" diff contiguous.h5 paged.h5
    ;;
sweep)
    # two points in one mpirun: one complete run file each, no partial left, metrics consistent
    run 2 run "$job" --set parallel.dp=2 --out sw.h5 --sweep input.synthetic.length=8,16 > out.txt
    cat out.txt
    grep -q "== sweep: 2 of 2 point" out.txt
    ls
    [ ! -e sw.h5 ] && [ -z "$(ls | grep partial || true)" ]
    $py - sw.input.synthetic.length=8.h5 sw.input.synthetic.length=16.h5 <<'PY'
import sys, h5py
for path, length in zip(sys.argv[1:], (8, 16)):
    with h5py.File(path, "r") as f:
        assert int(f.attrs["complete"]) == 1, path
        assert f["output/tokens"].shape == (4, length + 4), (path, f["output/tokens"].shape)
        assert "length: %d" % length in f.attrs["job"].decode(), path
print("sweep files complete")
PY
    $py "$TRIPAR_SOURCE_DIR/tests/bench/check_metrics.py" sw.input.synthetic.length=8.h5 \
        sw.input.synthetic.length=16.h5
    ;;
arrival)
    # a short bounded stream: the run stays within its bound and writes /metrics/arrival
    start=$(date +%s)
    run 2 run "$job" --set parallel.dp=2 --set bench.arrival_rate=80 --set bench.duration=0.4 \
        --out arrival.h5 | tee out.txt
    grep -q "arrival .*target 80.00 req/s" out.txt
    [ $(( $(date +%s) - start )) -lt 60 ]
    $py "$TRIPAR_SOURCE_DIR/tests/bench/check_metrics.py" --arrival arrival.h5
    ;;
baseline)
    # report --baseline: the baseline scores 1 against itself, int8w agrees on some tokens
    run 1 run "$job" --out base.h5 >/dev/null
    run 1 run "$job" --set model.precision=int8w --out int8w.h5 >/dev/null
    "$TRIPAR_BIN" report --baseline base.h5 base.h5 int8w.h5 | tee out.txt
    grep -Eq "^base.h5 +1.0000 +0.000e\+00 +0.000e\+00 .* 1.000$" out.txt
    grep -Eq "^int8w.h5 +[01]\.[0-9]{4} +[0-9.]+e-0[1-4] " out.txt
    ;;
*)
    echo "unknown check $check" >&2
    exit 64
    ;;
esac
