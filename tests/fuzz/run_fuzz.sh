#!/bin/sh
# Builds one libFuzzer target with clang (libFuzzer + ASan + UBSan) straight from its sources
# and runs it for a bounded time over a copy of its seed corpus.
# Usage: run_fuzz.sh SOURCE_DIR WORK_DIR [SECONDS] [TARGET]. TARGET is safetensors (the
# default: src/io/safetensors.c, corpus tests/fuzz/corpus), job (the job parser of src/job,
# corpus tests/fuzz/corpus_job plus the deep and large seeds made below), gguf (the GGUF reader
# of src/io, corpus tests/fuzz/corpus_gguf), tokenizer_json (tokenizer.json, corpus
# tests/fuzz/corpus_tokenizer) or cluster (the cluster files of `tripar plan`, corpus
# tests/fuzz/corpus_cluster). Exits 77 (skipped) without clang/libFuzzer.
# The seed: libFuzzer's mutations follow TRIPAR_FUZZ_SEED (1 unless set; 0 lets libFuzzer draw
# one), so the suite tries much the same inputs on every machine. Not exactly the same: the
# comparison operands it learns from include addresses, and a slower machine gets fewer inputs
# through in the time. A random seed in CI once failed a landing on a finding that took minutes
# to reproduce here. Look for new findings with a campaign of your own (TRIPAR_FUZZ_SEED=0 and
# minutes, not seconds); a finding is written to WORK_DIR as crash-* (or leak-*, timeout-*,
# oom-*): fix it and add the input to the target's corpus, where every later run replays it.
set -u
src=$1
work=$2
secs=${3:-20}
target=${4:-safetensors}
seed=${TRIPAR_FUZZ_SEED:-1}
cc=$(command -v clang || true)
if [ -z "$cc" ]; then
    echo "run_fuzz: clang not found, skipping"
    exit 77
fi
mkdir -p "$work" || exit 1
# libFuzzer ships in libclang-rt-*-dev; probe with a trivial target first
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
    >"$work/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$work/probe.c" -o "$work/probe" 2>/dev/null; then
    echo "run_fuzz: clang cannot link -fsanitize=fuzzer,address,undefined (libclang-rt missing?), skipping"
    exit 77
fi
# the MPI headers and library, for the targets whose base/check.c names MPI
mpi=$(pkg-config --cflags --libs ompi-c 2>/dev/null || pkg-config --cflags --libs mpich 2>/dev/null ||
    echo "$(mpicc --showme:compile 2>/dev/null) $(mpicc --showme:link 2>/dev/null)")
case $target in
safetensors)
    defines=
    sources="$src/src/io/safetensors.c"
    libs=$(pkg-config --cflags --libs jansson 2>/dev/null || echo -ljansson)
    corpus=$src/tests/fuzz/corpus
    dict=$src/tests/fuzz/safetensors.dict
    ;;
job)
    # the job layer and the one it stands on, src/base, whole: the house plan lets job include
    # only base, so these two folders always link, whatever files they gain. check.c names MPI
    # (it aborts through MPI_Abort once MPI is up), so the MPI headers and library come too.
    # The node limit is lowered tenfold: an input at the limit then costs milliseconds, not
    # seconds, under ASan.
    defines=-DJTREE_MAX_NODES=100000L
    sources="$(echo "$src"/src/job/*.c "$src"/src/base/*.c)"
    libs="$(pkg-config --cflags --libs yaml-0.1 2>/dev/null || echo -lyaml) $mpi -lm"
    corpus=$src/tests/fuzz/corpus_job
    dict=$src/tests/fuzz/job.dict
    ;;
gguf)
    # the reader, its dequantizers, safetensors.c for the f16/bf16 conversions, the q4_k
    # weight format's block codec that Q4_K and Q5_K share (kernels/quant_blocks.c and the fp16
    # conversions of kernels/quant.c), and src/base (error_set; check.c names MPI, as for job)
    defines=
    sources="$(echo "$src"/src/io/gguf*.c "$src"/src/io/safetensors.c \
        "$src"/kernels/quant_blocks.c "$src"/kernels/quant.c "$src"/src/base/*.c)"
    libs="$(pkg-config --cflags --libs jansson 2>/dev/null || echo -ljansson) $mpi -lm"
    corpus=$src/tests/fuzz/corpus_gguf
    dict=$src/tests/fuzz/gguf.dict
    ;;
tokenizer_json)
    # the tokenizer files of src/io (tokenizer.json, its BPE, regexes and normalizers) and
    # src/base; check.c names MPI, as for job.
    defines=
    sources="$(echo "$src"/src/io/tokenizer*.c "$src"/src/base/*.c)"
    libs="$(pkg-config --cflags --libs jansson libpcre2-8 icu-uc 2>/dev/null ||
        echo -ljansson -lpcre2-8 -licuuc) $mpi -lm"
    corpus=$src/tests/fuzz/corpus_tokenizer
    dict=$src/tests/fuzz/tokenizer_json.dict
    ;;
cluster)
    # the cluster file of `tripar plan`: plan_cluster.c on the job layer's YAML tree and src/base,
    # with the run and commbench readers its `from:` keys use (HDF5).
    defines='-DTRIPAR_VERSION="fuzz" -DH5_USE_110_API'
    sources="$(echo "$src"/src/analysis/plan_cluster.c "$src"/src/analysis/plan_collectives.c \
        "$src"/src/analysis/plan_nccl.c \
        "$src"/src/io/runread.c "$src"/src/io/h5util.c \
        "$src"/src/metrics/timing.c "$src"/src/metrics/nano_batch.c "$src"/src/metrics/sched.c \
        "$src"/src/job/*.c \
        "$src"/src/base/*.c)"
    libs="$(pkg-config --cflags --libs yaml-0.1 hdf5-openmpi 2>/dev/null || echo -lyaml -lhdf5) $mpi -lm"
    corpus=$src/tests/fuzz/corpus_cluster
    dict=$src/tests/fuzz/cluster.dict
    ;;
*)
    echo "run_fuzz: unknown target '$target'" >&2
    exit 64
    ;;
esac
# shellcheck disable=SC2086
"$cc" -g -O1 -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$src" -I"$src/src" \
    $defines $sources "$src/tests/fuzz/fuzz_$target.c" $libs \
    -o "$work/fuzz_$target" || exit 1
rm -rf "$work/corpus"
cp -r "$corpus" "$work/corpus" || exit 1
max_len=
if [ "$target" = job ]; then
    # seeds too big to keep in the repository: 100k levels of flow sequences and block
    # sequences and 50k of flow mappings, each refused at level 33. The node limit has a small
    # seed in corpus_job (aliases); the byte limit lies past any fuzz input (tests/job has it).
    python=/usr/bin/python3
    [ -x "$python" ] || python=python3
    "$python" - "$work/corpus" <<'PY' || exit 1
import os, sys
d = sys.argv[1]
head = "model: {synthetic: {}}\ninput: {tokens: [1]}\n"
seeds = {
    "deep_flow_seq_100k.yaml": head + "x: " + "[" * 100000 + "]" * 100000 + "\n",
    "deep_flow_map_50k.yaml": head + "x: " + "{a: " * 50000 + "1" + "}" * 50000 + "\n",
    "deep_block_seq_100k.yaml": head + "x:\n" + "- " * 100000 + "1\n",
}
for name, text in seeds.items():
    with open(os.path.join(d, name), "w") as f:
        f.write(text)
PY
    max_len=-max_len=262144
fi
cd "$work" || exit 1
# -jobs/-workers stay at 1: the machine is shared; -rss_limit_mb catches runaway allocations.
# A finding exits 1: libFuzzer's own default, 77, is CTest's skip code here and hid crashes.
exec ./fuzz_$target -seed="$seed" -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=1024 $max_len -error_exitcode=1 -timeout_exitcode=1 \
    -dict="$dict" -print_final_stats=1 corpus
