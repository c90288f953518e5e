#!/usr/bin/env bash
# tests/gpu/device_check.sh must not count a skipped gpu test as a pass on a machine whose
# driver lists a GPU (label unit; needs no GPU). First its --judge mode on made-up logs in both
# forms it reads (its own summary, ctest's output), then the whole script on a fake bundle whose
# one gpu test exits 77, with a fake nvidia-smi listing one GPU, then none.
set -u
SRC=${TRIPAR_SOURCE_DIR:?TRIPAR_SOURCE_DIR must point at the source tree}
CHECK=$SRC/tests/gpu/device_check.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/tripar-judge.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail=0

# expect WHAT RC PATTERN CMD...: CMD exits RC and its output matches PATTERN
expect() {
    local what=$1 rc=$2 pattern=$3
    shift 3
    local out got
    out=$("$@" 2>&1)
    got=$?
    if ((got == rc)) && grep -q -E -- "$pattern" <<<"$out"; then
        echo "ok   $what (rc $got)"
    else
        echo "FAIL $what: rc $got (want $rc), output (want /$pattern/):"
        echo "$out"
        fail=1
    fi
}

cat >"$work/summary-skipped.txt" <<'LOG'
gpu: NVIDIA H200, 580.65, 143771 MiB
PASS    every library resolves
PASS    mpirun -n 2 (relocated Open MPI) (rc 0, 1s)
PASS    test test_cuda_ops (rc 0, 3s)
SKIPPED test gpu_e2e_logits (rc 77, 2s)
SKIPPED test gpu_e2e_bf16 (rc 77, 2s)
LOG
cat >"$work/summary-passed.txt" <<'LOG'
PASS    test test_cuda_ops (rc 0, 3s)
PASS    test gpu_e2e_logits (rc 0, 20s)
SKIP    bench gpt-1.3b-fp32-graphs-true (out of time)
LOG
cat >"$work/ctest-skipped.log" <<'LOG'
=== ctest -L gpu: ctest --test-dir build -L gpu --output-on-failure
1/3 Test #201: test_cuda_ops ....................***Skipped   0.02 sec
2/3 Test #202: gpu_e2e_logits ...................   Passed   21.10 sec
3/3 Test #203: gpu_e2e_nccl1 ....................***Not Run   0.00 sec
LOG

J=(bash "$CHECK" --judge)
expect "GPUs listed, tests skipped: fail" 1 '^FAIL .*2 gpu test\(s\) skipped .*lists 1 GPU' \
    "${J[@]}" 1 "$work/summary-skipped.txt"
expect "no GPU listed, tests skipped: no-gpu" 77 '^NO-GPU .*gpu_e2e_bf16 gpu_e2e_logits' \
    "${J[@]}" 0 "$work/summary-skipped.txt"
expect "all passed: pass" 0 '^PASS +no gpu test skipped' "${J[@]}" 2 "$work/summary-passed.txt"
expect "ctest log, Skipped and Not Run: fail" 1 '^FAIL .*2 gpu test\(s\).*gpu_e2e_nccl1 test_cuda_ops' \
    "${J[@]}" 8 "$work/summary-passed.txt" "$work/ctest-skipped.log"
expect "a missing log is no skip" 0 '^PASS' "${J[@]}" 1 "$work/none.log"
expect "GPUS must be a count" 2 'usage' "${J[@]}" many "$work/summary-skipped.txt"

# The whole script: a bundle with a stand-in tripar and mpirun and one gpu test that skips.
B=$work/bundle
mkdir -p "$B/bin" "$work/fake"
printf '#!/bin/sh\necho "tripar (fake)"\n' >"$B/bin/tripar"
printf '#!/bin/sh\nexit 0\n' >"$B/bin/mpirun"
printf '#!/bin/sh\necho "skipped: no CUDA device (fake)"\nexit 77\n' >"$B/bin/gpu_skips"
printf 'gpu_skips\tbin/gpu_skips\n' >"$B/gpu_tests.tsv"
chmod +x "$B/bin/"*
fake_smi() { # fake_smi N: an nvidia-smi that lists N GPUs
    {
        echo '#!/bin/sh'
        echo 'case "$*" in'
        echo "*-L*) i=0; while [ \$i -lt $1 ]; do echo \"GPU \$i: NVIDIA H200 (UUID: GPU-fake\$i)\"; i=\$((i+1)); done ;;"
        echo "*--query-gpu*) [ $1 -gt 0 ] && echo 'NVIDIA H200, 580.65, 143771 MiB' ;;"
        echo '*) echo "fake nvidia-smi" ;;'
        echo 'esac'
    } >"$work/fake/nvidia-smi"
    chmod +x "$work/fake/nvidia-smi"
}
# shellcheck disable=SC2317 # called through expect
run_check() { # run_check OUT: the whole script, benchmarks off
    PATH=$work/fake:$PATH BUNDLE=$B OUT=$1 BUDGET=120 SKIP_BENCH=1 bash "$CHECK"
}
fake_smi 1
expect "whole script, 1 GPU listed, its test skipped: exit 1" 1 '^FAIL .*1 gpu test\(s\) skipped' \
    run_check "$work/out1"
expect "whole script writes the FAIL line into summary.txt" 0 'gpu_skips' \
    grep '^FAIL' "$work/out1/summary.txt"
fake_smi 0
expect "whole script, no GPU listed: exit 77" 77 '^NO-GPU ' run_check "$work/out0"
printf '#!/bin/sh\nexit 0\n' >"$B/bin/gpu_skips"
fake_smi 1
expect "whole script, 1 GPU listed, test passed: exit 0" 0 '^PASS +no gpu test skipped' \
    run_check "$work/out2"

exit $fail
