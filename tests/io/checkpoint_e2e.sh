#!/usr/bin/env bash
# Import a Hugging Face GPT-2 directory, generate from it on a mesh, and compare the logits
# and greedy tokens with an independent numpy GPT-2 that read the Hugging Face weights
# directly (tests/io/make_hf_dir.py wrote expected/ref_*.bin). Also: save a synthetic model,
# reload it, and require a bit-identical run.
# usage: checkpoint_e2e.sh FIXTURE_DIR WORKDIR NP TP PP
set -euo pipefail
: "${TRIPAR_BIN:?}"
fixture=$1 work=$2 np=$3 tp=$4 pp=$5
PY=/usr/bin/python3
MPIEXEC=${MPIEXEC:-mpiexec}
mkdir -p "$work"
name=$(basename "$fixture")-np$np
ckpt="$work/$name.h5"
"$TRIPAR_BIN" import-hf "$fixture" --out "$ckpt" >/dev/null
prompt=$($PY -c "import numpy as n,sys; print(','.join(map(str,n.fromfile(sys.argv[1],dtype=n.int32))))" \
    "$fixture/expected/ref_prompt.bin")
ntok=$($PY -c "import numpy as n,sys; print(n.fromfile(sys.argv[1],dtype=n.int32).size)" \
    "$fixture/expected/ref_tokens.bin")
nprompt=$(echo "$prompt" | tr ',' '\n' | wc -l)
cat >"$work/$name.yaml" <<EOF2
model: {checkpoint: $ckpt}
backend: {kind: cpu, threads: 1}
parallel: {tp: $tp, pp: $pp}
input: {tokens: [[$prompt]]}
generate: {new_tokens: $((ntok - nprompt))}
record: {activations: [logits]}
EOF2
"$MPIEXEC" -n "$np" --oversubscribe "$TRIPAR_BIN" run "$work/$name.yaml" --out "$work/$name-run.h5" >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; exit 1; }
$PY - "$work/$name-run.h5" "$fixture/expected" <<'EOF2'
import sys, h5py, numpy as np
run, exp = sys.argv[1], sys.argv[2]
f = h5py.File(run, "r")
assert f.attrs["complete"] == 1, "run file not complete"
tokens = f["output/tokens"][0]
ref_tokens = np.fromfile(exp + "/ref_tokens.bin", dtype=np.int32)
ref_logits = np.fromfile(exp + "/ref_logits.bin", dtype=np.float32)
logits = f["activations/logits"][0]
ref_logits = ref_logits.reshape(logits.shape)
rel = np.abs(logits - ref_logits).max() / np.abs(ref_logits).max()
print(f"logits rel error {rel:.3g}; tokens {tokens.tolist()} vs reference {ref_tokens.tolist()}")
assert rel < 1e-4, f"logits differ from the reference: {rel}"
assert (tokens == ref_tokens).all(), "greedy tokens differ from the reference"
if "output/text" in f:
    print("text:", f["output/text"][0])
EOF2
# Text in, text out: the prompt's text comes back byte for byte at the start of /output/text.
# A checkpoint imported without vocab.json/merges.txt must refuse text input with exit 2.
text_run() {
    "$MPIEXEC" -n "$np" --oversubscribe "$TRIPAR_BIN" run "$work/$name.yaml" --out "$work/$name-text.h5" \
        --set "input.text=Hi wörld	🚀!" --set generate.new_tokens=2 >"$work/$name-text.log" 2>&1
}
if [ ! -f "$fixture/vocab.json" ]; then
    rc=0; text_run || rc=$?
    [ $rc -eq 2 ] && grep -q "has no tokenizer" "$work/$name-text.log" ||
        { echo "expected exit 2 for text without a tokenizer, got $rc"; cat "$work/$name-text.log"; exit 1; }
    echo "text input refused without a tokenizer, as it should be"
    exit 0
fi
text_run || { cat "$work/$name-text.log"; exit 1; }
$PY - "$work/$name-text.h5" <<'EOF2'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
text = f["output/text"][0]
text = text.decode() if isinstance(text, bytes) else text
want = "Hi wörld\t🚀!"
print("generated text:", repr(text))
assert text.startswith(want), f"prompt text not preserved: {text!r}"
assert f["output/tokens"].shape[1] > 2
EOF2
