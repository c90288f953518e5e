#!/bin/sh
# llama_tools.sh CHECK WORKDIR: the run-file tools on runs of the Llama family (issue 12, item
# 7), one check per call, each on real runs of tests/cli/llama_tiny.yaml. Uses $TRIPAR_BIN and
# $MPIEXEC. Exit 0 when the check passes.
set -eu
check=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
job=$here/llama_tiny.yaml
rm -rf "$work"
mkdir -p "$work"
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
run() { # run NP ARGS...: tripar run of the Llama job
    np=$1
    shift
    "$MPIEXEC" -n "$np" --oversubscribe --bind-to none "$TRIPAR_BIN" run "$job" "$@" >>log 2>&1 ||
        { cat log; fail "tripar run $*"; }
}
case $check in
points)
    # every activation point of a Llama run, tp=2 x pp=2 against one rank: AGREE, in model order
    run 1 --out one.h5
    run 4 --out tp2pp2.h5 --set parallel.tp=2 --set parallel.pp=2
    "$TRIPAR_BIN" diff one.h5 tp2pp2.h5 >diff.txt || { cat diff.txt; fail "diff exit $?"; }
    cat diff.txt
    want="embed layer.0.attn layer.0.mlp layer.1.attn layer.1.mlp layer.2.attn layer.2.mlp"
    want="$want layer.3.attn layer.3.mlp final logits"
    got=$(awk '$NF == "ok" { printf "%s%s", sep, $1; sep = " " }' diff.txt)
    [ "$got" = "$want" ] || fail "points: '$got', want '$want'"
    tail -1 diff.txt | grep -qx AGREE || fail "no AGREE"
    ;;
report)
    # report names the architecture and the kv heads where it shows the shape, text and JSON
    run 1 --out one.h5
    "$TRIPAR_BIN" report one.h5 --json one.json >report.txt
    cat report.txt
    grep -qx "  model: llama, 4 layers, 4 heads, 2 kv heads, embd 32, mlp 48, vocab 64" report.txt ||
        fail "report's model line"
    /usr/bin/python3 -c "import json, sys; m = json.load(open('one.json'))['runs'][0]['model']; \
assert m.startswith('llama, 4 layers, 4 heads, 2 kv heads'), m"
    # a run of the checkpoint saved from it: the runner notes the file's arch and kv heads
    run 1 --out saved.h5 --save-checkpoint ck.h5
    run 1 --out from_ck.h5 --set model.checkpoint=ck.h5
    "$TRIPAR_BIN" report from_ck.h5 >report_ck.txt
    cat report_ck.txt
    grep -qx "  model: llama, 4 layers, 4 heads, 2 kv heads, embd 32, mlp 48, vocab 64" \
        report_ck.txt || fail "report's model line for a checkpoint run"
    ;;
arch_mismatch)
    # diff of a Llama run against a GPT-2 run of the same width and depth: refused, exit 2,
    # naming the architectures; against another kv_heads: refused naming kv_heads
    run 1 --out llama.h5
    "$MPIEXEC" -n 1 "$TRIPAR_BIN" run "$here/tools_tiny.yaml" --out gpt2.h5 \
        --set model.synthetic.layers=4 --set model.synthetic.heads=4 \
        --set model.synthetic.embd=32 --set record.activations=all >>log 2>&1 || fail "gpt2 run"
    run 1 --out kv4.h5 --set model.synthetic.kv_heads=4
    rc=0
    "$TRIPAR_BIN" diff llama.h5 gpt2.h5 >out.txt 2>err.txt || rc=$?
    cat out.txt err.txt
    [ $rc -eq 2 ] || fail "diff llama vs gpt2: exit $rc, want 2"
    grep -q "^tripar diff: llama.h5 and gpt2.h5 ran different models (A vs B: model.arch: llama vs gpt2)" err.txt ||
        fail "no model mismatch message"
    [ ! -s out.txt ] || fail "diff printed a comparison"
    rc=0
    "$TRIPAR_BIN" diff llama.h5 kv4.h5 2>err.txt >/dev/null || rc=$?
    [ $rc -eq 2 ] && grep -q "(A vs B: kv_heads: 2 vs 4)" err.txt || fail "kv_heads mismatch: exit $rc"
    # another seed is the same shape: compared, and found to differ
    run 1 --out seed9.h5 --set model.synthetic.seed=9
    rc=0
    "$TRIPAR_BIN" diff llama.h5 seed9.h5 >/dev/null || rc=$?
    [ $rc -eq 1 ] || fail "diff of two seeds: exit $rc, want 1"
    ;;
baseline)
    # report --baseline: int8w against fp32 of the same Llama model scores KL and agreement
    run 1 --out fp32.h5
    run 1 --out int8w.h5 --set model.precision=int8w
    "$TRIPAR_BIN" report --baseline fp32.h5 fp32.h5 int8w.h5 >out.txt || { cat out.txt; fail "report"; }
    cat out.txt
    grep -Eq "^fp32.h5 +1.0000 +0.000e\+00 +0.000e\+00 .* 1.000$" out.txt || fail "baseline row"
    grep -Eq "^int8w.h5 +[01]\.[0-9]{4} +[0-9.]+e-0[1-5] +[0-9.]+e-0[1-9] " out.txt ||
        fail "int8w row"
    ;;
sweep)
    # one mpirun sweeps the mesh of a Llama job over tp = 1, 2, 4 on 4 ranks (tp=4 replicates
    # each of the 2 kv heads on 2 ranks); every point gives the one-rank tokens
    run 1 --out one.h5
    run 4 --out sw.h5 --sweep 'parallel={tp: 1, pp: 4},{tp: 2, pp: 2},{tp: 4, pp: 1}'
    n=0
    for f in sw.parallel=*.h5; do
        "$TRIPAR_BIN" diff one.h5 "$f" >d.txt || { cat d.txt; fail "$f differs"; }
        n=$((n + 1))
    done
    [ $n -eq 3 ] || fail "$n sweep files, want 3"
    ;;
*)
    fail "unknown check $check"
    ;;
esac
echo "PASS $check"
