#!/usr/bin/python3
"""Writes a small Hugging Face-style GPT-2 directory for the import-hf tests: config.json,
model.safetensors (or shards + index) with random weights in F32/F16/BF16, and a tiny
vocab.json/merges.txt. Also dumps what the importer must produce: expected/<name>.bin, the
float32 contents of each /weights/<name> dataset (stacked, Linear (out, in) orientation), and
expected/ref_{prompt,logits,tokens}.bin from an independent numpy GPT-2 forward pass.
--break KIND writes a deliberately malformed directory instead (see BREAKS)."""
import argparse
import json
import os
import struct
import sys

import numpy as np

# GPT-2's byte-to-character map, shared with the project's token counter.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from count_tokens import bytes_to_unicode  # noqa: E402

BREAKS = [
    "header-size-zero", "header-past-eof", "header-absurd", "offsets-out-of-range", "overlap",
    "unknown-dtype", "shape-bytes-mismatch", "shape-config-mismatch", "missing-tensor",
    "extra-layer", "not-json",
]

# The tiny BPE used by the tests: id b for byte b, then one id per merge (256 + rank).
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("l", "l"), ("e", "ll"), ("h", "ell"),
          ("hell", "o"), ("i", "n"), ("Ġ", "w"), ("o", "r"), ("l", "d"), ("Ġw", "or"),
          ("Ġwor", "ld"), ("o", "!"), ("Ġ", "Ġ")]

# The directories the checkpoint tests use (--all ROOT): name -> arguments.
VARIANTS = {
    "f32": ["--dtype", "F32"],
    "f16": ["--dtype", "F16", "--lm-head", "tied"],
    "bf16": ["--dtype", "BF16", "--prefix", "--shards", "3", "--lm-head", "tied"],
    "f32-mlp": ["--dtype", "F32", "--mlp", "24", "--layers", "3", "--heads", "4", "--prefix",
                "--lm-head", "differ", "--no-tokenizer", "--vocab", "300"],
}


def write_tokenizer(out):
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    for rank, (a, b) in enumerate(MERGES):
        vocab[a + b] = 256 + rank
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in MERGES:
            f.write(f"{a} {b}\n")
    return len(vocab)


def to_dtype(x, dtype):
    """Returns (raw little-endian bytes, the float32 values a reader must recover)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if dtype == "F32":
        return x.astype("<f4").tobytes(), x
    if dtype == "F16":
        h = x.astype("<f2")
        return h.tobytes(), h.astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")  # round to nearest even
    back = (rounded.astype(np.uint32) << 16).view(np.float32)
    return rounded.tobytes(), back


def write_safetensors(path, tensors, brk=None):
    """tensors: list of (name, dtype, shape, raw bytes). Written by hand: 8-byte size + JSON."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    names = [t[0] for t in tensors]
    victim = names[len(names) // 2]
    if brk == "offsets-out-of-range":
        b, e = header[victim]["data_offsets"]
        header[victim]["data_offsets"] = [offset + 8, offset + 8 + (e - b)]
    elif brk == "overlap":
        a, b = names[1], names[2]  # same byte length: wpe/ln... pick a pair of equal size
        for i in range(len(names) - 1):
            if len(tensors[i][3]) == len(tensors[i + 1][3]):
                a, b = names[i], names[i + 1]
                break
        header[b]["data_offsets"] = list(header[a]["data_offsets"])
    elif brk == "unknown-dtype":
        header[victim]["dtype"] = "F64"
    elif brk == "shape-bytes-mismatch":
        header[victim]["shape"] = [s + 1 for s in header[victim]["shape"]]
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # align the data section, like the reference
    size = len(text)
    if brk == "header-size-zero":
        size = 0
    elif brk == "header-past-eof":
        size = len(text) + offset + 100
    elif brk == "header-absurd":
        size = 1 << 40
    if brk == "not-json":
        text = b"{" + text[2:] + b" "
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", size))
        f.write(text)
        for raw in blobs:
            f.write(raw)


# The prompt of the reference outputs and how many tokens greedy decoding adds.
REF_PROMPT = [1, 5, 17, 100, 200, 3, 42]
REF_NEW = 5


def gpt2_forward(hf, tokens, L, H, C, eps):
    """An independent GPT-2 forward pass in float64 straight from the Hugging Face layout
    (Conv1D: y = x @ W + b), pre-norm, tanh GELU, causal attention, head tied to wte.
    Returns the logits of every position, (T, V)."""
    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * g + b

    w = {k: v.astype(np.float64) for k, v in hf.items()}
    T, D = len(tokens), C // H
    x = w["wte.weight"][tokens] + w["wpe.weight"][:T]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(L):
        p = f"h.{i}."
        h = ln(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (qkv[:, j * C:(j + 1) * C].reshape(T, H, D).transpose(1, 0, 2) for j in range(3))
        att = q @ k.transpose(0, 2, 1) / np.sqrt(D) + mask
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(1, 0, 2).reshape(T, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = ln(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
        f = h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
        f = 0.5 * f * (1 + np.tanh(np.sqrt(2 / np.pi) * (f + 0.044715 * f ** 3)))
        x = x + f @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = ln(x, w["ln_f.weight"], w["ln_f.bias"])
    return x @ w["wte.weight"].T


def reference_write(out, hf, L, H, C, V, eps):
    """expected/ref_prompt.bin (int32), ref_logits.bin (float32 (T, V) of the prompt) and
    ref_tokens.bin (int32, prompt + REF_NEW greedy tokens) for end-to-end model tests."""
    prompt = [t % V for t in REF_PROMPT]
    logits = gpt2_forward(hf, prompt, L, H, C, eps)
    tokens = list(prompt)
    for _ in range(REF_NEW):
        tokens.append(int(np.argmax(gpt2_forward(hf, tokens, L, H, C, eps)[-1])))
    ex = os.path.join(out, "expected")
    np.array(prompt, "<i4").tofile(os.path.join(ex, "ref_prompt.bin"))
    logits.astype("<f4").tofile(os.path.join(ex, "ref_logits.bin"))
    np.array(tokens, "<i4").tofile(os.path.join(ex, "ref_tokens.bin"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", help="the directory to write (with --all: the root of all variants)")
    ap.add_argument("--all", action="store_true",
                    help="write every test variant and every --break case under OUT")
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--embd", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=32)
    ap.add_argument("--mlp", type=int, default=0, help="n_inner; 0 writes null (4 * embd)")
    ap.add_argument("--vocab", type=int, default=0, help="0: the tokenizer's size")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--prefix", action="store_true", help='names start with "transformer."')
    ap.add_argument("--lm-head", default="none", choices=["none", "tied", "differ"])
    ap.add_argument("--no-tokenizer", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--break", dest="brk", choices=BREAKS)
    a = ap.parse_args(argv)
    if a.all:
        for name, args in VARIANTS.items():
            main([os.path.join(a.out, name)] + args)
        for brk in BREAKS:
            main([os.path.join(a.out, "break-" + brk), "--break", brk])
        return

    os.makedirs(os.path.join(a.out, "expected"), exist_ok=True)
    n_tok = 256 + len(MERGES)
    if not a.no_tokenizer:
        write_tokenizer(a.out)
    V = a.vocab or n_tok
    L, C, T = a.layers, a.embd, a.ctx
    M = a.mlp or 4 * C
    config = {"model_type": "gpt2", "n_layer": L, "n_head": a.heads, "n_embd": C,
              "vocab_size": V, "n_positions": T, "n_ctx": T,
              "n_inner": a.mlp if a.mlp else None, "layer_norm_epsilon": 1e-5,
              "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"]}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)

    rng = np.random.default_rng(a.seed)
    tensors, expected, hf = [], {}, {}

    def add(hf_name, dst, shape, layer=None, transpose=False, scale=0.5, offset=0.0):
        vals = (offset + scale * rng.standard_normal(shape)).astype(np.float32)
        raw, back = to_dtype(vals, a.dtype)
        tensors.append((hf_name, a.dtype, shape, raw))
        back = back.reshape(shape)
        hf[hf_name] = back
        if transpose:
            back = back.T  # Conv1D [in, out] -> Linear (out, in)
        expected.setdefault(dst, []).append(np.ascontiguousarray(back))
        return back

    wte = add("wte.weight", "wte", (V, C))
    add("wpe.weight", "wpe", (T, C), scale=0.1)
    for i in range(L):
        add(f"h.{i}.ln_1.weight", "ln1_g", (C,), scale=0.1, offset=1.0)
        add(f"h.{i}.ln_1.bias", "ln1_b", (C,), scale=0.1)
        tensors.append((f"h.{i}.attn.bias", a.dtype, (1, 1, T, T),
                        to_dtype(np.tril(np.ones((T, T))), a.dtype)[0]))  # ignored causal mask
        add(f"h.{i}.attn.c_attn.weight", "qkv_w", (C, 3 * C), transpose=True)
        add(f"h.{i}.attn.c_attn.bias", "qkv_b", (3 * C,), scale=0.1)
        add(f"h.{i}.attn.c_proj.weight", "proj_w", (C, C), transpose=True)
        add(f"h.{i}.attn.c_proj.bias", "proj_b", (C,), scale=0.1)
        add(f"h.{i}.ln_2.weight", "ln2_g", (C,), scale=0.1, offset=1.0)
        add(f"h.{i}.ln_2.bias", "ln2_b", (C,), scale=0.1)
        add(f"h.{i}.mlp.c_fc.weight", "fc1_w", (C, M), transpose=True)
        add(f"h.{i}.mlp.c_fc.bias", "fc1_b", (M,), scale=0.1)
        add(f"h.{i}.mlp.c_proj.weight", "fc2_w", (M, C), transpose=True)
        add(f"h.{i}.mlp.c_proj.bias", "fc2_b", (C,), scale=0.1)
    add("ln_f.weight", "lnf_g", (C,), scale=0.1, offset=1.0)
    add("ln_f.bias", "lnf_b", (C,), scale=0.1)

    if a.lm_head != "none":
        head = wte.copy()
        if a.lm_head == "differ":
            head[0, 0] += 1.0
        tensors.append(("lm_head.weight", a.dtype, (V, C), to_dtype(head, a.dtype)[0]))
    if a.brk == "shape-config-mismatch":
        i = [t[0] for t in tensors].index("h.1.mlp.c_fc.weight" if L > 1 else "h.0.mlp.c_fc.weight")
        name, dt, _, _ = tensors[i]
        raw, _ = to_dtype(np.zeros((C, M + 8), np.float32), a.dtype)
        tensors[i] = (name, dt, (C, M + 8), raw)
    elif a.brk == "missing-tensor":
        tensors = [t for t in tensors if t[0] != f"h.{L - 1}.attn.c_proj.bias"]
    elif a.brk == "extra-layer":
        raw, _ = to_dtype(np.ones(C, np.float32), a.dtype)
        tensors.append((f"h.{L}.ln_1.weight", a.dtype, (C,), raw))
    if a.prefix:
        tensors = [(("transformer." + n) if not n.startswith("lm_head") else n, d, s, r)
                   for n, d, s, r in tensors]

    for dst, parts in expected.items():
        arr = np.stack(parts) if len(parts) > 1 or dst not in ("wte", "wpe", "lnf_g", "lnf_b") \
            else parts[0]
        arr.astype("<f4").tofile(os.path.join(a.out, "expected", dst + ".bin"))

    if not a.brk:
        reference_write(a.out, hf, L, a.heads, C, V, 1e-5)

    brk = a.brk if a.brk in ("header-size-zero", "header-past-eof", "header-absurd",
                             "offsets-out-of-range", "overlap", "unknown-dtype",
                             "shape-bytes-mismatch", "not-json") else None
    if a.shards <= 1:
        write_safetensors(os.path.join(a.out, "model.safetensors"), tensors, brk)
    else:
        per = (len(tensors) + a.shards - 1) // a.shards
        weight_map = {}
        for s in range(a.shards):
            part = tensors[s * per:(s + 1) * per]
            fname = f"model-{s + 1:05d}-of-{a.shards:05d}.safetensors"
            write_safetensors(os.path.join(a.out, fname), part, brk if s == a.shards - 1 else None)
            for t in part:
                weight_map[t[0]] = fname
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=1)


if __name__ == "__main__":
    main()
