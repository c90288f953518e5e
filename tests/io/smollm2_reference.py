#!/usr/bin/python3
"""tripar's SmolLM2 against an independent float64 numpy Llama that reads the same GGUF file.

The reference is test code written apart from the C path: it reads the GGUF with gguf-py
(llama.cpp's own Python package), dequantizes with gguf.quants, keeps llama.cpp's row order of
Q and K and so applies RoPE to adjacent pairs (llama.cpp's "normal" rope), where tripar un-permutes
the rows at import and rotates halves. Both are the same function; nothing of the one is used by
the other, so an error in the un-permutation, the GQA grouping, the tied head or the norms shows.

tripar imports the GGUF (fp32) and runs a batch of two prompts with `record.activations: logits`
on 1 rank, tp=3, pp=2 and dp=2 x pp=2 (9 heads and 3 KV heads allow tp 3). For each:
- the prefill logits, every position of both prompts, are within a relative error
  max|tripar - ref| / max|ref| <= 1e-4 of the float64 reference;
- the greedy tokens equal the reference's greedy tokens.

Usage: smollm2_reference.py TRIPAR WORKDIR (MPIEXEC in the environment launches the ranks).
Exit 77, skipped, only when the model or gguf-py cannot be downloaded."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_check import venv_make  # noqa: E402
from smollm2_fetch import smollm2_gguf, tripar_ranks  # noqa: E402

NEW_TOKENS = 8
REL_TOL = 1e-4
QUESTION = "<|im_start|>user\\nWhat is the capital of France?<|im_end|>\\n<|im_start|>assistant\\n"
# (name, ranks, parallel keys)
MESHES = [("1 rank", 1, ""), ("tp=3", 3, "tp: 3"), ("pp=2", 2, "pp: 2"),
          ("dp=2 x pp=2", 4, "dp: 2, pp: 2")]


# ---- the float64 reference, run inside the venv that has gguf-py --------------------------------

def reference(gguf_path, prompts_npy, out_npz, new_tokens):
    """Writes the prefill logits (batch, seq, vocab) and the greedy continuation of each prompt."""
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize

    r = GGUFReader(gguf_path)

    def meta(key):
        f = r.fields[key]
        return f.parts[f.data[0]][0].item()

    n_layer = meta("llama.block_count")
    n_head = meta("llama.attention.head_count")
    n_kv = meta("llama.attention.head_count_kv")
    eps = meta("llama.attention.layer_norm_rms_epsilon")
    theta = meta("llama.rope.freq_base")
    w = {t.name: dequantize(t.data, t.tensor_type).astype(np.float64) for t in r.tensors}
    embd = w["token_embd.weight"]
    head = w.get("output.weight", embd)  # tied embeddings when the file has no output tensor
    d_head = embd.shape[1] // n_head

    def rms_norm(x, g):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g

    def rope_adjacent(x):  # x: (seq, heads, d_head); pairs (2i, 2i+1) as llama.cpp stores them
        pos = np.arange(x.shape[0], dtype=np.float64)[:, None]
        inv = theta ** (-np.arange(0, d_head, 2, dtype=np.float64) / d_head)
        ang = pos * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def forward(ids):
        h = embd[ids]
        seq = len(ids)
        causal = np.triu(np.full((seq, seq), -np.inf), 1)
        for i in range(n_layer):
            b = f"blk.{i}."
            x = rms_norm(h, w[b + "attn_norm.weight"])
            q = rope_adjacent((x @ w[b + "attn_q.weight"].T).reshape(seq, n_head, d_head))
            k = rope_adjacent((x @ w[b + "attn_k.weight"].T).reshape(seq, n_kv, d_head))
            v = (x @ w[b + "attn_v.weight"].T).reshape(seq, n_kv, d_head)
            att = np.empty((seq, n_head, d_head))
            for hh in range(n_head):
                kv = hh // (n_head // n_kv)
                s = q[:, hh, :] @ k[:, kv, :].T / np.sqrt(d_head) + causal
                p = np.exp(s - s.max(axis=-1, keepdims=True))
                att[:, hh, :] = (p / p.sum(axis=-1, keepdims=True)) @ v[:, kv, :]
            h = h + att.reshape(seq, -1) @ w[b + "attn_output.weight"].T
            x = rms_norm(h, w[b + "ffn_norm.weight"])
            g = x @ w[b + "ffn_gate.weight"].T
            h = h + ((g / (1 + np.exp(-g))) * (x @ w[b + "ffn_up.weight"].T)) @ \
                w[b + "ffn_down.weight"].T
        return rms_norm(h, w["output_norm.weight"]) @ head.T

    prompts = np.load(prompts_npy)
    logits, tokens = [], []
    for ids in prompts:
        ids = list(int(t) for t in ids)
        logits.append(forward(ids))
        for _ in range(new_tokens):
            ids.append(int(np.argmax(forward(ids)[-1])))
        tokens.append(ids)
    np.savez(out_npz, logits=np.array(logits), tokens=np.array(tokens, dtype=np.int64))


# ---- the driver, run by Debian's python with h5py ------------------------------------------

def run(tripar, work, name, ranks, parallel, input_line):
    job = os.path.join(work, "job.yaml")
    with open(job, "w") as f:
        f.write(f"model: {{checkpoint: {os.path.join(work, 'smollm2.h5')}}}\n"
                f"backend: {{kind: cpu, threads: 1}}\n{input_line}\n"
                f"generate: {{new_tokens: {NEW_TOKENS}}}\n"
                f"record: {{activations: [logits]}}\n")
        if parallel:
            f.write(f"parallel: {{{parallel}}}\n")
    out = os.path.join(work, name.replace(" ", "").replace("=", "") + ".h5")
    tripar_ranks([tripar, "run", job, "--out", out], ranks, name)
    import h5py
    with h5py.File(out, "r") as f:
        return f["output/tokens"][()], f["activations/logits"][()]


def main(tripar, work):
    import numpy as np
    os.makedirs(work, exist_ok=True)
    gguf = smollm2_gguf(work)
    ckpt = os.path.join(work, "smollm2.h5")
    if os.path.exists(ckpt):  # this test's own output of an earlier run: import afresh
        os.remove(ckpt)
    r = subprocess.run([tripar, "import-gguf", gguf, "--out", ckpt], capture_output=True,
                       text=True)
    assert r.returncode == 0, "import-gguf failed:\n" + r.stdout + r.stderr

    # The question's ids as tripar's tokenizer gives them; the second prompt differs in one
    # token, so that dp=2 splits a batch whose rows differ.
    tokens, _ = run(tripar, work, "ids", 1, "", f"input: {{text: \"{QUESTION}\"}}")
    first = [int(t) for t in tokens[0, :tokens.shape[1] - NEW_TOKENS]]
    second = list(first)
    second[len(first) // 2] = (second[len(first) // 2] + 7) % 49152
    prompts = np.array([first, second], dtype=np.int64)
    np.save(os.path.join(work, "prompts.npy"), prompts)

    py = venv_make(work)
    ref_npz = os.path.join(work, "reference.npz")
    r = subprocess.run([py, os.path.abspath(__file__), "--reference", gguf,
                        os.path.join(work, "prompts.npy"), ref_npz], capture_output=True,
                       text=True)
    assert r.returncode == 0, "the numpy reference failed:\n" + r.stdout + r.stderr
    ref = np.load(ref_npz)
    print(f"reference greedy answer ids: {ref['tokens'][0, len(first):].tolist()}")

    input_line = "input: {tokens: [" + ", ".join(str(p.tolist()) for p in prompts) + "]}"
    failed = []
    for name, ranks, parallel in MESHES:
        tokens, logits = run(tripar, work, name, ranks, parallel, input_line)
        rel = np.max(np.abs(logits - ref["logits"])) / np.max(np.abs(ref["logits"]))
        same = np.array_equal(tokens, ref["tokens"])
        print(f"{name:12s} logits max rel error {rel:.2e} (bound {REL_TOL:g}), greedy tokens "
              f"{'identical' if same else 'DIFFER'}")
        if rel > REL_TOL or not same:
            failed.append(name)
            if not same:
                print(f"  tripar    {tokens.tolist()}\n  reference {ref['tokens'].tolist()}")
    assert not failed, "differs from the float64 reference: " + ", ".join(failed)
    print("smollm2_reference: passed")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--reference":
        reference(sys.argv[2], sys.argv[3], sys.argv[4], NEW_TOKENS)
    elif len(sys.argv) == 3:
        main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
    else:
        sys.exit("usage: smollm2_reference.py TRIPAR WORKDIR")
