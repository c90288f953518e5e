#!/usr/bin/env bash
# Runs on a lent GPU machine against a bundle made here by tests/gpu/bundle_libs.sh: reports the
# GPU and any missing shared library, runs the gpu-labelled tests, then the benchmarks. Logs go
# into $OUT as at most 6 files (the device tool returns 8). Everything ends within BUDGET seconds.
#
#   tests/gpu/device_check.sh            # from the repository root; carry build-gpu.tar.xz
#   BUDGET=300 SKIP_BENCH=1 tests/gpu/device_check.sh
#   tests/gpu/device_check.sh --judge GPUS LOG...   # only the verdict on skipped gpu tests
# Exit status: 0 every check passed; 1 something failed, or a gpu test skipped although
# nvidia-smi lists a GPU (CUDA cannot use it: a driver/runtime mismatch, a missing library);
# 77 nvidia-smi lists no GPU, so the gpu tests skipped and nothing about the GPU code was learnt.
set -u

# judge GPUS LOG...: the verdict on the gpu tests from the number of GPUs nvidia-smi listed and
# the logs that name skipped tests: this script's summary ("SKIPPED test NAME": exit 77) or
# ctest's output ("Test #N: NAME ...***Skipped" or "***Not Run"). Prints one summary line and
# returns 0 (none skipped), 1 (skipped with a GPU listed) or 77 (skipped, no GPU listed). A
# skip is never a pass on a GPU machine: every gpu test skips exactly when CUDA sees no device.
judge() {
    local gpus=$1
    shift
    local names n
    names=$(cat "$@" 2>/dev/null | awk '
        /^SKIPPED +test / { print $3; next }
        /Test +#[0-9]+: .*\*\*\*(Skipped|Not Run)/ { sub(/.*Test +#[0-9]+: /, ""); print $1 }' |
        sort -u | tr '\n' ' ')
    n=$(wc -w <<<"$names")
    if ((n == 0)); then
        echo "PASS    no gpu test skipped"
        return 0
    fi
    if ((gpus > 0)); then
        echo "FAIL    $n gpu test(s) skipped although nvidia-smi lists $gpus GPU(s): CUDA cannot use them (driver/runtime mismatch?): $names"
        return 1
    fi
    echo "NO-GPU  nvidia-smi lists no GPU: $n gpu test(s) skipped, nothing on a GPU was checked: $names"
    return 77
}

if [[ ${1:-} == --judge ]]; then
    if (($# < 3)) || [[ ! $2 =~ ^[0-9]+$ ]]; then
        echo "usage: device_check.sh --judge GPUS LOG...   (GPUS: how many nvidia-smi -L lists)" >&2
        exit 2
    fi
    shift
    judge "$@"
    exit
fi

cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
OUT=${OUT:-$ROOT/out-gpu}
BUNDLE=${BUNDLE:-build-gpu}
BUDGET=${BUDGET:-480} # 8 minutes, under the device tool's 10-minute command limit
T0=$SECONDS
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
ENVLOG=$OUT/env.log
TESTLOG=$OUT/tests.log
BENCHLOG=$OUT/bench.log
: >"$SUMMARY"

say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - (SECONDS - T0))); }

# step LOG LIMIT NAME CMD...: runs CMD under a timeout that also respects the global budget,
# appends its output to LOG and one line to the summary.
step() {
    local logf=$1 limit=$2 name=$3
    shift 3
    local l
    l=$(($(left) - 10))
    ((limit > l)) && limit=$l
    if ((limit < 5)); then
        say "SKIP    $name (out of time)"
        return 0
    fi
    local t=$SECONDS
    echo "=== $name: $*" >>"$logf"
    timeout -k 5 "$limit" "$@" >>"$logf" 2>&1
    local rc=$?
    local verdict=PASS
    ((rc == 77)) && verdict=SKIPPED
    ((rc == 124 || rc == 137)) && verdict=TIMEOUT
    ((rc != 0 && rc != 77 && rc != 124 && rc != 137)) && verdict=FAIL
    say "$(printf '%-7s %s (rc %d, %ds)' "$verdict" "$name" "$rc" $((SECONDS - t)))"
    return 0
}

# --- (a) the machine -------------------------------------------------------------------------
{
    echo "=== date: $(date -u)"
    echo "=== uname: $(uname -a)"
    nvidia-smi || echo "nvidia-smi failed"
    nvidia-smi topo -m 2>/dev/null
    nvcc --version 2>/dev/null | tail -2
} >"$ENVLOG" 2>&1
say "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
# How many GPUs the driver lists: with any, a skipped gpu test is a failure (judge, below).
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')

if [[ ! -d $BUNDLE && -f $BUNDLE.tar.xz ]]; then
    tar -xJf "$BUNDLE.tar.xz" || say "FAIL    unpacking $BUNDLE.tar.xz"
fi
if [[ ! -x $BUNDLE/bin/tripar ]]; then
    say "FAIL    no $BUNDLE/bin/tripar: run tests/gpu/bundle_libs.sh here and carry $BUNDLE.tar.xz"
    exit 1
fi
B=$(cd "$BUNDLE" && pwd)

# --- (b) libraries: the bundle, then the CUDA libraries this machine has ----------------------
# cuBLAS, cuBLASLt and NCCL are not carried (too large): look in the toolkit and in the Python
# nvidia-* wheels (nvidia-cublas, nvidia-nccl-cu13), which the image has.
cuda_dirs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -d $d ]] && cuda_dirs="$cuda_dirs:$d"
done
for py in python3 /opt/torch/.venv/bin/python3; do
    dirs=$(timeout 20 "$py" -c 'import nvidia, glob, os
print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/*.so*")})))' 2>/dev/null) || continue
    [[ -n $dirs ]] && cuda_dirs="$cuda_dirs:$dirs" && break
done
export LD_LIBRARY_PATH="$B/libs${cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Open MPI relocated into the bundle: OPAL_PREFIX moves bindir, plugins and help files.
export OPAL_PREFIX=$B/ompi
plugdir=$(find "$OPAL_PREFIX" -name 'mca_*.so' -print -quit 2>/dev/null)
[[ -n $plugdir ]] && export OMPI_MCA_mca_base_component_path=${plugdir%/*}
[[ -d $B/pmix ]] && export PMIX_MCA_mca_base_component_path=$B/pmix
export PATH=$B/bin:$OPAL_PREFIX/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
# one node, no fabric: shared memory only, and quiet about fabric plugins that cannot load
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mtl='^ofi,psm,psm2' OMPI_MCA_osc='^ucx'
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_rmaps_base_oversubscribe=1
# as CTest's TRIPAR_TEST_ENV: no CMA single copy (ptrace is often denied in containers)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# NCCL's warnings (and why an init failed) reach the test logs, without its info chatter
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export TRIPAR_SOURCE_DIR=$ROOT TRIPAR_BIN=$B/bin/tripar OPENBLAS_NUM_THREADS=1 MPIEXEC=mpirun
export TMPDIR=${TMPDIR:-/tmp}

{
    echo "=== LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    echo "=== OPAL_PREFIX=$OPAL_PREFIX"
    for exe in "$B"/bin/*; do
        [[ -f $exe && -x $exe ]] || continue
        echo "--- ldd $exe"
        ldd "$exe" 2>&1 | grep -E 'not found|cuda|cublas|nccl|mpi|hdf5|openblas'
    done
} >>"$ENVLOG" 2>&1
missing=$(for exe in "$B"/bin/*; do [[ -f $exe ]] && ldd "$exe" 2>/dev/null; done |
    awk '/not found/{print $1}' | sort -u | tr '\n' ' ')
if [[ -n $missing ]]; then say "FAIL    missing libraries: $missing"; else say "PASS    every library resolves"; fi

step "$ENVLOG" 30 "mpirun -n 2 (relocated Open MPI)" mpirun --oversubscribe -n 2 hostname
step "$ENVLOG" 20 "tripar --version" "$B/bin/tripar" --version

# --- (c) tests ---------------------------------------------------------------------------------
# The bundle's manifest, not ctest: the build tree's CTest files hold this machine's paths.
# Set CTEST_DIR to a build configured on this machine to use ctest instead.
if [[ -n ${CTEST_DIR:-} && -d ${CTEST_DIR:-} ]]; then
    step "$TESTLOG" 300 "ctest -L gpu" ctest --test-dir "$CTEST_DIR" -L gpu --output-on-failure
else
    while IFS=$'\t' read -r name cmd; do
        [[ -n $name ]] || continue
        # word splitting of cmd is intended: the manifest holds simple space-separated commands
        # shellcheck disable=SC2086
        # stdin from /dev/null: mpirun would otherwise swallow the rest of the manifest
        step "$TESTLOG" 240 "test $name" bash -c "cd '$B' && exec $cmd" </dev/null
    done <"$B/gpu_tests.tsv"
fi
# A skipped gpu test on a machine whose driver lists a GPU is a FAIL line (and exit 1).
say "$(judge "$GPUS" "$SUMMARY" "$TESTLOG")"

# --- (d) benchmarks ------------------------------------------------------------------------------
# GPT-2 124M (jobs/bench-gpt2-124m.yaml: 512-token prompt, 128 new tokens, batch 1) and a
# 1.3B-class shape (24 layers, embd 2048, 16 heads), fp32 and bf16, CUDA graphs off and on.
# Synthetic weights are filled on the host (single-threaded, about a minute for 1.3B), so the
# most telling runs go first and `step` skips what no longer fits the budget. bench.roofline
# measures host cblas, not the GPU: it is off here; the table derives the model's achieved
# FLOP rate from prefill tokens/s (2 FLOP per parameter per token) and the weight-streaming
# rate from TPOT instead.
RUNS=$OUT/runs
mkdir -p "$RUNS"
bench() { # bench NAME tripar-args...
    local name=$1
    shift
    step "$BENCHLOG" 150 "bench $name" "$B/bin/tripar" "$@" --out "$RUNS/$name.h5"
    # the table below reads each run's own output
    awk -v n="$name" '$0 ~ "^=== bench " n ":" {keep=1; next} /^=== /{keep=0} keep' "$BENCHLOG" \
        >"$RUNS/$name.log"
}
if [[ -z ${SKIP_BENCH:-} ]]; then
    # NCCL's own collectives on a communicator of one (one GPU): the launch and stream floor
    # that every TP all-reduce over NCCL pays, checked as commbench checks every result.
    step "$BENCHLOG" 60 "commbench nccl, 1 rank" mpirun -n 1 "$B/bin/tripar" commbench \
        --comm nccl --sizes 8:1G --out "$RUNS/commbench-nccl.h5"
    # NVTX: what the phase ranges add with no profiler attached, and, where Nsight Systems is
    # installed, that a profile shows tripar's phases under the run file's names.
    [[ -x $B/bin/tripar_nvtx_cost ]] &&
        step "$BENCHLOG" 30 "nvtx cost" mpirun -n 1 "$B/bin/tripar_nvtx_cost"
    if command -v nsys >/dev/null 2>&1; then
        step "$BENCHLOG" 120 "nsys shows tripar's phases" bash -c "nsys profile -t nvtx,cuda \
            -o '$RUNS/nvtx' --force-overwrite true '$B/bin/tripar' run jobs/tiny.yaml \
            --set backend.kind=cuda --set record.timings=layer --out '$RUNS/nvtx-run.h5' &&
            nsys stats -q --report nvtx_sum '$RUNS/nvtx.nsys-rep' | tee '$RUNS/nvtx_sum.txt' |
            grep -q mlp_gemm"
    else
        say "SKIP    nsys: Nsight Systems is not installed on this machine"
    fi
    G=(run jobs/bench-gpt2-124m.yaml --set backend.kind=cuda --set bench.roofline=false
        --set bench.warmup=1 --set bench.iterations=3)
    XL=(run jobs/bench-gpt2-124m.yaml --set backend.kind=cuda --set bench.roofline=false
        --set model.synthetic.layers=24 --set model.synthetic.embd=2048
        --set model.synthetic.heads=16 --set generate.new_tokens=64
        --set bench.warmup=1 --set bench.iterations=2)
    for prec in fp32 bf16; do
        for graphs in false true; do
            # one run measures the device ceilings (cuBLAS on the model's shapes, a device
            # read sweep) for report --roofline; the probe costs seconds, so only one
            roof=false
            [[ $prec == fp32 && $graphs == false ]] && roof=true
            bench "gpt2-124m-$prec-graphs-$graphs" "${G[@]}" --set model.precision=$prec \
                --set backend.cuda_graphs=$graphs --set bench.roofline=$roof --set record.timings=layer
        done
    done
    for prec in bf16 fp32; do
        for graphs in false true; do
            bench "gpt-1.3b-$prec-graphs-$graphs" "${XL[@]}" --set model.precision=$prec \
                --set backend.cuda_graphs=$graphs
        done
    done
    for base in gpt2-124m-fp32 gpt2-124m-bf16 gpt-1.3b-bf16 gpt-1.3b-fp32; do
        [[ -f $RUNS/$base-graphs-false.h5 && -f $RUNS/$base-graphs-true.h5 ]] || continue
        step "$BENCHLOG" 30 "tokens $base graphs on = off" "$B/bin/tripar" diff \
            "$RUNS/$base-graphs-false.h5" "$RUNS/$base-graphs-true.h5" --rtol 0
    done
    {
        echo
        printf '%-30s %10s %14s %10s %12s %12s\n' run params prefill_tok/s TPOT_ms \
            model_TFLOP/s weights_GB/s
        for log in "$RUNS"/*.log; do
            [[ -f $log ]] || continue
            name=$(basename "$log" .log)
            awk -v n="$name" '
                /M params\)/ { s = $0; sub(/.*\(/, "", s); sub(/M params.*/, "", s); params = s * 1e6 }
                /^  prefill/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "tokens/s") ptok = $i }
                /TPOT p50/ { for (i = 1; i <= NF; i++) if ($i == "TPOT") tpot = $(i + 2) }
                END {
                    bytes = (n ~ /bf16/) ? 2 : 4
                    tf = params * 2 * ptok / 1e12
                    bw = (tpot > 0) ? params * bytes / (tpot / 1e3) / 1e9 : 0
                    printf "%-30s %9.0fM %14.1f %10.3f %12.2f %12.1f\n", n, params / 1e6, ptok, tpot, tf, bw
                }' "$log"
        done
    } | tee -a "$SUMMARY" >>"$BENCHLOG"
    ls "$RUNS"/*.h5 >/dev/null 2>&1 && step "$BENCHLOG" 30 "report" "$B/bin/tripar" report "$RUNS"/*.h5
    [[ -f $RUNS/gpt2-124m-fp32-graphs-false.h5 ]] && step "$BENCHLOG" 30 "report --roofline" \
        "$B/bin/tripar" report --roofline "$RUNS/gpt2-124m-fp32-graphs-false.h5"
fi
# The device tool returns at most 8 files: pack the run files into one.
if ls "$RUNS"/* >/dev/null 2>&1; then
    tar -C "$OUT" -czf "$OUT/runs.tar.gz" runs && rm -rf "$RUNS"
else
    rmdir "$RUNS" 2>/dev/null
fi

say "done in $((SECONDS - T0))s of $BUDGET"
grep -q -E '^(FAIL|TIMEOUT)' "$SUMMARY" && exit 1
grep -q -E '^NO-GPU' "$SUMMARY" && exit 77
exit 0
