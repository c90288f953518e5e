#!/usr/bin/python3
"""Low-precision weights against fp32, and every cpu kernel level against the best one.

  check_precisions.py WORKDIR JOB

On one rank, JOB (data/fixtures/factor_q8.yaml: every int8 product quantises its activations
in blocks) runs in fp32, bf16 (head fp32 and bf16), int8w (scales per row, per 64 columns,
the head int8 too) and ggml's block formats q8_0 (head fp32 and q8_0), q4_0 and q4_1, and q4_k
on the same model widened to embd 768 (whole 256-weight super-blocks; against an fp32 run of
that shape: SHAPE). Each low-precision run's prefill logits must stay within the tolerances
docs/kernels.md documents against the fp32 run's: the norm-wise relative error
max|a - b| / max|b| and the mean KL divergence of the softmaxes over the vocabulary.

Then bf16, int8w and the block formats run once per instruction-set level the cpu has (backend.cpu_isa: scalar up
to the detected one): each level computes the same function, so its logits must agree with the
detected level's to CROSS_LEVEL[precision], norm-wise, and its tokens equal the detected
level's except at a near tie that this noise can flip (near_ties.py: a top-2 margin of at most
2 CROSS_LEVEL max|logits|, from a teacher-forced run of the detected level). int8w's kernels sum each block
exactly in int32, so its levels agree to 1e-5, and so do the block formats', which run on them. bf16's kernels differ in the order of their fp32
sums (amx_bf16's tdpbf16ps, avx512_bf16's vdpbf16ps, sgemm on widened values below them), and where a
1e-7 difference meets an activation sitting on a bf16 rounding boundary, the next product's
input moves by one bf16 step (2^-8) and carries on: about one bf16 step on the logits (2.2e-3
measured on the fixture), an order of magnitude inside bf16's accuracy bound.

Environment: TRIPAR_BIN, MPIEXEC (default mpiexec)."""
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

from near_ties import judge_tokens, teacher_forced_margins

# docs/kernels.md, "Accuracy against fp32": (norm-wise logit error, mean KL in nats)
TOLERANCES = {"bf16": (2e-2, 2e-3), "int8w": (6e-2, 2e-2), "q8_0": (6e-2, 2e-2),
              "q4_0": (5e-1, 8e-1), "q4_1": (5e-1, 8e-1), "q4_k": (5e-1, 8e-1)}
# docs/kernels.md, "Instruction-set levels": logits of any level against the detected one
CROSS_LEVEL = {"bf16": 5e-3, "int8w": 1e-5, "q8_0": 1e-5, "q4_0": 1e-5, "q4_1": 1e-5,
               "q4_k": 1e-5}
# the shape a precision needs beside JOB's (q4_k: rows of whole 256-weight super-blocks)
SHAPE = {"q4_k": ["model.synthetic.embd=768"]}
LEVELS = ["scalar", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx_bf16"]


def run(tripar, mpiexec, job, out, sets, expect_ok=True):
    cmd = [mpiexec, "-n", "1", tripar, "run", job, "--out", out]
    for s in sets:
        cmd += ["--set", s]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if expect_ok and proc.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return proc


def logits(path):
    with h5py.File(path, "r") as f:
        return np.asarray(f["activations/logits"], dtype=np.float64)


def tokens(path):
    with h5py.File(path, "r") as f:
        return np.asarray(f["output/tokens"])


def compare(got, want):
    err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)
    lp = want - want.max(axis=-1, keepdims=True)
    lp -= np.log(np.exp(lp).sum(axis=-1, keepdims=True))
    lq = got - got.max(axis=-1, keepdims=True)
    lq -= np.log(np.exp(lq).sum(axis=-1, keepdims=True))
    kl = np.mean(np.sum(np.exp(lp) * (lp - lq), axis=-1))
    return err, kl


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    work, job = sys.argv[1], sys.argv[2]
    tripar = os.environ["TRIPAR_BIN"]
    mpiexec = os.environ.get("MPIEXEC", "mpiexec")
    shutil.rmtree(work, ignore_errors=True)  # run files are never overwritten: start empty
    os.makedirs(work)
    fail = 0

    refs = {}

    def ref_of(precision):
        """The fp32 logits of the shape this precision runs."""
        key = tuple(SHAPE.get(precision, []))
        if key not in refs:
            base = os.path.join(work, "fp32" + "".join("-" + s.split("=")[1] for s in key) + ".h5")
            run(tripar, mpiexec, job, base, list(key))
            refs[key] = logits(base)
        return refs[key]

    variants = [
        ("bf16", "bf16", ["model.precision=bf16"]),
        ("bf16-head", "bf16", ["model.precision=bf16", "model.quantize_head=true"]),
        ("int8w", "int8w", ["model.precision=int8w"]),
        ("int8w-g64-head", "int8w",
         ["model.precision=int8w", "model.int8_group=64", "model.quantize_head=true"]),
        ("q8_0", "q8_0", ["model.precision=q8_0"]),
        ("q8_0-head", "q8_0", ["model.precision=q8_0", "model.quantize_head=true"]),
        ("q4_0", "q4_0", ["model.precision=q4_0"]),
        ("q4_1", "q4_1", ["model.precision=q4_1"]),
        ("q4_k", "q4_k", ["model.precision=q4_k"]),
    ]
    for name, precision, sets in variants:
        out = os.path.join(work, name + ".h5")
        run(tripar, mpiexec, job, out, sets + SHAPE.get(precision, []))
        err, kl = compare(logits(out), ref_of(precision))
        max_err, max_kl = TOLERANCES[precision]
        ok = err <= max_err and kl <= max_kl
        fail |= not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:16s} logit error {err:.3e} (<= {max_err:g}), "
              f"KL {kl:.3e} (<= {max_kl:g})")

    # every level the cpu has, each against the detected (best) one
    levels = []
    for level in LEVELS:
        probe = run(tripar, mpiexec, job, os.path.join(work, f"probe-{level}.h5"),
                    [f"backend.cpu_isa={level}", "generate.new_tokens=1"], expect_ok=False)
        if probe.returncode == 0:
            levels.append(level)
        elif "this CPU supports up to" not in probe.stdout + probe.stderr:
            sys.exit(f"FAIL: backend.cpu_isa={level} failed for another reason\n"
                     f"{probe.stdout}{probe.stderr}")
    print(f"levels this cpu runs: {', '.join(levels)}")
    if "scalar" not in levels:
        sys.exit("FAIL: the scalar level must run everywhere")
    for precision in ("bf16", "int8w", "q8_0", "q4_0", "q4_1", "q4_k"):
        shape = SHAPE.get(precision, [])
        best = os.path.join(work, f"{precision}-auto.h5")
        run(tripar, mpiexec, job, best, [f"model.precision={precision}"] + shape)
        forced = os.path.join(work, f"forced-{precision}")
        os.makedirs(forced, exist_ok=True)
        margin, prompt = teacher_forced_margins(tripar, mpiexec, best, forced)
        best_logits, best_tokens = logits(best), tokens(best)
        near_tie = 2 * CROSS_LEVEL[precision] * np.max(np.abs(best_logits))
        for level in levels:
            out = os.path.join(work, f"{precision}-{level}.h5")
            run(tripar, mpiexec, job, out, [f"model.precision={precision}",
                                            f"backend.cpu_isa={level}"] + shape)
            err, _ = compare(logits(out), best_logits)
            verdicts = judge_tokens(tokens(out), best_tokens, margin, prompt, near_tie)
            ok = err <= CROSS_LEVEL[precision] and all(tie for _, tie in verdicts)
            fail |= not ok
            print(f"{'ok  ' if ok else 'FAIL'} {precision} at {level}: logit error {err:.3e} "
                  f"(<= {CROSS_LEVEL[precision]:g}) against the detected level, "
                  f"{len(verdicts)} sequence(s) apart")
            for text, tie in verdicts:
                print(f"       {'near tie taken the other way' if tie else 'FAIL'}: {text}")
    sys.exit(1 if fail else 0)


if __name__ == "__main__":
    main()
