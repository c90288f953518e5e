#!/usr/bin/python3
"""Checkpoint integrity (docs/checkpoint.md, "Integrity"): one flipped bit in a tensor's stored
data stops `tripar run` with exit 2, naming the tensor and the file, printed once, on a
tp=2 x pp=2 mesh of 4 ranks; with model.verify_checksums: false the same file loads; a
checkpoint without checksums (the layout before them) warns once and loads.

Each kind of checkpoint is its own case:
  save  a synthetic model written by `tripar run --save-checkpoint` (every tensor's last chunk
        flipped in turn, which also shows that the ranks' shards together read every chunk;
        the first chunk and the checksum's own bytes; the old layout);
  hf    `tripar import-hf` of a random GPT-2 directory (tests/io/make_hf_dir.py), in fp32 and
        with --precision bf16 and int8w (docs/checkpoint.md, "Stored precision"): bf16 and
        int8 values and the float32 scales are checksummed too, in chunks sized by their own
        element, and a load reading in many parts (TRIPAR_LOAD_CHUNK_BYTES) stops once;
  gguf  `tripar import-gguf` of the same kind of model written by gguf-py (in a venv, as
        tests/io/gguf_import_check.py makes it; exit 77, skipped, only when the `gguf`
        package cannot be downloaded).

Time bound: every run must end within RUN_BOUND_S. A run stopped by a checksum ends in about a
second; the bound is for a machine a hundred times slower, so only a hang (a rank left waiting
in a collective) fails it.

Usage: checkpoint_integrity.py TRIPAR WORKDIR {save|hf|gguf}   (MPIEXEC in the environment)"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

RUN_BOUND_S = 120
MESH = ["--set", "parallel.tp=2", "--set", "parallel.pp=2"]
WARNING = "carry no checksum"
# a model large enough that its matrices span several ~1 MiB chunks
SAVE_MODEL = "{layers: 2, heads: 4, embd: 512, vocab: 600, ctx: 32, seed: 7}"


def fail(msg):
    sys.exit("FAIL: " + msg)


def tripar_run(tripar, work, model, extra=(), tag="run"):
    """Runs `tripar run` on 4 ranks; returns (exit code, output, seconds, run file)."""
    job = os.path.join(work, f"{tag}.yaml")
    with open(job, "w") as f:
        f.write(f"model: {model}\nbackend: {{kind: cpu, threads: 1}}\n"
                "input: {tokens: [[1, 5, 17, 100]]}\ngenerate: {new_tokens: 3}\n")
    out = os.path.join(work, f"{tag}.h5")
    cmd = [os.environ.get("MPIEXEC", "mpiexec"), "-n", "4", "--oversubscribe", tripar, "run", job,
           "--out", out] + MESH + list(extra)
    # Open MPI's own allocations are not freed at exit; LeakSanitizer is not the subject here
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env, start_new_session=True)
    try:
        text, _ = p.communicate(timeout=RUN_BOUND_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        text, _ = p.communicate()
        fail(f"{' '.join(cmd)} did not end within {RUN_BOUND_S} s (a rank hangs):\n{text}")
    return p.returncode, text, time.monotonic() - t0, out


def tokens(run_file):
    import h5py
    with h5py.File(run_file, "r") as f:
        return f["output/tokens"][()].tolist()


def expect_loads(tripar, work, ckpt, extra=(), warn=0, tag="ok"):
    rc, out, secs, run_file = tripar_run(tripar, work, f"{{checkpoint: {ckpt}}}", extra, tag)
    if rc != 0:
        fail(f"{ckpt} {' '.join(extra)}: exit {rc}, expected 0:\n{out}")
    if out.count(WARNING) != warn:
        fail(f"{ckpt}: the warning '{WARNING}' appears {out.count(WARNING)} times, expected "
             f"{warn}:\n{out}")
    return tokens(run_file), secs


def expect_flip_refused(tripar, work, ckpt, tensor, chunk="last", bit=None, named=None):
    """Flips one bit of dataset tensor, checks the refusal naming the weight tensor `named`
    (default: the dataset; an int8 one's `_scale` names its weight), flips it back; returns
    the run's seconds."""
    from ckpt_flip import flip
    what = flip(ckpt, tensor, chunk, bit)
    rc, out, secs, _ = tripar_run(tripar, work, f"{{checkpoint: {ckpt}}}", tag="flip")
    flip(ckpt, tensor, chunk, bit)
    want = re.escape(ckpt) + r": tensor '" + (named or tensor) + r"' fails its checksum"
    if rc != 2 or not re.search(want, out):
        fail(f"flipped {what}: exit {rc}, expected 2 with /{want}/:\n{out}")
    if len(re.findall("fails its checksum", out)) != 1:
        fail(f"flipped {what}: the error is not printed exactly once:\n{out}")
    print(f"refused in {secs:.1f} s: {what}")
    return secs


def flip_cases(tripar, work, ckpt, tensors):
    """A flip in each of tensors is refused; with verification off the file loads."""
    from ckpt_flip import flip
    good, _ = expect_loads(tripar, work, ckpt)
    worst = max(expect_flip_refused(tripar, work, ckpt, t) for t in tensors)
    what = flip(ckpt, tensors[0])
    expect_loads(tripar, work, ckpt, ["--set", "model.verify_checksums=false"], tag="unverified")
    flip(ckpt, tensors[0])
    print(f"model.verify_checksums=false: loads with {what} flipped")
    print(f"every refusal ended within {worst:.1f} s (bound {RUN_BOUND_S} s)")
    return good


def old_layout(src, dst):
    """The checkpoint as tripar wrote it before checksums: contiguous datasets, no filter."""
    import h5py
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        w = f["weights"]
        for name in list(w):
            data = w[name][()]
            del w[name]
            w.create_dataset(name, data=data)  # h5py's default: contiguous, no filter


def weight_names(ckpt):
    import h5py
    with h5py.File(ckpt, "r") as f:
        names = list(f["weights"])
        for n in names:
            if f["weights"][n].fletcher32 is not True:
                fail(f"{ckpt}: /weights/{n} was written without Fletcher32")
        return names


def case_save(tripar, work):
    ckpt = os.path.join(work, "saved.h5")
    rc, out, _, _ = tripar_run(tripar, work, f"{{synthetic: {SAVE_MODEL}}}",
                               ["--save-checkpoint", ckpt], "save")
    if rc != 0:
        fail(f"--save-checkpoint: exit {rc}:\n{out}")
    names = weight_names(ckpt)
    good = flip_cases(tripar, work, ckpt, names)
    expect_flip_refused(tripar, work, ckpt, "qkv_w", chunk="first")
    expect_flip_refused(tripar, work, ckpt, "qkv_w", bit=-1)  # in the stored checksum itself
    old = os.path.join(work, "old.h5")
    old_layout(ckpt, old)
    got, _ = expect_loads(tripar, work, old, warn=1, tag="run-old")
    if got != good:
        fail(f"the old layout gives tokens {got}, the checksummed file {good}")
    expect_loads(tripar, work, old, ["--set", "model.verify_checksums=false"], tag="run-old-off")
    print(f"old layout (no checksums): one warning, tokens {got} as before")


def hf_dir(work, embd):
    import make_hf_dir
    d = os.path.join(work, "hf")
    make_hf_dir.main([d, "--layers", "2", "--heads", "4", "--embd", str(embd), "--ctx", "32",
                      "--vocab", "300", "--no-tokenizer", "--seed", "11"])
    return d


def importer(tripar, args):
    r = subprocess.run([tripar] + args, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(args)}: exit {r.returncode}:\n{r.stdout}{r.stderr}")


def chunk_bytes_check(ckpt, name, want):
    """The chunk of /weights/NAME holds `want` bytes of its stored element: the dcpl was made for
    the stored element's size, not float32's."""
    import h5py
    import numpy as np
    with h5py.File(ckpt, "r") as f:
        d = f["weights"][name]
        # the file type's size: h5py shows a bf16 dataset as float32
        size = d.id.get_type().get_size()
        got = int(np.prod(d.chunks)) * size
    if got != want:
        fail(f"{ckpt}: /weights/{name} ({size}-byte elements) has chunks {d.chunks} of {got} "
             f"bytes, expected {want}")


def case_hf(tripar, work):
    ckpt = os.path.join(work, "hf.h5")
    hf = hf_dir(work, 512)
    importer(tripar, ["import-hf", hf, "--out", ckpt])
    weight_names(ckpt)
    flip_cases(tripar, work, ckpt, ["fc1_w", "wte", "lnf_b"])
    # fc1_w is (2, 2048, 512): one 1 MiB chunk per 1024 bf16 rows, per 2048 int8 rows
    os.environ["TRIPAR_LOAD_CHUNK_BYTES"] = "4096"
    for prec, extra, flips in (("bf16", [], ["qkv_w", "wte"]),
                               ("int8w", ["--int8-group", "32"], ["fc1_w", "proj_w"])):
        p = os.path.join(work, f"hf-{prec}.h5")
        importer(tripar, ["import-hf", hf, "--out", p, "--precision", prec] + extra)
        names = weight_names(p)
        chunk_bytes_check(p, "fc1_w", 1 << 20)
        if prec == "int8w":
            if "fc1_w_scale" not in names:
                fail(f"{p}: no /weights/fc1_w_scale among {names}")
            expect_flip_refused(tripar, work, p, "fc1_w_scale", named="fc1_w")
            expect_flip_refused(tripar, work, p, "proj_w_scale", chunk="first", named="proj_w")
        flip_cases(tripar, work, p, flips)
        print(f"--precision {prec}: every dataset checksummed, flips refused, read in parts")
    del os.environ["TRIPAR_LOAD_CHUNK_BYTES"]


def case_gguf(tripar, work):
    import numpy as np
    from gguf_check import venv_make
    from make_hf_llama import read_safetensors
    d = hf_dir(work, 64)
    w = read_safetensors(os.path.join(d, "model.safetensors"))
    np.savez(os.path.join(work, "hf.npz"), **{k: v.astype(np.float32) for k, v in w.items()})
    py = venv_make(work)
    gguf = os.path.join(work, "model.gguf")
    r = subprocess.run([py, os.path.abspath(__file__), "--gguf-inner", d, work, gguf])
    if r.returncode != 0:
        fail("writing the GGUF file")
    ckpt = os.path.join(work, "gguf.h5")
    importer(tripar, ["import-gguf", gguf, "--out", ckpt])
    weight_names(ckpt)
    flip_cases(tripar, work, ckpt, ["qkv_w", "wpe"])


def gguf_inner(hf, work, out):
    """In the venv: the GPT-2 as llama.cpp's converter writes it (gguf_import_check.py's)."""
    import json
    import numpy as np
    from gguf_import_check import gguf_write_gpt2
    cfg = json.load(open(os.path.join(hf, "config.json")))
    gguf_write_gpt2(out, cfg, dict(np.load(os.path.join(work, "hf.npz"))))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--gguf-inner":
        return gguf_inner(*sys.argv[2:])
    if len(sys.argv) != 4 or sys.argv[3] not in ("save", "hf", "gguf"):
        sys.exit(__doc__)
    tripar, work, case = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
    work = os.path.join(work, case)
    os.makedirs(work, exist_ok=True)
    {"save": case_save, "hf": case_hf, "gguf": case_gguf}[case](tripar, work)
    print(f"checkpoint_integrity {case}: passed")


if __name__ == "__main__":
    main()
