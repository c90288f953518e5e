#!/bin/sh
# Builds the safetensors fuzzer with clang (libFuzzer + ASan + UBSan) straight from
# src/safetensors.c and runs it for a bounded time over a copy of the seed corpus.
# Usage: run_fuzz.sh SOURCE_DIR WORK_DIR [SECONDS]. Exits 77 (skipped) without clang/libFuzzer.
set -u
src=$1
work=$2
secs=${3:-20}
cc=$(command -v clang || true)
if [ -z "$cc" ]; then
    echo "run_fuzz: clang not found, skipping"
    exit 77
fi
mkdir -p "$work" || exit 1
jansson=$(pkg-config --cflags --libs jansson 2>/dev/null || echo -ljansson)
# libFuzzer ships in libclang-rt-*-dev; probe with a trivial target first
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
    >"$work/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$work/probe.c" -o "$work/probe" 2>/dev/null; then
    echo "run_fuzz: clang cannot link -fsanitize=fuzzer,address,undefined (libclang-rt missing?), skipping"
    exit 77
fi
# shellcheck disable=SC2086
"$cc" -g -O1 -std=c11 -Wall -Wextra -Werror -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I"$src/src" "$src/src/io/safetensors.c" \
    "$src/tests/fuzz/fuzz_safetensors.c" $jansson -o "$work/fuzz_safetensors" || exit 1
rm -rf "$work/corpus"
cp -r "$src/tests/fuzz/corpus" "$work/corpus" || exit 1
cd "$work" || exit 1
# -jobs/-workers stay at 1: the machine is shared; -rss_limit_mb catches runaway allocations
exec ./fuzz_safetensors -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 \
    -dict="$src/tests/fuzz/safetensors.dict" -print_final_stats=1 corpus
