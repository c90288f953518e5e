#!/usr/bin/python3
"""import-gguf of mixtures of experts against import-hf: small random Mixtral and Qwen2-MoE
models written both as Hugging Face directories (tests/io/make_hf_llama.py) and as GGUF files
laid out as llama.cpp's convert_hf_to_gguf.py lays them out (gguf-py's GGUFWriter, in the venv
tests/io/gguf_check.py makes; exit 77, skipped, only when the `gguf` package cannot be
downloaded): Mixtral as arch llama with llama.expert_count / expert_used_count, its Q/K rows
permuted, the router as ffn_gate_inp and each layer's experts stacked into the 3-D
ffn_gate_exps / ffn_up_exps / ffn_down_exps; Qwen2-MoE as arch qwen2moe with its
expert_feed_forward_length / expert_shared_feed_forward_length (or without them, where
llama.cpp's loader falls back on feed_forward_length), ffn_*_shexp and ffn_gate_inp_shexp.
Both imports must hold identical datasets and config attributes, and `tripar run` must give
identical tokens, on 1 rank and at tp=2 x ep=2. Also: the per-expert tensors of files converted
before llama.cpp stacked them (blk.N.ffn_gate.E) import the same; norm_topk_prob is false for
qwen2moe unless qwen2moe.expert_weights_norm says true (llama.cpp's qwen2moe graph never
renormalises); a Q8_0 file imports as gguf-py dequantizes it, and with --precision keep its
expert blocks are kept as stored and run as the fp32 import does in model.precision q8_0; and
refusals (exit 2, named): expert_used_count above expert_count, an expert stack with the
wrong dims, a missing shared expert, a sigmoid router, experts in a qwen2, deepseek2, and a
block format (q8_0) for a shared expert 40 wide (fp32 imports it).

Usage: gguf_moe_check.py TRIPAR WORKDIR   (MPIEXEC in the environment runs `tripar run`)"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_import_check as gic  # noqa: E402  (gguf_write, tripar, run_tokens, checkpoint_read)

MIXTRAL = {"num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 32,
           "sliding_window": None}
CASES = {  # name -> (HF architecture, config overrides)
    "mixtral": ("MixtralForCausalLM", MIXTRAL),
    "qwen2-moe": ("Qwen2MoeForCausalLM", {
        "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 64, "norm_topk_prob": False,
        "use_sliding_window": False}),
    # no expert widths in the GGUF: llama.cpp's 96 / 3 per expert and 96 for the shared one
    "qwen2-moe-norm": ("Qwen2MoeForCausalLM", {
        "num_experts": 6, "num_experts_per_tok": 3, "intermediate_size": 96,
        "moe_intermediate_size": 32, "shared_expert_intermediate_size": 96,
        "norm_topk_prob": True, "use_sliding_window": False}),
}


def moe_tensors(w, cfg, split=False, shexp_1d=False):
    """The HF tensors w with the experts as convert_hf_to_gguf.py writes them: llama.cpp's
    names, each layer's experts stacked (E, rows, cols), ggml dims [cols, rows, E]; split: an
    older file's per-expert blk.N.ffn_gate.E; shexp_1d: the shared gate as [C] not [C, 1]."""
    import numpy as np
    mixtral = cfg["architectures"][0] == "MixtralForCausalLM"
    kinds = ({"w1": "gate", "w3": "up", "w2": "down"} if mixtral else
             {"gate_proj": "gate", "up_proj": "up", "down_proj": "down"})
    out, stacks = {}, {}
    for hf, a in w.items():
        m = re.match(r"model\.layers\.(\d+)\.(?:block_sparse_moe|mlp)\.(.+)\.weight$", hf)
        if not m:
            out[hf] = a
            continue
        layer, rest = m[1], m[2]
        if rest == "gate":
            out[f"blk.{layer}.ffn_gate_inp.weight"] = a
        elif rest == "shared_expert_gate":
            out[f"blk.{layer}.ffn_gate_inp_shexp.weight"] = a.reshape(-1) if shexp_1d else a
        elif rest.startswith("shared_expert."):
            out[f"blk.{layer}.ffn_{kinds[rest.split('.')[1]]}_shexp.weight"] = a
        else:  # experts.E.<kind>
            _, e, kind = rest.split(".")
            if split:
                out[f"blk.{layer}.ffn_{kinds[kind]}.{e}.weight"] = a
            else:
                stacks.setdefault(f"blk.{layer}.ffn_{kinds[kind]}_exps.weight", {})[int(e)] = a
    for name, per in stacks.items():
        out[name] = np.stack([per[e] for e in sorted(per)])
    return out


def meta(cfg, arch):
    """The expert keys convert_hf_to_gguf.py writes (qwen2-moe-norm: only the counts, and
    expert_weights_norm, which llama.cpp's converter does not write for qwen2moe)."""
    if arch == "llama":
        return {"expert_count": cfg["num_local_experts"],
                "expert_used_count": cfg["num_experts_per_tok"]}
    m = {"expert_count": cfg["num_experts"], "expert_used_count": cfg["num_experts_per_tok"]}
    if cfg["norm_topk_prob"]:
        m["expert_weights_norm"] = True
    else:
        m["expert_feed_forward_length"] = cfg["moe_intermediate_size"]
        m["expert_shared_feed_forward_length"] = cfg["shared_expert_intermediate_size"]
    return m


def inner(work):
    """In the venv: the GGUF files, from the HF tensors saved in work/<case>/hf.npz."""
    import json
    import numpy as np
    import gguf
    for case, (hf_arch, _) in CASES.items():
        d = os.path.join(work, case)
        cfg = json.load(open(os.path.join(d, "hf", "config.json")))
        w = dict(np.load(os.path.join(d, "hf.npz")))
        arch = "llama" if hf_arch == "MixtralForCausalLM" else "qwen2moe"
        norm = case == "qwen2-moe-norm"
        gic.gguf_write(os.path.join(d, "model.gguf"), arch, cfg, moe_tensors(w, cfg, shexp_1d=norm),
                       meta_over=meta(cfg, arch))
        if case == "mixtral":
            gic.gguf_write(os.path.join(d, "split.gguf"), arch, cfg, moe_tensors(w, cfg, True),
                           meta_over=meta(cfg, arch))
            deq = gic.gguf_write(os.path.join(d, "q8_0.gguf"), arch, cfg, moe_tensors(w, cfg),
                                 qtype=gguf.GGMLQuantizationType.Q8_0, meta_over=meta(cfg, arch))
            np.savez(os.path.join(d, "q8_0_dequant.npz"), **deq)
            gic.gguf_write(os.path.join(d, "bad-used.gguf"), arch, cfg, moe_tensors(w, cfg),
                           meta_over=dict(meta(cfg, arch), expert_used_count=5))
            gic.gguf_write(os.path.join(d, "bad-gating.gguf"), arch, cfg, moe_tensors(w, cfg),
                           meta_over=dict(meta(cfg, arch), expert_gating_func=2))
            short = moe_tensors(w, cfg)
            short["blk.1.ffn_up_exps.weight"] = short["blk.1.ffn_up_exps.weight"][:3]
            gic.gguf_write(os.path.join(d, "bad-stack.gguf"), arch, cfg, short,
                           meta_over=meta(cfg, arch))
            gic.gguf_write(os.path.join(d, "deepseek2.gguf"), "deepseek2", cfg,
                           moe_tensors(w, cfg), meta_over=meta(cfg, arch))
        if case == "qwen2-moe":
            gic.gguf_write(os.path.join(d, "no-shexp.gguf"), arch, cfg, moe_tensors(w, cfg),
                           meta_over=meta(cfg, arch), drop="blk.0.ffn_gate_shexp.weight")
            gic.gguf_write(os.path.join(d, "qwen2-experts.gguf"), "qwen2", cfg,
                           moe_tensors(w, cfg), meta_over=meta(cfg, arch))
            # a shared expert 40 wide: no whole number of 32-column blocks for sh_down_w
            narrow = moe_tensors(w, cfg)
            for layer in range(2):
                for kind in ("gate", "up"):
                    name = f"blk.{layer}.ffn_{kind}_shexp.weight"
                    narrow[name] = narrow[name][:40]
                name = f"blk.{layer}.ffn_down_shexp.weight"
                narrow[name] = np.ascontiguousarray(narrow[name][:, :40])
            gic.gguf_write(os.path.join(d, "shexp40.gguf"), arch, cfg, narrow,
                           meta_over=dict(meta(cfg, arch), expert_shared_feed_forward_length=40))


def same_checkpoints(a, b, what):
    (aa, aw), (ba, bw) = gic.checkpoint_read(a), gic.checkpoint_read(b)
    assert aa == ba, f"{what}: config attributes differ:\n{aa}\n{ba}"
    assert sorted(aw) == sorted(bw), f"{what}: datasets differ: {sorted(aw)} {sorted(bw)}"
    for k in aw:
        assert aw[k].shape == bw[k].shape and (aw[k] == bw[k]).all(), f"{what}: {k} differs"
    return aa, aw


def q8_0_checks(tripar_bin, d):
    """The Q8_0 file: fp32 holds gguf-py's dequantized values, expert by expert; keep stores
    q8_0 with every expert's blocks as they are and runs as the fp32 import in q8_0."""
    import numpy as np
    tripar = gic.tripar
    tripar([tripar_bin, "import-gguf", d + "/q8_0.gguf", "--out", d + "/q8_0.h5"],
           pattern=r"\(\d+ quantized\)")
    deq = dict(np.load(d + "/q8_0_dequant.npz"))
    _, qw = gic.checkpoint_read(d + "/q8_0.h5")
    E = MIXTRAL["num_local_experts"]
    for layer in range(2):
        for e in range(E):
            gu = np.concatenate([deq[f"blk.{layer}.ffn_gate_exps.weight"][e],
                                 deq[f"blk.{layer}.ffn_up_exps.weight"][e]], 0)
            assert (qw["exp_gate_up_w"][layer * E + e] == gu).all(), f"Q8_0: expert {layer}.{e}"
            assert (qw["exp_down_w"][layer * E + e] ==
                    deq[f"blk.{layer}.ffn_down_exps.weight"][e]).all(), f"Q8_0: down {layer}.{e}"
        assert (qw["router_w"][layer] == deq[f"blk.{layer}.ffn_gate_inp.weight"]).all()
    print("q8_0: every expert equals gguf-py's dequantized slice")
    text = tripar([tripar_bin, "import-gguf", d + "/q8_0.gguf", "--out", d + "/keep.h5",
                   "--precision", "keep"],
                  pattern=r"q8_0: \d+ matrices kept as stored \(no fp32 copy\), 0 requantised")
    print(text)
    ka, kw = gic.checkpoint_read(d + "/keep.h5")
    assert ka["precision"] in ("q8_0", b"q8_0"), ka["precision"]
    for key, name, rows in (("exp_gate_up_w", "ffn_gate_exps", slice(0, 32)),
                            ("exp_down_w", "ffn_down_exps", slice(None))):
        q, s = kw[key][E + 1], kw[key + "_scale"][E + 1]  # layer 1, expert 1
        vals = (q * np.repeat(s, 32, axis=-1))[rows]
        assert (vals == deq[f"blk.1.{name}.weight"][1]).all(), f"keep: {key} is not as stored"
    want = gic.run_tokens(tripar_bin, d + "/q8_0.h5", d, "q8-fp32", ["model.precision=q8_0"],
                          logits=True)
    got = gic.run_tokens(tripar_bin, d + "/keep.h5", d, "q8-keep", logits=True)
    assert want[0] == got[0] and (want[1] == got[1]).all(), "keep runs unlike fp32 in q8_0"
    print(f"q8_0 keep: expert blocks as stored; tokens {got[0]} and logits as fp32 in q8_0")


def outer(tripar_bin, work):
    import numpy as np
    from gguf_check import venv_make
    from make_hf_llama import make, read_safetensors
    tripar = gic.tripar
    os.makedirs(work, exist_ok=True)
    for seed, (case, (arch, over)) in enumerate(CASES.items()):
        d = os.path.join(work, case)
        make(os.path.join(d, "hf"), arch, "F32", 1, over, 70 + seed, reference=False)
        w = read_safetensors(os.path.join(d, "hf", "model.safetensors"))
        np.savez(os.path.join(d, "hf.npz"), **{k: v.astype(np.float32) for k, v in w.items()})
    py = venv_make(work)
    if subprocess.run([py, os.path.abspath(__file__), "--inner", work]).returncode != 0:
        sys.exit("FAIL: writing the GGUF files")
    for case in CASES:
        d = os.path.join(work, case)
        tripar([tripar_bin, "import-hf", os.path.join(d, "hf"), "--out", d + "/hf.h5"])
        print(tripar([tripar_bin, "import-gguf", d + "/model.gguf", "--out", d + "/gguf.h5"],
                     pattern=r"experts, \d per token \((renormalised|softmax over all)\)"))
        attrs, w = same_checkpoints(d + "/hf.h5", d + "/gguf.h5", case)
        th = gic.run_tokens(tripar_bin, d + "/hf.h5", d, "hf")
        tg = gic.run_tokens(tripar_bin, d + "/gguf.h5", d, "gguf")
        assert th == tg, f"{case}: tokens differ: import-hf {th}, import-gguf {tg}"
        # experts split over 2 ranks (tp=2, ep=2) give the single rank's tokens
        tp = gic.run_tokens(tripar_bin, d + "/gguf.h5", d, "gguf-ep2",
                            ["parallel.tp=2", "parallel.ep=2"], ranks=2)
        assert tp == tg, f"{case}: tp=2 x ep=2 gives {tp}, 1 rank {tg}"
        print(f"{case}: {len(w)} datasets identical (norm_topk_prob "
              f"{attrs.get('norm_topk_prob')}); tokens {tg}, also at tp=2 x ep=2")
    d = os.path.join(work, "mixtral")
    tripar([tripar_bin, "import-gguf", d + "/split.gguf", "--out", d + "/split.h5"])
    same_checkpoints(d + "/hf.h5", d + "/split.h5", "per-expert tensors")
    print("mixtral split: the per-expert blk.N.ffn_gate.E tensors import as the stacks do")
    q8_0_checks(tripar_bin, d)
    dq = os.path.join(work, "qwen2-moe")
    for path, pattern, *extra in (
            (d + "/bad-used.gguf", r"key 'llama\.expert_used_count' = 5 is more than "
                                   r"llama\.expert_count = 4"),
            (d + "/bad-gating.gguf", r"key 'llama\.expert_gating_func' = 2 is not supported"),
            (d + "/bad-stack.gguf", r"tensor 'blk\.1\.ffn_up_exps\.weight' has dims "
                                    r"\[32, 32, 3\], but the llama\.\* metadata implies "
                                    r"\[32, 32, 4\]"),
            (d + "/deepseek2.gguf", r"'general\.architecture' = \"deepseek2\" \(a mixture of "
                                    r"experts, deepseek2\.expert_count = 4\) is not supported"),
            (dq + "/no-shexp.gguf", r"tensor 'blk\.0\.ffn_gate_shexp\.weight' is missing"),
            (dq + "/qwen2-experts.gguf", r"key 'qwen2\.expert_count' is present"),
            (dq + "/shexp40.gguf", r"--precision q8_0 stores weight rows in blocks of 32 "
                                   r"columns, but the shared expert's width, the input of "
                                   r"sh_down_w is 40", "--precision", "q8_0")):
        out = os.path.join(work, "never.h5")
        tripar([tripar_bin, "import-gguf", path, "--out", out] + extra, 2, pattern)
        assert not os.path.exists(out), f"{path}: a refused import left {out}"
        print(f"{os.path.basename(path)}: refused as it should be")
    tripar([tripar_bin, "import-gguf", dq + "/shexp40.gguf", "--out", dq + "/shexp40.h5"],
           pattern=r"shared expert 40 wide")
    print("shexp40.gguf: fp32 imports it")
    print("gguf_moe_check: all passed")


if __name__ == "__main__":
    gic.script_main(inner, outer, "gguf_moe_check.py")
