#!/usr/bin/env bash
# Benchmark (not a test): tripar against llama.cpp on the CPU, side by side, on the GPT-2 124M
# shape (batch 1, a 512-token prompt, 32 new tokens), one thread and one BLAS thread, plus a
# 2-thread pass. llama.cpp's llama-bench is built from the llama-cpp-python source
# distribution on PyPI (it vendors llama.cpp) into a cache folder outside the repository, and
# runs on GGUF files of random weights in GPT-2's layout (jobs/cpu-peers/write_gguf.py) that
# llama.cpp F32 / F16 / Q8_0 hold where tripar runs fp32 / bf16 / int8w. Each round runs every
# pair once, llama.cpp and tripar back to back (their order alternating by round), then
# jobs/cpu-peers/peers_table.py prints medians, tripar's speed-ups, the goals of the issue with
# PASS/MISS, and bf16 and int8w accuracy against fp32 (`tripar report --baseline`).
# docs/benchmarks.md ("CPU peers") explains the columns and the caveats.
#   jobs/bench-cpu-peers.sh [OUTDIR] [--quick] [--rounds N] [--no-threads2] [--no-pin]
#   jobs/bench-cpu-peers.sh --build-only        builds llama-bench and writes the GGUF files
# OUTDIR defaults to out/bench-cpu-peers-<timestamp> and must be new or empty. --quick: one
# round and fewer tripar variants. --no-threads2 skips the 2-thread pass; --no-pin leaves the
# 1-thread runs unpinned (by default both engines run on CPU 0 through taskset).
# Environment: TRIPAR_PEERS_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/tripar/peers),
# TRIPAR_BIN (default build/tripar). Exit 0 when every run ran, whatever the goals say; 1 when
# something failed to build or run; 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPAR=${TRIPAR_BIN:-build/tripar}

# The peer: llama.cpp, pinned and built by jobs/cpu-peers/peer_build.sh.
. jobs/cpu-peers/peer_build.sh

# The shape both engines run: jobs/bench-gpt2-124m.yaml's model, and its GGUF twin.
JOB=jobs/bench-gpt2-124m.yaml
LAYERS=12 HEADS=12 EMBD=768 VOCAB=50257 CTX=1024
PROMPT=512 NEW=32

# tripar's variants: name | llama.cpp type it is set against | in --quick | --set options.
# A variant whose options this tripar does not know (`--dry-run` exits 2 on an unknown key)
# is left out with a note, so the table may name options that are still to land.
VARIANTS=(
    "fp32|f32|quick|model.precision=fp32"
    "bf16|f16|quick|model.precision=bf16"
    "bf16-qhead|f16|quick|model.precision=bf16 model.quantize_head=true"
    "int8w|q8_0|quick|model.precision=int8w"
    "int8w-qhead|q8_0|full|model.precision=int8w model.quantize_head=true"
    "int8w-g32-qhead|q8_0|quick|model.precision=int8w model.int8_group=32 model.quantize_head=true"
    "int8w-g128-qhead|q8_0|full|model.precision=int8w model.int8_group=128 model.quantize_head=true"
)
PAIRS="f32 f16 q8_0"

usage() { sed -n '12,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
say() { echo "bench-cpu-peers: $*" >&2; }
die() { say "$*"; exit 1; }

out="" quick=0 rounds="" threads2=1 pin=1 build_only=0
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1 ;;
    --rounds) [ $# -ge 2 ] || usage; rounds=$2; shift ;;
    --no-threads2) threads2=0 ;;
    --no-pin) pin=0 ;;
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

# --- the peer: a venv with gguf, llama-bench ----------------------------------------------
peer_setup llama-bench
venv=$PEER_VENV
LLAMA_BENCH=$PEER_BIN/llama-bench
llama_version=$("$LLAMA_BENCH" --version 2>&1 | sed -n 1p)

# GGUF files, named by the writer's hash so that a changed writer writes new ones
writer=jobs/cpu-peers/write_gguf.py
whash=$(sha256sum "$writer" | cut -c1-10)
declare -A GGUF
for t in $PAIRS; do
    GGUF[$t]=$cache/gguf/gpt2-124m-$t-$whash.gguf
    if [ ! -f "${GGUF[$t]}" ]; then
        mkdir -p "$cache/gguf"
        "$venv/bin/python" "$writer" --type "$t" --out "${GGUF[$t]}" --layers $LAYERS \
            --heads $HEADS --embd $EMBD --vocab $VOCAB --ctx $CTX >&2 || die "writing ${GGUF[$t]} failed"
    fi
done
if [ $build_only = 1 ]; then
    say "llama-bench: $LLAMA_BENCH ($llama_version); GGUF files in $cache/gguf"
    exit 0
fi

# --- the runs ---------------------------------------------------------------------------------
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# OpenBLAS 0.3.21 takes this CPU for a Prescott; name the real core type when it has AVX-512.
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}; fi

# the variants this tripar knows, in table order
names=() llama_of=() sets_of=()
for v in "${VARIANTS[@]}"; do
    IFS='|' read -r name ltype mode sets <<<"$v"
    [ $quick = 1 ] && [ "$mode" != quick ] && continue
    read -ra opts <<<"$sets"
    args=()
    for o in "${opts[@]}"; do args+=(--set "$o"); done
    if ! "$TRIPAR" run "$JOB" --dry-run "${args[@]}" >/dev/null 2>"$out/probe-$name.txt"; then
        if grep -q "unknown key" "$out/probe-$name.txt"; then
            say "variant $name left out: this tripar does not know its options ($(grep -o "unknown key '[^']*' in section '[^']*'" "$out/probe-$name.txt" | sed -n 1p))"
            continue
        fi
        cat "$out/probe-$name.txt" >&2
        die "variant $name: tripar refuses its options"
    fi
    rm -f "$out/probe-$name.txt"
    names+=("$name") llama_of+=("$ltype") sets_of+=("$sets")
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
echo -e "round\tpair\tengine\tvariant\tthreads\twhat\tload1\tbusy_cores\tcpu_pressure\tseconds\tfile" >"$out/runs.tsv"
manifest() { # round pair engine variant threads what file; after the run, which mark() began
    echo -e "$1\t$2\t$3\t$4\t$5\t$6\t$(cut -d' ' -f1 /proc/loadavg)\t$(busy_cores)\t$7" >>"$out/runs.tsv"
}
cpus_for() { if [ "$1" = 1 ] && [ $pin = 1 ]; then echo 0; else echo "0-$(($(nproc) - 1))"; fi; }

llama_type_name() { case $1 in f32) echo F32 ;; f16) echo F16 ;; q8_0) echo Q8_0 ;; esac; }

# llama-bench twice: the prompt alone (pp), then the new tokens after a context of the prompt's
# length (tg at depth PROMPT, as tripar's decode steps run), one repetition each after its
# own warm-up; defaults otherwise (KV cache f16, flash attention auto, mmap).
run_llama() { # round pair type threads
    local r=$1 pair=$2 t=$3 th=$4 base
    base=r$r-$pair-llama.cpp-$(llama_type_name "$t")
    say "round $r/$rounds: llama-bench $(llama_type_name "$t") -t $th"
    local lb=(taskset -c "$(cpus_for "$th")" "$LLAMA_BENCH" -m "${GGUF[$t]}" -t "$th" -r 1 -o json
        --repack "${REPACK[$t]}")
    mark
    "${lb[@]}" -p "$PROMPT" -n 0 >"$out/$base-pp.json" 2>"$out/$base-pp.log" ||
        { tail -20 "$out/$base-pp.log" >&2; die "llama-bench failed ($out/$base-pp.log)"; }
    manifest "$r" "$pair" llama.cpp "$(llama_type_name "$t")" "$th" pp "$base-pp.json"
    mark
    "${lb[@]}" -p 0 -n "$NEW" -d "$PROMPT" >"$out/$base-tg.json" 2>"$out/$base-tg.log" ||
        { tail -20 "$out/$base-tg.log" >&2; die "llama-bench failed ($out/$base-tg.log)"; }
    manifest "$r" "$pair" llama.cpp "$(llama_type_name "$t")" "$th" tg "$base-tg.json"
}

# tripar once on the same shape; roofline on the fp32 runs (their sgemm rate and bandwidth are
# what the ratios are set against). Extra arguments are more --set options.
run_tripar() { # round pair variant threads roofline file-stem sets...
    local r=$1 pair=$2 name=$3 th=$4 roof=$5 stem=$6
    shift 6
    local args=()
    for o in "$@"; do args+=(--set "$o"); done
    if [ "$r" = acc ]; then say "accuracy run: tripar $name"; else say "round $r/$rounds: tripar $name threads=$th"; fi
    mark
    OPENBLAS_NUM_THREADS=$th mpirun -n 1 --bind-to none taskset -c "$(cpus_for "$th")" \
        "$TRIPAR" run "$JOB" --out "$out/$stem.h5" --set input.synthetic.batch=1 \
        --set input.synthetic.length=$PROMPT --set generate.new_tokens=$NEW \
        --set backend.threads="$th" --set bench.warmup=1 --set bench.iterations=1 \
        --set bench.roofline="$roof" --set record.timings=step "${args[@]}" \
        >"$out/$stem.log" 2>&1 || { tail -20 "$out/$stem.log" >&2; die "tripar failed ($out/$stem.log)"; }
    [ "$r" = acc ] || manifest "$r" "$pair" tripar "$name" "$th" run "$stem.h5"
}

run_pair_tripar() { # round pair
    local i
    for i in "${!names[@]}"; do
        [ "${llama_of[$i]}" = "$2" ] || continue
        local roof=false
        [ "${names[$i]}" = fp32 ] && roof=true
        read -ra opts <<<"${sets_of[$i]}"
        run_tripar "$1" "$2" "${names[$i]}" 1 $roof "r$1-$2-tripar-${names[$i]}" "${opts[@]}"
    done
}

# A type whose weight repacking crashes (the AMX path on these VMs; peer_repack) runs with
# --repack 0, and the table says so.
declare -A REPACK
repack_notes=()
for t in $PAIRS; do
    REPACK[$t]=$(peer_repack "${GGUF[$t]}")
    if [ "${REPACK[$t]}" = 0 ]; then
        repack_notes+=("\"$(llama_type_name "$t") with --repack 0 (crashed with repacking: AMX path)\"")
        say "llama-bench $(llama_type_name "$t"): crashed with weight repacking (the AMX path on this CPU); it runs with --repack 0"
    fi
done

order=()
for n in "${names[@]}"; do order+=("\"$n\""); done
cat >"$out/meta.json" <<EOF
{"date": "$(date '+%Y-%m-%d %H:%M:%S %Z')", "rounds": $rounds, "quick": $quick, "pinned": $pin,
 "cpus": $(nproc), "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')",
 "tripar": "$("$TRIPAR" --version 2>&1 | sed -n 1p) at $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src kernels parallel 2>/dev/null || echo ' (modified)')",
 "llama_cpp": "llama-cpp-python $LCP_VERSION, llama.cpp $LLAMA_CPP_COMMIT, $llama_version",
 "openblas_coretype": "${OPENBLAS_CORETYPE:-}",
 "shape": {"layers": $LAYERS, "heads": $HEADS, "embd": $EMBD, "vocab": $VOCAB, "ctx": $CTX,
           "prompt": $PROMPT, "new_tokens": $NEW},
 "llama_repack_off": [$(IFS=,; echo "${repack_notes[*]}")],
 "variant_order": [$(IFS=,; echo "${order[*]}")]}
EOF
say "output in $out; $rounds round(s); tripar variants: ${names[*]}; load average $(cut -d' ' -f1-3 /proc/loadavg)"

for r in $(seq 1 "$rounds"); do
    for pair in $PAIRS; do
        # odd rounds run llama.cpp first, even rounds tripar first, so a drift of the machine
        # within a pair does not always favour the same engine
        if [ $((r % 2)) = 1 ]; then
            run_llama "$r" "$pair" "$pair" 1
            run_pair_tripar "$r" "$pair"
        else
            run_pair_tripar "$r" "$pair"
            run_llama "$r" "$pair" "$pair" 1
        fi
    done
    if [ $threads2 = 1 ]; then
        # decode on 2 threads; the fp32 run's roofline measures the read bandwidth on one
        # thread and on two (stream_gbs_one_thread, stream_gbs), which the table sets it against
        if [ $((r % 2)) = 1 ]; then
            run_llama "$r" f32-t2 f32 2
            run_tripar "$r" f32-t2 fp32 2 true "r$r-f32-t2-tripar-fp32" model.precision=fp32
        else
            run_tripar "$r" f32-t2 fp32 2 true "r$r-f32-t2-tripar-fp32" model.precision=fp32
            run_llama "$r" f32-t2 f32 2
        fi
    fi
done

# accuracy: one run per variant with the prefill logits recorded (their capture adds the LM
# head over every prompt row to the first measured prefill, so these runs are not timed ones)
for i in "${!names[@]}"; do
    read -ra opts <<<"${sets_of[$i]}"
    run_tripar acc "${llama_of[$i]}" "${names[$i]}" 1 false "acc-${names[$i]}" "${opts[@]}" \
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
