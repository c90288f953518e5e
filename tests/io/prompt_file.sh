#!/usr/bin/env bash
# A prompt file of data/prompts through a checkpoint that carries a tokenizer: the runner
# encodes it with the checkpoint's BPE (the fixture's 15 merges of make_hf_dir.py), to the very
# ids tools/count_tokens.py gives with the same vocab.json and merges.txt (so the tool that
# measured data/prompts agrees with tripar's tokenizer), and /output/text starts with the file.
# usage: prompt_file.sh WORKDIR PROMPT.txt
set -euo pipefail
: "${TRIPAR_BIN:?}" "${TRIPAR_SOURCE_DIR:?}"
work=$1 prompt=$2
PY=/usr/bin/python3
rm -rf "$work"
mkdir -p "$work"
# ctx 1024: the fixture's few merges leave a 128-token prompt at about 500 of its tokens
$PY "$TRIPAR_SOURCE_DIR/tests/io/make_hf_dir.py" "$work/hf" --ctx 1024 >/dev/null
"$TRIPAR_BIN" import-hf "$work/hf" --out "$work/ckpt.h5" >/dev/null
cat >"$work/job.yaml" <<EOF2
model: {checkpoint: ckpt.h5}
backend: {kind: cpu, threads: 1}
input: {text_file: $prompt}
generate: {new_tokens: 3}
EOF2
"${MPIEXEC:-mpiexec}" -n 1 --oversubscribe "$TRIPAR_BIN" run "$work/job.yaml" --out "$work/run.h5" \
    >"$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
$PY - "$work" "$prompt" <<'EOF2'
import sys, h5py, os
sys.path.insert(0, os.path.join(os.environ["TRIPAR_SOURCE_DIR"], "tools"))
from count_tokens import Bpe
work, prompt = sys.argv[1], sys.argv[2]
text = open(prompt, encoding="ascii").read()
ids = Bpe(f"{work}/hf/vocab.json", f"{work}/hf/merges.txt").encode(text)
with h5py.File(f"{work}/run.h5", "r") as f:
    assert int(f.attrs["complete"]) == 1
    tokens = f["output/tokens"][0]
    out = f["output/text"][0]
out = out.decode() if isinstance(out, bytes) else out
assert len(ids) < len(text.encode()), "the merges did not apply: read as bytes?"
assert tokens.shape[0] == len(ids) + 3, (tokens.shape, len(ids))
assert tokens[:len(ids)].tolist() == ids, "tripar's ids differ from tools/count_tokens.py"
assert out.startswith(text), "the prompt's text does not come back"
print(f"{os.path.basename(prompt)}: {len(ids)} tokens through the checkpoint's tokenizer, "
      f"{len(text.encode())} bytes; same ids as tools/count_tokens.py")
EOF2
