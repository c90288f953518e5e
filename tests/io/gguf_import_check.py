#!/usr/bin/python3
"""import-gguf against import-hf: the same small random Llama-family models written both as a
Hugging Face directory (tests/io/make_hf_llama.py) and as a GGUF file (gguf-py's GGUFWriter, in
a venv made as tests/io/gguf_check.py makes it; exit 77, skipped, only when the `gguf` package
cannot be downloaded), with the Q and K rows permuted as llama.cpp's convert_hf_to_gguf.py
permutes them for `llama`. Both are imported; the checkpoints must hold identical tensors and
config attributes, and `tripar run` must give identical tokens. Cases: GQA (untied), tied
embeddings, qwen2 (q/k/v biases, no permutation), a Q8_0 file (the checkpoint equals gguf-py's
dequantized values, un-permuted), a Q4_K file with one Q6_K matrix, as a Q4_K_M file mixes them
(random blocks on a Llama of 256-column rows: --precision keep stores q4_k, its blocks as they
are, the Q6_K one requantised; --precision q4_k the same datasets), and refusals (exit 2,
named): an unknown architecture, a tensor whose dims disagree with the metadata, a missing
tensor.

Usage: gguf_import_check.py TRIPAR WORKDIR   (MPIEXEC in the environment runs `tripar run`)"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CASES = {  # name -> (HF architecture, config overrides)
    "llama-gqa": ("LlamaForCausalLM", {"num_key_value_heads": 2}),
    "llama-tied": ("LlamaForCausalLM", {"num_key_value_heads": 4, "tie_word_embeddings": True}),
    "qwen2": ("Qwen2ForCausalLM", {"use_sliding_window": False, "rope_theta": 1000000.0}),
    # Llama 3.1's rope scaling, which llama.cpp stores as the rope_freqs tensor; head dim 8
    # and original_max_position_embeddings 64 put one frequency in each band
    "llama31": ("LlamaForCausalLM", {"rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64}}),
    # GPT-2 (tests/io/make_hf_dir.py's writer): Conv1D weights, biases, learned positions
    "gpt2": ("GPT2LMHeadModel", {}),
}
PROMPT = [1, 5, 17, 100, 200, 3, 42]


def permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute (the reordering import-gguf undoes)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def gguf_write(path, arch, cfg, w, qtype=None, drop=None, meta_over=None, rope_freqs=None,
               raw=None):
    """Writes the HF tensors w (float32) of config cfg as llama.cpp names and lays them out
    (a name already llama.cpp's, blk.N...., is written as it is: tests/io/gguf_moe_check.py's
    expert stacks); qtype quantizes the matrices (and stacks) whose rows are whole blocks;
    raw(name, shape) gives a tensor's blocks and their type, or None; meta_over's values are
    uint32, or bool and float32 where they are. Runs inside the venv."""
    import numpy as np
    import gguf
    from gguf.constants import GGML_QUANT_SIZES
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    wr = gguf.GGUFWriter(path, arch)
    meta = {"block_count": cfg["num_hidden_layers"], "context_length":
            cfg["max_position_embeddings"], "embedding_length": cfg["hidden_size"],
            "feed_forward_length": cfg["intermediate_size"], "attention.head_count": H,
            "attention.head_count_kv": KV}
    meta.update(meta_over or {})
    for k, v in meta.items():
        add = (wr.add_bool if isinstance(v, bool) else wr.add_float32 if isinstance(v, float)
               else wr.add_uint32)
        add(f"{arch}.{k}", v)
    wr.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
    wr.add_float32(f"{arch}.rope.freq_base", cfg["rope_theta"])
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight":
             "output_norm.weight", "lm_head.weight": "output.weight"}
    sub = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
           "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
           "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
           "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    dequant = {}
    for hf in sorted(w):
        m = re.match(r"model\.layers\.(\d+)\.(.*)\.(weight|bias)$", hf)
        name = (hf if hf.startswith("blk.") else f"blk.{m[1]}.{sub[m[2]]}.{m[3]}" if m
                else names[hf])
        if name == drop:
            continue
        a = w[hf].astype(np.float32)
        if arch == "llama" and name.endswith("attn_q.weight"):
            a = permute(a, H)
        elif arch == "llama" and name.endswith("attn_k.weight"):
            a = permute(a, KV)
        block = GGML_QUANT_SIZES[qtype][0] if qtype is not None else 0
        blocks = raw(name, a.shape) if raw else None
        if blocks is not None:
            wr.add_tensor(name, blocks[0], raw_dtype=blocks[1])
            dequant[name] = gguf.quants.dequantize(blocks[0], blocks[1]).reshape(a.shape)
        elif qtype is not None and a.ndim >= 2 and a.shape[-1] % block == 0:
            q = gguf.quants.quantize(a, qtype)
            wr.add_tensor(name, q, raw_dtype=qtype)
            dequant[name] = gguf.quants.dequantize(q, qtype).reshape(a.shape)
        else:
            wr.add_tensor(name, a)
            dequant[name] = a
    rs = cfg.get("rope_scaling")
    if rs:  # convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors
        import math
        dim = cfg["hidden_size"] // H
        freqs = 1.0 / (cfg["rope_theta"] ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
        orig, lo, hi = (rs["original_max_position_embeddings"], rs["low_freq_factor"],
                        rs["high_freq_factor"])
        factors = []
        for freq in freqs:
            wavelen = 2 * math.pi / freq
            if wavelen < orig / hi:
                factors.append(1)
            elif wavelen > orig / lo:
                factors.append(rs["factor"])
            else:
                smooth = (orig / wavelen - lo) / (hi - lo)
                factors.append(1 / ((1 - smooth) / rs["factor"] + smooth))
        wr.add_tensor("rope_freqs.weight", np.array(rope_freqs or factors, dtype=np.float32))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return dequant


def gguf_write_gpt2(path, cfg, w):
    """A GPT-2 as llama.cpp's converter writes it: Conv1D weights transposed to (out, in), the
    causal-mask buffers left out. Runs inside the venv."""
    import numpy as np
    import gguf
    wr = gguf.GGUFWriter(path, "gpt2")
    C = cfg["n_embd"]
    for k, v in (("block_count", cfg["n_layer"]), ("context_length", cfg["n_ctx"]),
                 ("embedding_length", C), ("feed_forward_length", 4 * C),
                 ("attention.head_count", cfg["n_head"])):
        wr.add_uint32(f"gpt2.{k}", v)
    wr.add_float32("gpt2.attention.layer_norm_epsilon", cfg["layer_norm_epsilon"])
    sub = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
           "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    top = {"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight",
           "ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias"}
    for hf in sorted(w):
        m = re.match(r"h\.(\d+)\.(.*)\.(weight|bias)$", hf)
        if hf.endswith("attn.bias") and m and m[2] == "attn":
            continue
        a = w[hf].astype(np.float32)
        if m and m[3] == "weight" and m[2] in ("attn.c_attn", "attn.c_proj", "mlp.c_fc",
                                               "mlp.c_proj"):
            a = np.ascontiguousarray(a.T)
        wr.add_tensor(f"blk.{m[1]}.{sub[m[2]]}.{m[3]}" if m else top[hf], a)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def k_blocks(name, shape, rng):
    """Random Q4_K blocks for a matrix of 256-column rows (d small, dmin 7.5 d, so the values
    centre near 0), Q6_K ones for blk.1.ffn_down (the mix of a Q4_K_M file); None else."""
    import numpy as np
    import gguf
    T = gguf.GGMLQuantizationType
    if len(shape) != 2 or shape[1] % 256 or name == "token_embd.weight":
        return None
    nb = shape[0] * shape[1] // 256
    six = name == "blk.1.ffn_down.weight"
    size = 210 if six else 144
    b = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
    d = rng.uniform(1e-4, 3e-4, nb).astype(np.float32)
    if six:
        b[:, 208:210] = (d / 20).astype(np.float16).view(np.uint8).reshape(nb, 2)
    else:
        b[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(nb, 2)
        b[:, 2:4] = (7.5 * d).astype(np.float16).view(np.uint8).reshape(nb, 2)
    return b.reshape(shape[0], shape[1] // 256 * size), T.Q6_K if six else T.Q4_K


def inner(work):
    """In the venv: write the GGUF files from the HF tensors saved in work/<case>/hf.npz."""
    import numpy as np
    import gguf
    import json
    for case, (hf_arch, _) in CASES.items():
        d = os.path.join(work, case)
        cfg = json.load(open(os.path.join(d, "hf", "config.json")))
        w = dict(np.load(os.path.join(d, "hf.npz")))
        arch = "qwen2" if hf_arch.startswith("Qwen2") else "llama"
        if hf_arch != "GPT2LMHeadModel":
            gguf_write(os.path.join(d, "model.gguf"), arch, cfg, w)
        if case == "llama-gqa":
            deq = gguf_write(os.path.join(d, "q8_0.gguf"), arch, cfg, w,
                             qtype=gguf.GGMLQuantizationType.Q8_0)
            np.savez(os.path.join(d, "q8_0_dequant.npz"), **deq)
            gguf_write(os.path.join(d, "bad-arch.gguf"), "falcon", cfg, w)
            gguf_write(os.path.join(d, "bad-shape.gguf"), arch, cfg, w,
                       meta_over={"feed_forward_length": cfg["intermediate_size"] + 16})
            gguf_write(os.path.join(d, "missing.gguf"), arch, cfg, w,
                       drop="blk.1.attn_k.weight")
        if case == "gpt2":
            gguf_write_gpt2(os.path.join(d, "model.gguf"), cfg, w)
        if case == "llama31":  # factors no llama3 parameters give
            gguf_write(os.path.join(d, "bad-rope.gguf"), arch, cfg, w,
                       rope_freqs=[1.0, 3.0, 2.0, 8.0])
            gguf_write(os.path.join(d, "bad-rope-low.gguf"), arch, cfg, w,
                       rope_freqs=[1.0, 0.5, 1.0, 1.0])
    d = os.path.join(work, "llama-k")
    cfg = json.load(open(os.path.join(d, "hf", "config.json")))
    rng = np.random.default_rng(61)
    deq = gguf_write(os.path.join(d, "q4_k.gguf"), "llama", cfg,
                     dict(np.load(os.path.join(d, "hf.npz"))),
                     meta_over={"attention.key_length": cfg["head_dim"],
                                "attention.value_length": cfg["head_dim"]},
                     raw=lambda name, shape: k_blocks(name, shape, rng))
    np.savez(os.path.join(d, "q4_k_dequant.npz"), **deq)


def tripar(args, want_rc=0, pattern=None, env=None):
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    out = r.stdout + r.stderr
    if r.returncode != want_rc or (pattern and not re.search(pattern, out)):
        sys.exit(f"FAIL: {' '.join(args)}: exit {r.returncode} (want {want_rc}"
                 f"{', matching ' + repr(pattern) if pattern else ''}):\n{out}")
    return out


def run_tokens(tripar_bin, ckpt, work, tag, sets=(), logits=False, ranks=1):
    job = os.path.join(work, f"{tag}.yaml")
    with open(job, "w") as f:
        f.write(f"model: {{checkpoint: {ckpt}}}\nbackend: {{kind: cpu, threads: 1}}\n"
                f"input: {{tokens: [[{', '.join(map(str, PROMPT))}]]}}\n"
                "generate: {new_tokens: 6}\nrecord: {activations: [logits]}\n")
    out = os.path.join(work, f"{tag}-run.h5")
    cmd = [tripar_bin, "run", job, "--out", out] + [a for s in sets for a in ("--set", s)]
    if os.environ.get("MPIEXEC"):
        cmd = [os.environ["MPIEXEC"], "-n", str(ranks), "--oversubscribe"] + cmd
    # Open MPI's own allocations are not freed at exit; LeakSanitizer checks the imports only
    tripar(cmd, env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
    import h5py
    with h5py.File(out, "r") as f:
        tokens = f["output/tokens"][0].tolist()
        return (tokens, f["activations/logits"][()]) if logits else tokens


def checkpoint_read(path):
    import h5py
    import numpy as np
    with h5py.File(path, "r") as f:
        attrs = {k: np.asarray(v).tolist() for k, v in f.attrs.items()}
        weights = {k: f["weights"][k][()] for k in f["weights"]}
    return attrs, weights


def outer(tripar_bin, work):
    import numpy as np
    from gguf_check import venv_make
    from make_hf_llama import make, read_safetensors
    import make_hf_dir
    os.makedirs(work, exist_ok=True)
    for seed, (case, (arch, over)) in enumerate(CASES.items()):
        d = os.path.join(work, case)
        if arch == "GPT2LMHeadModel":
            make_hf_dir.main([os.path.join(d, "hf"), "--layers", "2", "--heads", "2", "--embd",
                              "32", "--ctx", "32", "--no-tokenizer", "--seed", str(40 + seed)])
        else:
            make(os.path.join(d, "hf"), arch, "F32", 1, over, 40 + seed, reference=False)
        w = read_safetensors(os.path.join(d, "hf", "model.safetensors"))
        np.savez(os.path.join(d, "hf.npz"), **{k: v.astype(np.float32) for k, v in w.items()})
    # the Q4_K case's shape: 4 heads of 128 and an MLP of 512 over embd 256
    d = os.path.join(work, "llama-k")
    make(os.path.join(d, "hf"), "LlamaForCausalLM", "F32", 1,
         {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4, "head_dim": 128,
          "num_key_value_heads": 2}, 60, reference=False)
    w = read_safetensors(os.path.join(d, "hf", "model.safetensors"))
    np.savez(os.path.join(d, "hf.npz"), **{k: v.astype(np.float32) for k, v in w.items()})
    py = venv_make(work)
    r = subprocess.run([py, os.path.abspath(__file__), "--inner", work])
    if r.returncode != 0:
        sys.exit("FAIL: writing the GGUF files")
    for case in CASES:
        d = os.path.join(work, case)
        tripar([tripar_bin, "import-hf", os.path.join(d, "hf"), "--out", d + "/hf.h5"])
        print(tripar([tripar_bin, "import-gguf", d + "/model.gguf", "--out", d + "/gguf.h5"]))
        (ha, hw), (ga, gw) = checkpoint_read(d + "/hf.h5"), checkpoint_read(d + "/gguf.h5")
        assert ha == ga, f"{case}: config attributes differ:\n{ha}\n{ga}"
        assert sorted(hw) == sorted(gw), f"{case}: datasets differ: {sorted(hw)} {sorted(gw)}"
        for k in hw:
            assert hw[k].shape == gw[k].shape and (hw[k] == gw[k]).all(), f"{case}: {k} differs"
        th = run_tokens(tripar_bin, d + "/hf.h5", d, "hf")
        tg = run_tokens(tripar_bin, d + "/gguf.h5", d, "gguf")
        assert th == tg, f"{case}: tokens differ: import-hf {th}, import-gguf {tg}"
        print(f"{case}: {len(hw)} datasets identical; tokens {tg}")
    # Q8_0: the checkpoint holds gguf-py's dequantized values, with q and k un-permuted
    d = os.path.join(work, "llama-gqa")
    tripar([tripar_bin, "import-gguf", d + "/q8_0.gguf", "--out", d + "/q8_0.h5"],
           pattern=r"\(\d+ quantized\)")
    deq = dict(np.load(d + "/q8_0_dequant.npz"))
    _, qw = checkpoint_read(d + "/q8_0.h5")
    H, KV = 4, 2
    hd = 32 // H
    def unpermute(a, n):
        return a.reshape(n, hd // 2, 2, -1).swapaxes(1, 2).reshape(a.shape)
    q = unpermute(deq["blk.0.attn_q.weight"], H)
    k = unpermute(deq["blk.0.attn_k.weight"], KV)
    v = deq["blk.0.attn_v.weight"]
    want = np.concatenate([q, k, v], 0)
    assert (qw["qkv_w"][0] == want).all(), "Q8_0: qkv_w differs from gguf-py's dequantized"
    gu = np.concatenate([deq["blk.1.ffn_gate.weight"], deq["blk.1.ffn_up.weight"]], 0)
    assert (qw["gate_up_w"][1] == gu).all(), "Q8_0: gate_up_w differs from gguf-py's"
    assert (qw["wte"] == deq["token_embd.weight"]).all(), "Q8_0: wte differs"
    assert (qw["head_w"] == deq["output.weight"]).all(), "Q8_0: head_w differs"
    print("q8_0: the checkpoint equals gguf-py's dequantized tensors")
    # --precision: the Q8_0 file stored in bf16 and int8w runs as its fp32 import does in that
    # model.precision, tokens and logits bit for bit (docs/checkpoint.md, "Stored precision")
    for prec in ("bf16", "int8w"):
        ck = d + f"/q8_0-{prec}.h5"
        tripar([tripar_bin, "import-gguf", d + "/q8_0.gguf", "--out", ck, "--precision", prec],
               pattern=f"stored {prec}")
        want = run_tokens(tripar_bin, d + "/q8_0.h5", d, "q8-fp32", [f"model.precision={prec}"],
                          logits=True)
        got = run_tokens(tripar_bin, ck, d, f"q8-{prec}", logits=True)
        assert want[0] == got[0] and (want[1] == got[1]).all(), f"--precision {prec} differs"
        print(f"q8_0 --precision {prec}: tokens {got[0]} and logits as the fp32 import's")
    # Q4_K with one Q6_K matrix: keep stores q4_k, every Q4_K matrix's blocks as they are (its
    # planes give gguf-py's dequantized values), the Q6_K one requantised; --precision q4_k
    # stores the same datasets; the model runs from the file's own precision
    dk = os.path.join(work, "llama-k")
    text = tripar([tripar_bin, "import-gguf", dk + "/q4_k.gguf", "--out", dk + "/keep.h5",
                   "--precision", "keep"],
                  pattern=r"q4_k: \d+ matrices kept as stored \(no fp32 copy\), 1 requantised "
                          r"from Q6_K \(--precision keep\)")
    print(text)
    tripar([tripar_bin, "import-gguf", dk + "/q4_k.gguf", "--out", dk + "/named.h5", "--precision",
            "q4_k"])
    ka, kw = checkpoint_read(dk + "/keep.h5")
    _, nw = checkpoint_read(dk + "/named.h5")
    assert ka["precision"] in ("q4_k", b"q4_k"), ka["precision"]
    assert sorted(kw) == sorted(nw) and all((kw[k] == nw[k]).all() for k in kw), \
        "--precision q4_k and keep store different datasets"
    deq = dict(np.load(dk + "/q4_k_dequant.npz"))
    for name, key, layer in (("blk.0.ffn_down.weight", "down_w", 0),
                             ("output.weight", "head_w", None)):
        q, s, m = (kw[key + sfx] if layer is None else kw[key + sfx][layer]
                   for sfx in ("", "_scale", "_min"))
        assert q.min() >= 0 and q.max() <= 15, key
        vals = q * np.repeat(s, 32, axis=-1) + np.repeat(m, 32, axis=-1)
        want = deq[name]
        err = np.abs(vals - want).max() / np.abs(want).max()
        assert err < 1e-6, f"q4_k keep: {key} is {err:.2e} from gguf-py's dequantized {name}"
    toks = run_tokens(tripar_bin, dk + "/keep.h5", dk, "keep")
    print(f"q4_k keep: blocks as gguf-py reads them; tokens {toks}")
    # refusals, exit 2, naming the key or tensor and the value
    for name, pattern in (
            ("bad-arch", r"general\.architecture' = \"falcon\" is not supported"),
            ("bad-shape", r"tensor 'blk\.0\.ffn_gate\.weight' has dims \[32, 48\], but the "
                          r"llama\.\* metadata implies \[32, 64\]"),
            ("missing", r"tensor 'blk\.1\.attn_k\.weight' is missing")):
        out = d + f"/never-{name}.h5"
        tripar([tripar_bin, "import-gguf", d + f"/{name}.gguf", "--out", out], 2, pattern)
        assert not os.path.exists(out), f"{name}: a refused import left {out}"
        print(f"{name}: refused as it should be")
    for bad in ("bad-rope", "bad-rope-low"):
        tripar([tripar_bin, "import-gguf", os.path.join(work, "llama31", bad + ".gguf"), "--out",
                d + "/never-rope.h5"], 2, r"tensor 'rope_freqs\.weight' holds factors that are not")
        print(f"{bad}: refused as it should be")
    # a truncated file: its last tensors run past the end (checked at open, before writing)
    with open(d + "/model.gguf", "rb") as f:
        data = f.read()
    with open(d + "/truncated.gguf", "wb") as f:
        f.write(data[:len(data) - 1000])
    tripar([tripar_bin, "import-gguf", d + "/truncated.gguf", "--out", d + "/never-trunc.h5"], 2,
           r"tensor '[^']+': offset \d+ \+ \d+ bytes runs past the end")
    assert not os.path.exists(d + "/never-trunc.h5")
    print("truncated: refused as it should be")
    # an output may not replace its input
    tripar([tripar_bin, "import-gguf", d + "/model.gguf", "--out", d + "/model.gguf"], 2,
           "same file as the input")
    print("gguf_import_check: all passed")


def script_main(inner_fn, outer_fn, name):
    """`NAME TRIPAR WORKDIR` runs outer_fn; `NAME --inner WORKDIR`, in the venv, inner_fn."""
    if len(sys.argv) == 3 and sys.argv[1] == "--inner":
        inner_fn(sys.argv[2])
    elif len(sys.argv) == 3:
        outer_fn(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
    else:
        sys.exit(f"usage: {name} TRIPAR WORKDIR")


if __name__ == "__main__":
    script_main(inner, outer, "gguf_import_check.py")
