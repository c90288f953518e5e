#!/usr/bin/env bash
# A Llama model saved with --save-checkpoint from a mesh that replicates its kv heads (tp = 4
# over 2 kv heads: each kv head on 2 ranks) and loaded on another mesh (tp = 2 x pp = 2) must
# give a run bit-identical to the synthetic model on that mesh (tokens and every activation:
# tripar diff with zero tolerance), so the saved tensors are the global ones. Then a job that
# says model.arch: gpt2 is refused on the llama checkpoint.
# usage: checkpoint_llama_roundtrip.sh JOB WORKDIR [KEY=VALUE...] (more --set options for the
# synthetic model, e.g. model.synthetic.head_dim=6); CKPT_ARCH names the job's arch (llama,
# or mixtral and qwen2_moe for factor_moe.yaml) for the refusal's message
set -euo pipefail
: "${TRIPAR_BIN:?}"
job=$1 work=$2
shift 2
MPIEXEC=${MPIEXEC:-mpiexec}
arch=${CKPT_ARCH:-llama}
mkdir -p "$work"
: >"$work/log"
run() { "$MPIEXEC" -n 4 --oversubscribe "$TRIPAR_BIN" run "$job" "$@" >>"$work/log" 2>&1 || { cat "$work/log"; exit 1; }; }
kv=(--set model.synthetic.kv_heads=2 --set model.synthetic.tie_embeddings=false
    --set "model.synthetic.rope_scaling={factor: 4, original_max_position_embeddings: 16}")
for kv_opt in "$@"; do kv+=(--set "$kv_opt"); done
run --out "$work/synthetic.h5" "${kv[@]}" --set parallel.tp=2 --set parallel.pp=2
run --out "$work/saver.h5" "${kv[@]}" --set parallel.tp=4 --save-checkpoint "$work/saved.h5"
run --out "$work/reloaded.h5" --set parallel.tp=2 --set parallel.pp=2 --set model.arch="$arch" \
    --set model.checkpoint="$work/saved.h5"
"$TRIPAR_BIN" diff "$work/synthetic.h5" "$work/reloaded.h5" --rtol 0 --atol 0
set +e
"$TRIPAR_BIN" run "$job" --dry-run --set model.arch=gpt2 --set model.checkpoint="$work/saved.h5" \
    >"$work/wrong_arch.log" 2>&1
rc=$?
set -e
cat "$work/wrong_arch.log"
[ $rc -eq 2 ] || { echo "expected exit 2 for model.arch gpt2 on a $arch checkpoint, got $rc"; exit 1; }
grep -q "model.arch = gpt2, but the checkpoint .* holds a $arch model" "$work/wrong_arch.log"
