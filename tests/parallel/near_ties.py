"""Tokens of a low-precision run against a reference run's, where rounding may flip near ties.

Rounding activations (bf16 at each product, int8 in blocks) is not continuous: a 1e-7
difference in summation order becomes one rounding step wherever a value sits on a boundary
(docs/kernels.md, "Accuracy"). Two runs that compute the same function to that noise may then
choose different tokens, but only where the reference chose its token by a margin the noise
can cover. These helpers find that margin from a teacher-forced run of the reference and judge
each sequence that parts ways."""
import subprocess

import h5py
import numpy as np
import yaml


def teacher_forced_margins(tripar, mpiexec, base, work):
    """The top-2 logit margin by which BASE (a run file) chose each generated token:
    margin[b, t] for the token at position t + 1, from BASE's job run on one rank over its own
    tokens (all but the last). Returns (margin, prompt length)."""
    with h5py.File(base, "r") as f:
        resolved = yaml.safe_load(f.attrs["job"])
        base_tokens = np.asarray(f["output/tokens"])
    new_tokens = resolved["generate"]["new_tokens"]
    forced = dict(resolved)
    forced["input"] = {"tokens": base_tokens[:, :-1].tolist()}
    forced["generate"] = dict(resolved["generate"], new_tokens=1)
    forced["record"] = dict(resolved["record"], activations=["logits"])
    forced["record"].pop("out", None)
    forced_job = f"{work}/forced.yaml"
    with open(forced_job, "w") as f:
        yaml.safe_dump(forced, f)
    forced_out = f"{work}/forced.h5"
    with open(forced_out + ".log", "w") as log:
        proc = subprocess.run([mpiexec, "-n", "1", tripar, "run", forced_job, "--out", forced_out],
                              stdout=log, stderr=subprocess.STDOUT, timeout=240)
    if proc.returncode != 0:
        raise SystemExit(open(forced_out + ".log").read() + "FAIL teacher-forced run")
    with h5py.File(forced_out, "r") as f:
        logits = np.asarray(f["activations/logits"], dtype=np.float64)
    top2 = np.sort(logits, axis=-1)[..., -2:]
    return top2[..., 1] - top2[..., 0], base_tokens.shape[1] - new_tokens


def judge_tokens(tokens, base_tokens, margin, prompt, near_tie):
    """Per sequence that parts ways with the reference: (text, is_near_tie). A sequence may part
    only at a generated position whose token the reference chose by at most near_tie."""
    verdicts = []
    for b in range(base_tokens.shape[0]):
        differ = np.nonzero(tokens[b] != base_tokens[b])[0]
        if differ.size == 0:
            continue
        p = int(differ[0])
        m = margin[b, p - 1] if p >= prompt else np.inf
        text = (f"sequence {b} position {p}: {base_tokens[b, p]} -> {tokens[b, p]}, "
                f"reference margin {m:.3f}, near tie below {near_tie:.3f}")
        verdicts.append((text, m <= near_tie))
    return verdicts
