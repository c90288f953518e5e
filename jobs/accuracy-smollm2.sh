#!/usr/bin/env bash
# Benchmark (not a test): the accuracy of every weight precision and KV cache type on a real
# model, SmolLM2-135M-Instruct (tools/fetch_smollm2.sh), against fp32, with `tripar report
# --baseline`: token agreement over the greedy continuation, and the prefill logits' maximum
# relative error and mean KL divergence. The fp32 reference is the checkpoint `tripar
# import-gguf` makes of the Q4_1 GGUF (its blocks dequantised), so every precision quantises
# the same weights the reference computes with (the file's own blocks, `--precision keep`, are
# another checkpoint, which `report --baseline` does not compare with). q4_k is not run: SmolLM2's rows of 576 are not whole 256-wide super-blocks
# (tripar refuses it, as llama.cpp falls back to other types for those matrices).
# Two prompts of the benchmark protocol (data/prompts: qa-128, generation-512), one sequence
# each, 64 new tokens, one rank with every core. docs/performance.md ("Accuracy on a real
# model") has the measured table. Accuracy does not depend on load; about 4 min on 2 cores.
#   jobs/accuracy-smollm2.sh [OUTDIR]
# OUTDIR defaults to out/accuracy-smollm2-<timestamp> and must be new or empty. Environment:
# TRIPAR_BIN (default build/tripar), TRIPAR_MODELS_CACHE. Exit 0 when every run ran, 1 when one
# failed, 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPAR=${TRIPAR_BIN:-build/tripar}
NEW=64
PROMPTS="qa-128 generation-512"
# name and the --set options of each run; fp32 is the baseline
RUNS=("fp32" "bf16 model.precision=bf16" "int8w model.precision=int8w"
    "int8w-g32 model.precision=int8w model.int8_group=32" "q8_0 model.precision=q8_0"
    "q4_0 model.precision=q4_0" "q4_1 model.precision=q4_1"
    "kv-bf16 model.kv_dtype=bf16" "kv-fp16 model.kv_dtype=fp16" "kv-int8 model.kv_dtype=int8")

say() { echo "accuracy-smollm2: $*" >&2; }
die() { say "$*"; exit 1; }
case ${1:-} in -h | --help) sed -n '14,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;; esac
[ $# -le 1 ] || { say "usage: jobs/accuracy-smollm2.sh [OUTDIR]"; exit 2; }
out=${1:-out/accuracy-smollm2-$(date +%Y%m%d-%H%M%S)}
# run files are never overwritten: a fresh folder per run of the benchmark
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then say "$out is not empty; name a new folder"; exit 2; fi
[ -x "$TRIPAR" ] || die "no tripar at $TRIPAR (build it first)"
mkdir -p "$out"

rc=0
q41=$(bash tools/fetch_smollm2.sh) || rc=$?
[ $rc = 0 ] || die "cannot fetch SmolLM2 (tools/fetch_smollm2.sh exit $rc)"
"$TRIPAR" import-gguf "$q41" --out "$out/smollm2-fp32.h5" >"$out/import.log" 2>&1 ||
    { tail -20 "$out/import.log" >&2; die "tripar import-gguf $q41 failed"; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for prompt in $PROMPTS; do
    job=$out/$prompt.yaml
    cat >"$job" <<YAML
# jobs/accuracy-smollm2.sh: SmolLM2 on data/prompts/$prompt.txt, greedy, logits recorded
model: {checkpoint: $out/smollm2-fp32.h5}
backend: {kind: cpu, threads: $(nproc)}
input: {text_file: $PWD/data/prompts/$prompt.txt}
generate: {new_tokens: $NEW, sampling: greedy, stop_at_eos: false}
record: {activations: [logits]}
YAML
    files=()
    for run in "${RUNS[@]}"; do
        read -r name sets <<<"$run"
        args=()
        for o in $sets; do args+=(--set "$o"); done
        say "$prompt: $name"
        mpirun -n 1 --bind-to none "$TRIPAR" run "$job" "${args[@]}" --out "$out/$prompt-$name.h5" \
            >"$out/$prompt-$name.log" 2>&1 || { tail -20 "$out/$prompt-$name.log" >&2; die "tripar run $prompt $name failed"; }
        [ "$name" = fp32 ] || files+=("$out/$prompt-$name.h5")
    done
    "$TRIPAR" report "${files[@]}" --baseline "$out/$prompt-fp32.h5" >"$out/$prompt-report.txt"
done
# the rows of each report's baseline table: file, tok_agree, logit_maxrel, logit_KL, ...
/usr/bin/python3 - "$out" $PROMPTS <<'PY' | tee "$out/table.txt"
import os, sys
out, prompts = sys.argv[1], sys.argv[2:]
rows = {}
for p in prompts:
    with open(os.path.join(out, p + "-report.txt")) as f:
        lines = f.read().split("\nagainst baseline", 1)[1].splitlines()[2:]
    for line in lines:
        cols = line.split()
        if len(cols) < 4 or not cols[0].endswith(".h5"):
            continue
        name = os.path.basename(cols[0])[len(p) + 1:-3]
        rows.setdefault(name, {})[p] = "%s / %s / %s" % tuple(cols[1:4])
print("| run | " + " | ".join(f"{p}: agreement / logit max-rel / KL" for p in prompts) + " |")
print("|---|" + "---|" * len(prompts))
for name, per in rows.items():
    print(f"| {name} | " + " | ".join(per.get(p, "-") for p in prompts) + " |")
PY
say "run files, reports and table.txt in $out"
