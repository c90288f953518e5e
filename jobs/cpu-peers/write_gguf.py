"""Writes a GPT-2-shaped GGUF of random weights for llama.cpp (jobs/bench-cpu-peers.sh).

Runs in the benchmark's cache venv (it needs the `gguf` package). The file is what llama.cpp's
converter would make of a GPT-2 checkpoint: architecture "gpt2", a byte-level BPE tokenizer, the
output tied to token_embd, 1-D tensors and position_embd kept F32, every other matrix in the
requested type. Weights are seeded normals times 0.02, so activations stay finite; speed does
not depend on the values, and accuracy is compared inside tripar only.

usage: write_gguf.py --type f32|f16|q8_0 --out FILE.gguf [--layers 12 --heads 12 --embd 768
                     --vocab 50257 --ctx 1024 --seed 124]
"""
import argparse
import os
import sys

import gguf
import numpy as np

QTYPES = {
    "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
}


def byte_chars():
    """One printable character per byte value, the byte-level BPE convention: bytes that are
    printable and not space stand for themselves, the others take code points from 256 up."""
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    chars, spare = [], 256
    for b in range(256):
        if b in keep:
            chars.append(chr(b))
        else:
            chars.append(chr(spare))
            spare += 1
    return chars


def synthetic_vocab(n_vocab):
    """n_vocab unique tokens: the 256 byte tokens, then two-byte tokens each made by one merge
    of two byte tokens (so the merges are a valid BPE table), then <|endoftext|> last."""
    base = byte_chars()
    n_pairs = n_vocab - 257
    if n_pairs < 0 or n_pairs > 256 * 256:
        sys.exit(f"write_gguf: a vocab of {n_vocab} does not fit this synthetic scheme")
    tokens, merges = list(base), []
    for k in range(n_pairs):
        a, b = base[k // 256], base[k % 256]
        tokens.append(a + b)
        merges.append(f"{a} {b}")
    tokens.append("<|endoftext|>")
    types = [gguf.TokenType.NORMAL] * (n_vocab - 1) + [gguf.TokenType.CONTROL]
    assert len(set(tokens)) == n_vocab
    return tokens, types, merges


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--type", required=True, choices=sorted(QTYPES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=124)
    args = ap.parse_args()
    qtype, ftype = QTYPES[args.type]
    C, L, V, T, F = args.embd, args.layers, args.vocab, args.ctx, 4 * args.embd
    rng = np.random.default_rng(args.seed)

    # written to a temporary name and renamed at the end, so an interrupted write never
    # leaves a file the benchmark would take as cached
    tmp = args.out + ".partial"
    w = gguf.GGUFWriter(tmp, "gpt2")
    w.add_name(f"tripar synthetic gpt2 {args.type}")
    w.add_block_count(L)
    w.add_context_length(T)
    w.add_embedding_length(C)
    w.add_feed_forward_length(F)
    w.add_head_count(args.heads)
    w.add_layer_norm_eps(1e-5)
    w.add_file_type(ftype)
    tokens, types, merges = synthetic_vocab(V)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(V - 1)
    w.add_eos_token_id(V - 1)
    w.add_add_bos_token(False)

    def matrix(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)

    def vector(n, centre):
        return (centre + rng.standard_normal(n, dtype=np.float32) * 0.02).astype(np.float32)

    def put(name, data, keep_f32=False):
        # numpy shapes are (rows, cols); GGUF stores them innermost first, as ggml's ne
        if data.ndim == 1 or keep_f32 or qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, data)
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, data.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)

    put("token_embd.weight", matrix(V, C))
    put("position_embd.weight", matrix(T, C), keep_f32=True)
    for i in range(L):
        p = f"blk.{i}."
        put(p + "attn_norm.weight", vector(C, 1.0))
        put(p + "attn_norm.bias", vector(C, 0.0))
        put(p + "attn_qkv.weight", matrix(3 * C, C))
        put(p + "attn_qkv.bias", vector(3 * C, 0.0))
        put(p + "attn_output.weight", matrix(C, C))
        put(p + "attn_output.bias", vector(C, 0.0))
        put(p + "ffn_norm.weight", vector(C, 1.0))
        put(p + "ffn_norm.bias", vector(C, 0.0))
        put(p + "ffn_up.weight", matrix(F, C))
        put(p + "ffn_up.bias", vector(F, 0.0))
        put(p + "ffn_down.weight", matrix(C, F))
        put(p + "ffn_down.bias", vector(C, 0.0))
    put("output_norm.weight", vector(C, 1.0))
    put("output_norm.bias", vector(C, 0.0))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, args.out)
    print(f"write_gguf: {args.out} ({os.path.getsize(args.out) / 1e6:.1f} MB, {args.type})")


if __name__ == "__main__":
    main()
