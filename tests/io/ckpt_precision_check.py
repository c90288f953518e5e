#!/usr/bin/python3
"""Stored precisions (docs/checkpoint.md, "Stored precision"): small Hugging Face directories (a
Llama with an untied head and GQA, a tied Mistral with one kv head and an MLP whose unit is 32,
a GPT-2) are imported with --precision fp32, bf16, int8w, int8w --int8-group 64 and the
block formats q8_0, q4_0 and q4_1; a Llama of 256-column rows (4 heads of 128, an MLP of 512,
so tp=2 keeps whole 256-weight super-blocks) with fp32 and q4_k. A run from
each stored file (model.precision left out: the file's is taken) must give the tokens and
recorded logits of the fp32 file run with that model.precision, bit for bit, on 1 rank and on
tp=2 x pp=2 (q8_0 and q4_0 on the Llama alone: they store q4_1's planes less the min). Also: the int8w matrices take under 0.35 of their fp32 bytes; a bf16 file run as
fp32 equals the fp32 file with its matrices rounded to bf16 by numpy; the format attributes;
and the refusals (exit 2, named): a lossy job precision, another int8_group, quantize_head false
on an int8 head, a missing scale dataset, NaN in a scale and in a bf16 weight.

The stored files are loaded a few kB at a time (TRIPAR_LOAD_CHUNK_BYTES), so every tensor is
read in several parts, unevenly over the ranks.

Usage: ckpt_precision_check.py TRIPAR WORKDIR   (MPIEXEC in the environment runs `tripar run`)"""
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_hf_dir  # noqa: E402
from make_hf_llama import make  # noqa: E402

PROMPT = [1, 5, 17, 100, 200, 3, 42]
PRECISIONS = {"bf16": ["--precision", "bf16"], "int8w": ["--precision", "int8w"],
              "int8w-g64": ["--precision", "int8w", "--int8-group", "64"],
              "q8_0": ["--precision", "q8_0"], "q4_0": ["--precision", "q4_0"],
              "q4_1": ["--precision", "q4_1"], "q4_k": ["--precision", "q4_k"]}
# the fixtures q4_k takes (rows of whole 256-weight super-blocks), and the one that takes only it
K_FIXTURE = "llama-k"


def precisions_of(name):
    """The stored precisions a fixture is imported in: q4_k for K_FIXTURE alone, the rest for
    the others."""
    return {t: a for t, a in PRECISIONS.items() if (t == "q4_k") == (name == K_FIXTURE)}
MESHES = [(1, 1), (2, 2)]  # (tp, pp)
MATRICES = {"qkv_w", "proj_w", "fc1_w", "fc2_w", "gate_up_w", "down_w", "head_w"}


def run(args, want_rc=0, pattern=None, env=None):
    r = subprocess.run(args, capture_output=True, text=True,
                       env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0", **(env or {})))
    out = r.stdout + r.stderr
    if r.returncode != want_rc or (pattern and not re.search(pattern, out)):
        sys.exit(f"FAIL: {' '.join(args)}: exit {r.returncode} (want {want_rc}"
                 f"{', matching ' + repr(pattern) if pattern else ''}):\n{out}")
    return out


def generate(tripar, ckpt, work, tag, tp=1, pp=1, sets=(), want_rc=0, pattern=None, env=None):
    """(tokens, prefill logits) of a greedy run of ckpt on tp x pp ranks with --set sets."""
    job = os.path.join(work, "job.yaml")
    with open(job, "w") as f:
        f.write(f"model: {{checkpoint: {ckpt}}}\nbackend: {{kind: cpu, threads: 1}}\n"
                f"parallel: {{tp: {tp}, pp: {pp}}}\n"
                f"input: {{tokens: [[{', '.join(map(str, PROMPT))}]]}}\n"
                "generate: {new_tokens: 6}\nrecord: {activations: [logits]}\n")
    out = os.path.join(work, f"{tag}-run.h5")
    cmd = [tripar, "run", job, "--out", out]
    for s in sets:
        cmd += ["--set", s]
    cmd = [os.environ.get("MPIEXEC", "mpiexec"), "-n", str(tp * pp), "--oversubscribe"] + cmd
    run(cmd, want_rc, pattern, env)
    if want_rc:
        return None
    with h5py.File(out, "r") as f:
        return f["output/tokens"][()], f["activations/logits"][()]


def matrix_bytes(path):
    """Stored bytes of the weight matrices and their scales."""
    with h5py.File(path, "r") as f:
        return sum(f["weights"][k].id.get_storage_size() for k in f["weights"]
                   if k.removesuffix("_scale").removesuffix("_min") in MATRICES)


def bf16_round(a):
    """float32 -> the float32 of its bf16 rounding (to nearest even), as convert_f32_to_bf16."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return (u.astype(np.uint32) << 16).view(np.float32)


def fixtures(work):
    llama = os.path.join(work, "llama")
    make(llama, "LlamaForCausalLM", "F32", 1, {"hidden_size": 128, "intermediate_size": 256,
                                               "num_key_value_heads": 2}, 21, reference=False)
    tied = os.path.join(work, "mistral-tied")
    make(tied, "MistralForCausalLM", "BF16", 1,
         {"hidden_size": 128, "intermediate_size": 160, "num_key_value_heads": 1,
          "tie_word_embeddings": True}, 22, reference=False)
    gpt2 = os.path.join(work, "gpt2")
    make_hf_dir.main([gpt2, "--layers", "2", "--heads", "2", "--embd", "64", "--ctx", "32",
                      "--no-tokenizer", "--seed", "23"])
    llama_k = os.path.join(work, K_FIXTURE)
    make(llama_k, "LlamaForCausalLM", "F32", 1, {"hidden_size": 256, "intermediate_size": 512,
                                                 "num_attention_heads": 4, "head_dim": 128,
                                                 "num_key_value_heads": 2}, 24, reference=False)
    return {"llama": llama, "mistral-tied": tied, "gpt2": gpt2, K_FIXTURE: llama_k}


def same_runs(tripar, work, name, fp32, stored, precision, group, extra=()):
    """The stored file (precision left out) against the fp32 file run in that precision. The
    stored file is read in parts of a few kB (TRIPAR_LOAD_CHUNK_BYTES), a layer or a few
    embedding rows at a time, uneven over the ranks; the fp32 file whole."""
    sets = [f"model.precision={precision}"] + ([f"model.int8_group={group}"] if group else [])
    for tp, pp in MESHES:
        a = generate(tripar, fp32, work, "a", tp, pp, sets + list(extra))
        b = generate(tripar, stored, work, "b", tp, pp, list(extra),
                     env={"TRIPAR_LOAD_CHUNK_BYTES": "3000"})
        # and the fp32 file quantised at load in parts: the TP ranks' row maxima per part
        c = generate(tripar, fp32, work, "c", tp, pp, sets + list(extra),
                     env={"TRIPAR_LOAD_CHUNK_BYTES": "5000"}) if precision == "int8w" else a
        for other in (b, c):
            assert np.array_equal(a[0], other[0]), f"{name} tp={tp} pp={pp}: tokens differ"
            assert np.array_equal(a[1], other[1]), f"{name} tp={tp} pp={pp}: logits differ " \
                                                   f"by {np.abs(a[1] - other[1]).max()}"
    print(f"{name}: runs from the {precision}{f' g{group}' if group else ''} file equal the "
          f"fp32 file's in {precision}{' ' + ' '.join(extra) if extra else ''} (tokens "
          f"{b[0][0].tolist()[len(PROMPT):]}, logits bit for bit, tp x pp {MESHES})")


def refusals(tripar, work, files):
    int8, bf16, fp32 = files["llama"]["int8w"], files["llama"]["bf16"], files["llama"]["fp32"]
    for ckpt, sets, pattern in (
            (int8, ["model.precision=bf16"],
             r"model\.precision = bf16, but the checkpoint \S+ stores int8w weights; allowed "
             r"with it: int8w"),
            (int8, ["model.precision=fp32"], r"stores int8w weights; allowed with it: int8w"),
            (int8, ["model.precision=int8w", "model.int8_group=32"],
             r"--set model\.int8_group=32: model\.int8_group = 32, but the checkpoint \S+ stores "
             r"int8w scales for int8_group 0 \(one scale per row\); allowed with it: 0"),
            (int8, ["model.quantize_head=false"],
             r"model\.quantize_head = false, but the checkpoint \S+ stores the untied head_w in "
             r"int8w; allowed with it: auto or true"),
            (bf16, ["model.precision=int8w"],
             r"stores its matrices in bf16; allowed with it: bf16 \(as stored\) or fp32"),
            (bf16, ["model.precision=fp16"], r"import the source again with --precision fp32"),
            (files["llama"]["q8_0"], ["model.precision=q4_0"],
             r"model\.precision = q4_0, but the checkpoint \S+ stores q8_0 blocks; allowed with "
             r"it: q8_0"),
            (int8, ["model.precision=q8_0"], r"stores int8w weights; allowed with it: int8w"),
            (files[K_FIXTURE]["q4_k"], ["model.precision=q4_1"],
             r"model\.precision = q4_1, but the checkpoint \S+ stores q4_k blocks; allowed with "
             r"it: q4_k")):
        generate(tripar, ckpt, work, "refused", sets=sets, want_rc=2, pattern=pattern)
    # q4_k of a model whose rows are not whole 256-weight super-blocks: refused at import
    run([tripar, "import-hf", os.path.join(work, "llama"), "--out",
         os.path.join(work, "never-q4_k.h5"), "--precision", "q4_k"], 2,
        r"--precision q4_k stores weight rows in blocks of 256 columns, but embd, the input of "
        r"qkv_w, fc1_w / gate_up_w and head_w is 128; allowed for this model: fp32, bf16, int8w, "
        r"q8_0, q4_0, q4_1")
    # damaged files: a scale dataset gone, a NaN scale, a NaN bf16 weight
    for tag, src, damage, pattern in (
            ("no-scale", int8, lambda f: f["weights"].__delitem__("qkv_w_scale"),
             r"tensor 'qkv_w_scale' is missing"),
            ("nan-scale", int8, lambda f: f["weights/down_w_scale"].__setitem__((1, 3), np.nan),
             r"weight tensor 'down_w' holds NaN at \[1, 3, 0\]"),
            ("nan-bf16", bf16, lambda f: f["weights/proj_w"].__setitem__((0, 2, 5), np.nan),
             r"weight tensor 'proj_w' holds NaN at \[0, 2, 5\]"),
            ("no-min", files["llama"]["q4_1"], lambda f: f["weights"].__delitem__("proj_w_min"),
             r"tensor 'proj_w_min' is missing"),
            ("nan-min", files["llama"]["q4_1"],
             lambda f: f["weights/proj_w_min"].__setitem__((1, 3, 1), np.nan),
             r"weight tensor 'proj_w' holds NaN at \[1, 3, 32\]")):
        bad = os.path.join(work, f"{tag}.h5")
        shutil.copy(src, bad)
        with h5py.File(bad, "r+") as f:
            damage(f)
        generate(tripar, bad, work, "refused", 2, 2, want_rc=2, pattern=pattern)
    print("refusals: exit 2, named")
    # bf16 run as fp32: exactly the fp32 file with its matrices rounded to bf16
    rounded = os.path.join(work, "llama-rounded.h5")
    shutil.copy(fp32, rounded)
    with h5py.File(rounded, "r+") as f:
        for k in f["weights"]:
            if k in MATRICES:
                f["weights"][k][...] = bf16_round(f["weights"][k][()])
    a = generate(tripar, rounded, work, "a", 2, 2, ["model.precision=fp32"])
    b = generate(tripar, bf16, work, "b", 2, 2, ["model.precision=fp32"])
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), "bf16 widened differs"
    print("bf16 file as fp32: equals the fp32 file rounded to bf16, bit for bit")


def main(tripar, work):
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    files = {}
    for name, src in fixtures(work).items():
        files[name] = {}
        mine = precisions_of(name)
        for tag, args in [("fp32", [])] + list(mine.items()):
            out = os.path.join(work, f"{name}-{tag}.h5")
            text = run([tripar, "import-hf", src, "--out", out] + args)
            stored = "fp32" if tag == "fp32" else args[1]
            assert f"stored {stored}" in text, f"{name} {tag}: summary says\n{text}"
            files[name][tag] = out
        fp32 = files[name]["fp32"]
        with h5py.File(fp32, "r") as f:
            assert f.attrs["format_version"] == 1 and "precision" not in f.attrs, \
                "an fp32 import must stay format_version 1"
        ratio = {t: matrix_bytes(files[name][t]) / matrix_bytes(fp32) for t in mine}
        print(f"{name}: matrices take {', '.join(f'{t} {r:.3f}' for t, r in ratio.items())} "
              f"of their fp32 bytes")
        if name == K_FIXTURE:
            # q4_k's planes are q4_1's: nibbles, and a float32 scale d * sc and min
            # -dmin * mn per 32 weights
            assert ratio["q4_k"] < 0.32, ratio
            with h5py.File(files[name]["q4_k"], "r") as f:
                q = f["weights/down_w"][()]
                assert f.attrs["precision"] == b"q4_k" and q.min() >= 0 and q.max() <= 15
                assert f["weights/down_w_min"].shape[-1] * 32 == q.shape[-1]
            same_runs(tripar, work, name, fp32, files[name]["q4_k"], "q4_k", 0)
            continue
        with h5py.File(files[name]["int8w-g64"], "r") as f:
            assert f.attrs["format_version"] == 2 and f.attrs["int8_group"] == 64
            assert f["weights/qkv_w"].dtype == np.int8 and f["weights/wte"].dtype == np.float32
        assert ratio["int8w"] < 0.35 and ratio["int8w-g64"] < 0.35 and ratio["bf16"] < 0.51, ratio
        # the block formats' files hold their planes: int8 quants and a float32 scale (q4_1: and
        # a min) per 32 weights, 1.125 (1.25) bytes per weight whatever the quants' width
        assert all(0.26 < ratio[t] < 0.29 for t in ("q8_0", "q4_0")) and ratio["q4_1"] < 0.32, ratio
        with h5py.File(files[name]["q4_1"], "r") as f:
            q = f["weights/fc2_w" if name == "gpt2" else "weights/down_w"][()]
            assert f.attrs["precision"] == b"q4_1" and q.min() >= 0 and q.max() <= 15
            assert "qkv_w_min" in f["weights"] and "qkv_w_scale" in f["weights"]
        for tag, args in mine.items():
            # q8_0 and q4_0 store the planes q4_1 stores, less the min: their runs on the
            # Llama fixture, q4_1's on every fixture (the suite's time, not coverage, says so)
            if tag in ("q8_0", "q4_0") and name != "llama":
                continue
            group = int(args[3]) if len(args) > 2 else 0
            same_runs(tripar, work, name, fp32, files[name][tag], args[1], group)
    # a tied head in int8 (quantize_head true): a copy of the float32 wte, quantised at load
    same_runs(tripar, work, "mistral-tied", files["mistral-tied"]["fp32"],
              files["mistral-tied"]["int8w"], "int8w", 0, ["model.quantize_head=true"])
    refusals(tripar, work, files)
    print("ckpt_precision_check: all passed")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: ckpt_precision_check.py TRIPAR WORKDIR")
    main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
