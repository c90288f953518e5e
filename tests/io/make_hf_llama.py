#!/usr/bin/python3
"""Writes small Hugging Face-style Llama-family directories for the import-hf tests (--all ROOT):
config.json and model.safetensors (or an index and 2 shards) with random weights, and
expected/ref_{prompt,logits,tokens}.bin from an independent float64 numpy Llama that reads the
safetensors files back (RMSNorm, rotate-half RoPE with llama3 scaling, GQA, SwiGLU, q/k/v
biases, tied or untied head, and the sparse mixture-of-experts blocks of MixtralForCausalLM and
Qwen2MoeForCausalLM written out as Hugging Face computes them). Also refuse-* directories (config.json only) for what import-hf
must refuse with exit 2. The safetensors writer is tests/io/make_hf_dir.py's."""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_hf_dir import to_dtype, write_safetensors  # noqa: E402

REF_PROMPT = [1, 5, 17, 100, 200, 3, 42, 7, 250]
REF_NEW = 6

# name -> (architecture, dtype, shards, config overrides). Head dim 8 with rope_theta 10000
# and original_max_position_embeddings 64 puts one frequency in each llama3 band (kept,
# smoothed, divided by factor).
BASE = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300,
        "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "hidden_act": "silu", "tie_word_embeddings": False}
VARIANTS = {
    "llama-f32-sharded": ("LlamaForCausalLM", "F32", 2, {
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        "attention_bias": False, "head_dim": 8}),
    "mistral-bf16-tied": ("MistralForCausalLM", "BF16", 1, {
        "num_key_value_heads": 1, "tie_word_embeddings": True, "rope_theta": 500000.0,
        "sliding_window": None, "num_hidden_layers": 3}),
    "qwen2-bias": ("Qwen2ForCausalLM", "F16", 1, {
        "use_sliding_window": False, "sliding_window": 32, "max_window_layers": 2,
        "rope_scaling": None, "rope_theta": 1000000.0}),
    # Mistral-Nemo's shape: head_dim 16 apart from hidden / heads = 8, so attention is 64 wide
    # over a residual stream of 32 and o_proj is (32, 64)
    "nemo-head-dim": ("MistralForCausalLM", "F32", 1, {
        "head_dim": 16, "sliding_window": None}),
    # Mixture of experts: 5 experts, 2 per token, renormalised (Mixtral), and 6 experts, 3 per
    # token weighted by the softmax over all six (norm_topk_prob false) plus a shared expert
    # behind its sigmoid gate and q/k/v biases (Qwen2-MoE)
    "mixtral-f32-sharded": ("MixtralForCausalLM", "F32", 2, {
        "num_local_experts": 5, "num_experts_per_tok": 2, "intermediate_size": 24,
        "sliding_window": None}),
    "qwen2-moe-bf16": ("Qwen2MoeForCausalLM", "BF16", 1, {
        "num_experts": 6, "num_experts_per_tok": 3, "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 40, "norm_topk_prob": False,
        "decoder_sparse_step": 1, "mlp_only_layers": [], "use_sliding_window": False}),
    "qwen2-moe-norm": ("Qwen2MoeForCausalLM", "F32", 1, {
        "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 24, "norm_topk_prob": True}),
}
QWEN2_MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
             "shared_expert_intermediate_size": 24}
# name -> (architecture, config overrides): import-hf must exit 2 naming the key and value.
REFUSE = {
    "refuse-gelu": ("LlamaForCausalLM", {"hidden_act": "gelu"}),
    "refuse-sliding": ("MistralForCausalLM", {"sliding_window": 64}),
    "refuse-qwen2-sliding": ("Qwen2ForCausalLM", {"use_sliding_window": True,
                                                  "sliding_window": 64}),
    "refuse-yarn": ("LlamaForCausalLM", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}),
    "refuse-moe": ("MistralForCausalLM", {"num_local_experts": 8, "num_experts_per_tok": 2}),
    "refuse-head-dim": ("LlamaForCausalLM", {"head_dim": 7}),
    "refuse-llama-bias": ("LlamaForCausalLM", {"attention_bias": True}),
    "refuse-qwen2-moe-sparse-step": ("Qwen2MoeForCausalLM",
                                     dict(QWEN2_MOE, decoder_sparse_step=2)),
    "refuse-qwen2-moe-mlp-only": ("Qwen2MoeForCausalLM", dict(QWEN2_MOE, mlp_only_layers=[1])),
    "refuse-mixtral-top-k": ("MixtralForCausalLM", {"num_local_experts": 4,
                                                    "num_experts_per_tok": 5}),
}
MOE_ARCHS = ("MixtralForCausalLM", "Qwen2MoeForCausalLM")


def moe_layout(cfg):
    """(block prefix, experts, top k, renormalised, gate/up/down names) of a MoE config."""
    if cfg["architectures"][0] == "MixtralForCausalLM":
        return ("block_sparse_moe.", cfg["num_local_experts"], cfg["num_experts_per_tok"], True,
                ("w1", "w3", "w2"))
    return ("mlp.", cfg["num_experts"], cfg["num_experts_per_tok"],
            cfg.get("norm_topk_prob", False), ("gate_proj", "up_proj", "down_proj"))


def swiglu(h, g, u, d):
    a, b = h @ g.T, h @ u.T
    return (a / (1 + np.exp(-a)) * b) @ d.T


def moe_mlp(w, cfg, p, h):
    """Hugging Face's sparse MoE block: softmax over the router logits, the top k (the lower
    expert on a tie), renormalised for Mixtral or when norm_topk_prob; Qwen2-MoE adds its shared
    expert times sigmoid(shared_expert_gate)."""
    blk, E, K, renorm, (g, u, d) = moe_layout(cfg)
    logits = h @ w[p + blk + "gate.weight"].T
    prob = np.exp(logits - logits.max(-1, keepdims=True))
    prob /= prob.sum(-1, keepdims=True)
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        chosen = sorted(range(E), key=lambda e: (-prob[t, e], e))[:K]
        wts = prob[t, chosen] / (prob[t, chosen].sum() if renorm else 1.0)
        for e, wt in zip(chosen, wts):
            x = f"{p}{blk}experts.{e}."
            out[t] += wt * swiglu(h[t], w[x + g + ".weight"], w[x + u + ".weight"],
                                  w[x + d + ".weight"])
    if cfg.get("shared_expert_intermediate_size"):
        s = p + "mlp.shared_expert."
        gate = 1 / (1 + np.exp(-(h @ w[p + "mlp.shared_expert_gate.weight"].T)))
        out += gate * swiglu(h, w[s + "gate_proj.weight"], w[s + "up_proj.weight"],
                             w[s + "down_proj.weight"])
    return out


def head_dim(cfg):
    """Hugging Face's head_dim, which may differ from hidden_size / num_attention_heads."""
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def rope_inv_freq(cfg, D):
    inv = 1.0 / cfg["rope_theta"] ** (np.arange(0, D, 2, dtype=np.float64) / D)
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv
    f, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    orig = rs["original_max_position_embeddings"]
    wavelen = 2 * np.pi / inv
    out = np.where(wavelen > orig / lo, inv / f, inv)
    smooth = (orig / wavelen - lo) / (hi - lo)
    medium = ~(wavelen < orig / hi) & ~(wavelen > orig / lo)
    return np.where(medium, (1 - smooth) * out / f + smooth * out, out)


def llama_forward(w, cfg, tokens, bias):
    """Logits (T, V) of every position, float64, from the Hugging Face tensors w."""
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV, D, eps = cfg["num_key_value_heads"], head_dim(cfg), cfg["rms_norm_eps"]
    T = len(tokens)

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    ang = np.arange(T)[:, None] * rope_inv_freq(cfg, D)[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], 1)), np.sin(np.concatenate([ang, ang], 1))

    def rope(x):  # (T, n, D), rotate half
        half = np.concatenate([-x[..., D // 2:], x[..., :D // 2]], -1)
        return x * cos[:, None, :] + half * sin[:, None, :]

    mask = np.triu(np.full((T, T), -np.inf), 1)
    x = w["model.embed_tokens.weight"][tokens]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, w[p + "input_layernorm.weight"])
        proj = {}
        for n in "qkv":
            proj[n] = h @ w[p + f"self_attn.{n}_proj.weight"].T
            if bias:
                proj[n] = proj[n] + w[p + f"self_attn.{n}_proj.bias"]
        q = rope(proj["q"].reshape(T, H, D))
        k = rope(proj["k"].reshape(T, KV, D))
        v = proj["v"].reshape(T, KV, D)
        y = np.zeros((T, H, D))
        for hh in range(H):
            kv = hh // (H // KV)
            att = q[:, hh] @ k[:, kv].T / np.sqrt(D) + mask
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            y[:, hh] = att @ v[:, kv]
        x = x + y.reshape(T, H * D) @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        if cfg["architectures"][0] in MOE_ARCHS:
            x = x + moe_mlp(w, cfg, p, h)
            continue
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rms(x, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T


def read_safetensors(path):
    """The tensors of one file as float64, BF16/F16 upcast exactly: the reference reads what
    the importer reads, not the values the writer started from."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = data[b:e]
        if t["dtype"] == "F32":
            a = np.frombuffer(raw, "<f4")
        elif t["dtype"] == "F16":
            a = np.frombuffer(raw, "<f2").astype(np.float32)
        else:
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        out[name] = a.astype(np.float64).reshape(t["shape"])
    return out


def write_config(out, arch, over):
    cfg = dict(BASE, architectures=[arch], model_type=arch[:-len("ForCausalLM")].lower())
    cfg.update(over)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return cfg


def add_moe(add, cfg, p, C, gain):
    """One layer's router, experts and (Qwen2-MoE) shared expert. The router's logits spread
    by about 2, so no routing is a near tie that float32 could decide otherwise."""
    blk, E, _, _, (g, u, d) = moe_layout(cfg)
    M = cfg.get("moe_intermediate_size", cfg["intermediate_size"])
    add(p + blk + "gate.weight", (E, C), scale=2 * C ** -0.5)
    for e in range(E):
        x = f"{p}{blk}experts.{e}."
        add(x + g + ".weight", (M, C), scale=C ** -0.5)
        add(x + u + ".weight", (M, C), scale=C ** -0.5)
        add(x + d + ".weight", (C, M), scale=gain * M ** -0.5)
    S = cfg.get("shared_expert_intermediate_size", 0)
    if S:
        add(p + "mlp.shared_expert_gate.weight", (1, C), scale=C ** -0.5)
        add(p + "mlp.shared_expert.gate_proj.weight", (S, C), scale=C ** -0.5)
        add(p + "mlp.shared_expert.up_proj.weight", (S, C), scale=C ** -0.5)
        add(p + "mlp.shared_expert.down_proj.weight", (C, S), scale=gain * S ** -0.5)


def make(out, arch, dtype, shards, over, seed, drop=None, reference=True):
    cfg = write_config(out, arch, over)
    rng = np.random.default_rng(seed)
    C, M, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    D = head_dim(cfg)
    Q, KVD = cfg["num_attention_heads"] * D, cfg["num_key_value_heads"] * D
    bias = arch in ("Qwen2ForCausalLM", "Qwen2MoeForCausalLM")
    # a tied head scores the residual against the embeddings, which the token's own embedding
    # dominates (greedy repeats the last token): a smaller embedding and stronger branches
    # make the generated tokens depend on attention and the MLP
    tied = cfg["tie_word_embeddings"]
    emb, gain = (0.25, 3.0) if tied else (1.0, 1.0)
    tensors = []

    def add(name, shape, scale=0.3, offset=0.0):
        vals = offset + scale * rng.standard_normal(shape)
        tensors.append((name, dtype, shape, to_dtype(vals, dtype)[0]))

    add("model.embed_tokens.weight", (V, C), scale=emb)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        add(p + "input_layernorm.weight", (C,), scale=0.1, offset=1.0)
        for n, rows in (("q", Q), ("k", KVD), ("v", KVD)):
            add(p + f"self_attn.{n}_proj.weight", (rows, C), scale=C ** -0.5)
            if bias:
                add(p + f"self_attn.{n}_proj.bias", (rows,), scale=0.3)
        add(p + "self_attn.o_proj.weight", (C, Q), scale=gain * Q ** -0.5)
        add(p + "post_attention_layernorm.weight", (C,), scale=0.1, offset=1.0)
        if arch in MOE_ARCHS:
            add_moe(add, cfg, p, C, gain)
            continue
        add(p + "mlp.gate_proj.weight", (M, C), scale=C ** -0.5)
        add(p + "mlp.up_proj.weight", (M, C), scale=C ** -0.5)
        add(p + "mlp.down_proj.weight", (C, M), scale=gain * M ** -0.5)
    add("model.norm.weight", (C,), scale=0.1, offset=1.0)
    if not cfg["tie_word_embeddings"]:
        add("lm_head.weight", (V, C), scale=C ** -0.5 * 3)
    if drop:
        tensors = [t for t in tensors if t[0] != drop]
    rng.shuffle(tensors)  # HF files are in no particular order; the importer must not care
    files = []
    if shards == 1:
        files.append("model.safetensors")
        write_safetensors(os.path.join(out, files[0]), tensors)
    else:
        per = (len(tensors) + shards - 1) // shards
        weight_map = {}
        for s in range(shards):
            fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = tensors[s * per:(s + 1) * per]
            write_safetensors(os.path.join(out, fname), part)
            weight_map.update({t[0]: fname for t in part})
            files.append(fname)
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=1)

    if drop or not reference:
        return  # a broken directory (or the memory test's) has no reference outputs
    w = {}
    for fname in files:
        w.update(read_safetensors(os.path.join(out, fname)))
    prompt = [t % V for t in REF_PROMPT]
    logits = llama_forward(w, cfg, prompt, bias)
    tokens = list(prompt)
    for _ in range(REF_NEW):
        tokens.append(int(np.argmax(llama_forward(w, cfg, tokens, bias)[-1])))
    ex = os.path.join(out, "expected")
    os.makedirs(ex, exist_ok=True)
    np.array(prompt, "<i4").tofile(os.path.join(ex, "ref_prompt.bin"))
    logits.astype("<f4").tofile(os.path.join(ex, "ref_logits.bin"))
    np.array(tokens, "<i4").tofile(os.path.join(ex, "ref_tokens.bin"))


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "--all":
        sys.exit("usage: make_hf_llama.py --all ROOT")
    root = sys.argv[2]
    for seed, (name, (arch, dtype, shards, over)) in enumerate(VARIANTS.items()):
        make(os.path.join(root, name), arch, dtype, shards, over, seed + 11)
    for name, (arch, over) in REFUSE.items():
        write_config(os.path.join(root, name), arch, over)
    make(os.path.join(root, "refuse-missing-k"), "Qwen2ForCausalLM", "F32", 1, {}, 5,
         drop="model.layers.1.self_attn.k_proj.bias")


if __name__ == "__main__":
    main()
