#!/usr/bin/env bash
# Benchmark (not a test): tripar against llama.cpp on a real model, SmolLM2-135M-Instruct's Q4_1
# GGUF (tools/fetch_smollm2.sh), side by side in one run.
# - Speed: one thread (pinned to CPU 0), a 512-token prompt and 128 new tokens. llama.cpp's
#   llama-bench on the GGUF file itself (prefill pp512, then tg128 at depth 512); tripar on
#   the checkpoint `tripar import-gguf` makes of the same file, in fp32, bf16 and int8w, and on
#   its import with `--precision keep` (q4_1: the GGUF's blocks as stored). Each
#   round runs every engine once, llama.cpp first in odd rounds and last in even ones; the
#   table gives medians over rounds and tripar's speed-up (llama.cpp's time / tripar's).
# - Perplexity of data/text/tale-of-two-cities-ch1.txt in llama-perplexity's windows (-c 512,
#   so 2 windows), from tripar (`perplexity: {window: 512}`) and from llama-perplexity, for the
#   Q4_1 file and a Q8_0 file that llama.cpp's own llama-quantize makes of it. Goals: within 1%
#   (Q4_1) and 0.5% (Q8_0), for tripar fp32, tripar int8w in groups of 32 (which holds the Q8_0
#   blocks exactly and quantizes activations as ggml does) and tripar q4_1 and q8_0 (each
#   file's blocks as stored). llama.cpp's quantized types quantize the activations (to q8
#   blocks) where tripar fp32 computes on the dequantized weights; an F32 twin of each file
#   (llama-quantize again: the same weights, dequantized) runs llama.cpp without that, and the
#   table says how much of the difference it explains.
# llama.cpp is built from a pinned source (jobs/cpu-peers/peer_build.sh); its quantized types
# run with --repack 0 where weight repacking crashes (the AMX path on these VMs), and the table
# says so. docs/performance.md ("A real model against llama.cpp") has a measured table.
#   jobs/bench-real.sh [OUTDIR] [--rounds N]      (about 6 min on 2 cores with the default 3 rounds)
# OUTDIR defaults to out/bench-real-<timestamp> and must be new or empty. Environment:
# TRIPAR_BIN (default build/tripar), TRIPAR_PEERS_CACHE, TRIPAR_MODELS_CACHE. Exit 0 when every
# run ran, whatever the goals say; 1 when something failed; 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPAR=${TRIPAR_BIN:-build/tripar}
. jobs/cpu-peers/peer_build.sh
PROMPT=512 NEW=128 WINDOW=512
TEXT=data/text/tale-of-two-cities-ch1.txt
VARIANTS="fp32 bf16 int8w q4_1"

usage() { sed -n '20,23p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
say() { echo "bench-real: $*" >&2; }
die() { say "$*"; exit 1; }

out="" rounds=3
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) [ $# -ge 2 ] || usage; rounds=$2; shift ;;
    -h | --help) usage ;;
    -*) say "unknown option $1"; usage ;;
    *) [ -z "$out" ] || usage; out=$1 ;;
    esac
    shift
done
case $rounds in '' | *[!0-9]* | 0) say "--rounds needs a positive integer"; exit 2 ;; esac
out=${out:-out/bench-real-$(date +%Y%m%d-%H%M%S)}
# run files are never overwritten: a fresh folder per run of the benchmark
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then say "$out is not empty; name a new folder"; exit 2; fi
[ -x "$TRIPAR" ] || die "no tripar at $TRIPAR (build it: cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j)"
peer_cache
mkdir -p "$out"

# --- the model, the peer and the files both read --------------------------------------------
rc=0
q41=$(bash tools/fetch_smollm2.sh) || rc=$?
[ $rc = 0 ] || die "cannot fetch SmolLM2 (tools/fetch_smollm2.sh exit $rc)"
peer_setup llama-bench llama-perplexity llama-quantize
models=$(dirname "$q41")
# llama.cpp's own requantizations: Q8_0 of the Q4_1 weights, and an F32 twin of each file,
# which llama.cpp runs without quantizing the activations
requant() { # from to type
    if [ ! -f "$2" ]; then
        "$PEER_BIN/llama-quantize" --allow-requantize "$1" "$2.part" "$3" >"$out/quantize-$(basename "$2").log" 2>&1 ||
            { tail -20 "$out/quantize-$(basename "$2").log" >&2; die "llama-quantize $1 -> $3 failed"; }
        mv "$2.part" "$2"
    fi
}
q80=$models/SmolLM2-135M-Instruct.Q8_0.gguf
requant "$q41" "$q80" Q8_0
requant "$q41" "$models/SmolLM2-135M-Instruct.Q4_1-as-F32.gguf" F32
requant "$q80" "$models/SmolLM2-135M-Instruct.Q8_0-as-F32.gguf" F32
# each file as fp32 (dequantized) and as stored (--precision keep: tripar's q4_1 and q8_0)
for pair in "q41 $q41" "q80 $q80" "q41-keep $q41 --precision keep" "q80-keep $q80 --precision keep"; do
    read -r name file opts <<<"$pair"
    # shellcheck disable=SC2086 # opts is a list of options
    "$TRIPAR" import-gguf "$file" --out "$out/$name.h5" $opts >"$out/import-$name.log" 2>&1 ||
        { tail -20 "$out/import-$name.log" >&2; die "tripar import-gguf $file failed"; }
done
repack=$(peer_repack "$q41")
[ "$repack" = 1 ] || say "llama-bench Q4_1: crashed with weight repacking (the AMX path on this CPU); it runs with --repack 0"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# OpenBLAS 0.3.21 takes this CPU for a Prescott; name the real core type when it has AVX-512.
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}; fi

echo -e "round\tengine\tvariant\tload1\tfile" >"$out/runs.tsv"
log_run() { echo -e "$1\t$2\t$3\t$(cut -d' ' -f1 /proc/loadavg)\t$4" >>"$out/runs.tsv"; }

run_llama() { # round
    local base=r$1-llama.cpp lb=(taskset -c 0 "$PEER_BIN/llama-bench" -m "$q41" -t 1 -r 1 -o json --repack "$repack")
    say "round $1/$rounds: llama-bench Q4_1"
    "${lb[@]}" -p $PROMPT -n 0 >"$out/$base-pp.json" 2>"$out/$base-pp.log" || { tail -20 "$out/$base-pp.log" >&2; die "llama-bench failed"; }
    "${lb[@]}" -p 0 -n $NEW -d $PROMPT >"$out/$base-tg.json" 2>"$out/$base-tg.log" || { tail -20 "$out/$base-tg.log" >&2; die "llama-bench failed"; }
    log_run "$1" llama.cpp Q4_1 "$base"
}

job=$out/speed.yaml
cat >"$job" <<YAML
# jobs/bench-real.sh's speed runs: SmolLM2 imported from its Q4_1 GGUF, one thread
model: {checkpoint: $out/q41.h5}
backend: {kind: cpu, threads: 1}
input: {synthetic: {batch: 1, length: $PROMPT}}
generate: {new_tokens: $NEW, stop_at_eos: false}
record: {timings: step}
bench: {warmup: 1, iterations: 1}
YAML
# generate.stop_at_eos arrives with text output; a tripar without it runs the same shape
"$TRIPAR" run "$job" --dry-run >/dev/null 2>&1 || sed -i 's/, stop_at_eos: false//' "$job"
run_tripar() { # round variant: fp32, bf16, int8w of the fp32 import, or q4_1 (the kept blocks)
    local stem=r$1-tripar-$2 model=(--set model.precision="$2")
    [ "$2" = q4_1 ] && model=(--set model.checkpoint="$out/q41-keep.h5")
    say "round $1/$rounds: tripar $2"
    OPENBLAS_NUM_THREADS=1 mpirun -n 1 --bind-to none taskset -c 0 "$TRIPAR" run "$job" \
        "${model[@]}" --out "$out/$stem.h5" >"$out/$stem.log" 2>&1 ||
        { tail -20 "$out/$stem.log" >&2; die "tripar failed ($out/$stem.log)"; }
    log_run "$1" tripar "$2" "$stem.h5"
}

say "output in $out; $rounds round(s); load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
    [ $((r % 2)) = 1 ] && run_llama "$r"
    for v in $VARIANTS; do run_tripar "$r" "$v"; done
    [ $((r % 2)) = 0 ] && run_llama "$r"
done

# --- perplexity: the same windows in both engines (not timed; every core) ----------------------
no_repack=()
[ "$repack" = 1 ] || no_repack=(--no-repack)
for pair in "Q4_1 $q41" "Q8_0 $q80" "Q4_1-as-F32 ${q41%.gguf}-as-F32.gguf" "Q8_0-as-F32 ${q80%.gguf}-as-F32.gguf"; do
    read -r t file <<<"$pair"
    say "llama-perplexity $t -c $WINDOW"
    "$PEER_BIN/llama-perplexity" -m "$file" -f "$TEXT" -c $WINDOW -b $WINDOW -t "$(nproc)" "${no_repack[@]}" \
        >"$out/ppl-llama.cpp-$t.log" 2>&1 || { tail -20 "$out/ppl-llama.cpp-$t.log" >&2; die "llama-perplexity $t failed"; }
done
cat >"$out/perplexity.yaml" <<YAML
# jobs/bench-real.sh's perplexity runs: llama-perplexity's windows of $WINDOW tokens
model: {checkpoint: $out/q41.h5}
backend: {kind: cpu, threads: $(nproc)}
input: {text_file: $TEXT}
perplexity: {window: $WINDOW}
YAML
# tripar fp32 on each import (the dequantized weights); int8w in groups of 32 on the Q8_0
# one: the Q8_0 blocks exactly (each block's largest |q| is 127, so its scale is the block's
# d), with the activations quantized in blocks of 32 as ggml's q8 path does; and each file's
# blocks as stored (q4_1, q8_0: import-gguf --precision keep)
for run in "q41 q41" "q80 q80" "q80-int8w-g32 q80 model.precision=int8w model.int8_group=32 model.quantize_head=true" \
    "q41-keep q41-keep" "q80-keep q80-keep"; do
    read -r name ckpt sets <<<"$run"
    args=()
    for o in $sets; do args+=(--set "$o"); done
    say "tripar perplexity ($name, window $WINDOW)"
    mpirun -n 1 --bind-to none "$TRIPAR" run "$out/perplexity.yaml" --set model.checkpoint="$out/$ckpt.h5" \
        "${args[@]}" --out "$out/ppl-tripar-$name.h5" \
        >"$out/ppl-tripar-$name.log" 2>&1 || { tail -20 "$out/ppl-tripar-$name.log" >&2; die "tripar perplexity failed"; }
done

cat >"$out/meta.json" <<JSON
{"date": "$(date '+%Y-%m-%d %H:%M:%S %Z')", "rounds": $rounds, "cpus": $(nproc),
 "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')",
 "tripar": "$("$TRIPAR" --version 2>&1 | sed -n 1p) at $(git rev-parse --short HEAD 2>/dev/null || echo unknown)",
 "llama_cpp": "llama-cpp-python $LCP_VERSION, llama.cpp $LLAMA_CPP_COMMIT", "repack": $repack,
 "openblas_coretype": "${OPENBLAS_CORETYPE:-}", "prompt": $PROMPT, "new_tokens": $NEW, "window": $WINDOW}
JSON
/usr/bin/python3 jobs/cpu-peers/real_table.py "$out" | tee "$out/table.txt"
say "run files, logs and table.txt in $out (load average now $(cut -d' ' -f1-3 /proc/loadavg))"
