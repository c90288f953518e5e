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
sweep_peak)
    # peak memory is each point's own (issue 32): a big point, then a small one, in one sweep;
    # the small point reports what it reports alone, not the big point's peak carried over.
    # Bytes, not time: a busy machine moves neither number by the 16 MiB allowed. Under ASan
    # freed memory waits in its quarantine, still resident: the big point's would stay counted.
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0"
    set -- --set model.synthetic.ctx=1024 --set bench.warmup=0 --set bench.iterations=1 \
        --set generate.new_tokens=2
    run 1 run "$job" "$@" --out sw.h5 --sweep model.synthetic.embd=1024,64 >/dev/null
    run 1 run "$job" "$@" --set model.synthetic.embd=64 --out alone.h5 >/dev/null
    $py - sw.model.synthetic.embd=1024.h5 sw.model.synthetic.embd=64.h5 alone.h5 <<'PY'
import sys, h5py
big, small, alone = (h5py.File(p, "r")["metrics"].attrs["peak_memory_bytes_max"] / 2**20
                     for p in sys.argv[1:])
print("peak MiB: big point %.1f, small point in the sweep %.1f, small point alone %.1f"
      % (big, small, alone))
assert big > alone + 100, "the big point must be well above the small one for the check to mean anything"
assert abs(small - alone) < 16, "the small point's peak in a sweep differs from its own run's"
PY
    ;;
arrival)
    # a short bounded stream: the run stays within its bound and writes /metrics/arrival
    start=$(date +%s)
    run 2 run "$job" --set parallel.dp=2 --set bench.arrival_rate=80 --set bench.duration=0.4 \
        --out arrival.h5 | tee out.txt
    grep -q "arrival .*target 80.00 req/s" out.txt
    [ $(( $(date +%s) - start )) -lt 60 ]
    $py "$TRIPAR_SOURCE_DIR/tests/bench/check_metrics.py" --arrival arrival.h5
    # a mixture of experts with parallel.ep across the two replicas: a batch of one request
    # leaves a replica no rows, and it serves the other's experts' rows all the same
    run 2 run "$TRIPAR_SOURCE_DIR/data/fixtures/factor_moe.yaml" --set parallel.dp=2 \
        --set parallel.ep=2 --set bench.arrival_rate=80 --set bench.duration=0.4 \
        --set 'record.activations=[]' --out arrival_ep.h5 | tee out_ep.txt
    grep -q "arrival .*target 80.00 req/s" out_ep.txt
    $py "$TRIPAR_SOURCE_DIR/tests/bench/check_metrics.py" --arrival arrival_ep.h5
    ;;
baseline)
    # report --baseline: the baseline scores 1 against itself, int8w agrees on some tokens
    run 1 run "$job" --out base.h5 >/dev/null
    run 1 run "$job" --set model.precision=int8w --out int8w.h5 >/dev/null
    "$TRIPAR_BIN" report --baseline base.h5 base.h5 int8w.h5 | tee out.txt
    grep -Eq "^base.h5 +1.0000 +0.000e\+00 +0.000e\+00 .* 1.000$" out.txt
    grep -Eq "^int8w.h5 +[01]\.[0-9]{4} +[0-9.]+e-0[1-4] " out.txt
    ;;
prompts)
    # a 2-point sweep over two prompt files of data/prompts, named relative to the working
    # directory as on a command line; a synthetic model reads them as bytes (token id = byte)
    src=$TRIPAR_SOURCE_DIR
    (cd "$src" && run 1 run "$job" --set model.synthetic.vocab=256 --set model.synthetic.ctx=600 \
        --set bench.warmup=0 --set bench.iterations=1 --out "$dir/pr.h5" \
        --sweep input.text_file=data/prompts/qa-128.txt,data/prompts/summarisation-128.txt) > out.txt
    cat out.txt
    grep -q "== sweep: 2 of 2 point" out.txt
    ls
    [ "$(ls | grep -c '^pr\.')" -eq 2 ]
    $py - "$src/data/prompts" pr.input.text_file=qa-128.h5 pr.input.text_file=summarisation-128.h5 <<'PY'
import sys, h5py, numpy as np
prompts = sys.argv[1]
for path, name in zip(sys.argv[2:], ("qa-128", "summarisation-128")):
    text = open(f"{prompts}/{name}.txt", "rb").read()
    with h5py.File(path, "r") as f:
        assert int(f.attrs["complete"]) == 1, path
        tokens = f["output/tokens"][()]
        assert tokens.shape == (1, len(text) + 4), (path, tokens.shape)
        assert (tokens[0, :len(text)] == np.frombuffer(text, np.uint8)).all(), path
        job = f.attrs["job"].decode()
        assert "text:" in job and ("Answer:" if name.startswith("qa") else "Summary:") in job
print("prompt files ran as bytes, one point file each, named by stem")
PY
    ;;
prompts_clash)
    # two swept files with one stem would write one point file: refused, exit 2, no compute
    mkdir other
    cp "$TRIPAR_SOURCE_DIR/data/prompts/qa-128.txt" other/
    rc=0
    run 1 run "$job" --set model.synthetic.vocab=256 --set model.synthetic.ctx=600 --out pr.h5 \
        --sweep "input.text_file=$TRIPAR_SOURCE_DIR/data/prompts/qa-128.txt,other/qa-128.txt" \
        > out.txt 2>&1 || rc=$?
    cat out.txt
    [ "$rc" -eq 2 ]
    grep -q "points 1 (input.text_file=.*qa-128.txt) and 2 (input.text_file=other/qa-128.txt) would both write pr.input.text_file=qa-128.h5" out.txt
    [ -z "$(ls | grep '^pr')" ]
    ;;
*)
    echo "unknown check $check" >&2
    exit 64
    ;;
esac
