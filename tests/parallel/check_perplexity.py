#!/usr/bin/python3
"""Perplexity is the same for every factorization (docs/performance.md, "Perplexity").

The one-rank run records the logits of every position (record.activations: logits) beside
/output/nll. From those float32 logits, numpy recomputes in float64 the NLL of every scored token
under llama-perplexity's windowing (chunk c is tokens [c*W, (c+1)*W) of the text; tokens
W/2 + 1 .. W - 1 of each are scored against the logits one position before) and the perplexity,
which must match tripar's: each token within NUMPY_ATOL, the perplexity within 1e-6 relative. With
--bytes (a synthetic model, which reads text as bytes) the windows themselves are checked
against the text's bytes. Then every dp x tp x pp of each world size must give the one-rank NLL
within NLL_ATOL per token, NaN at the same places, and the perplexity within PPL_RTOL.

Usage: check_perplexity.py TRIPAR WORKDIR JOB MESH... [--bytes TEXT] [-- KEY=VALUE...]
MESH: a world size (every dp x tp x pp of it) or one DPxTPxPP.
(MPIEXEC in the environment runs the ranks)"""
import os
import re
import subprocess
import sys

import h5py
import numpy as np

# Per-token NLL across factorizations, absolute (--nll-atol changes it). The logits differ in
# float32 rounding only: TP sums the row-parallel partial products in another order (and splits
# the head's columns), and a micro-batch or replica of another size runs products of another
# shape; PP alone changes nothing (bit-identical). A logit moved by a few ulps moves its
# log-softmax by about as much: the synthetic models measure at most 1.6e-6, so 2e-5 is a
# tenfold margin, yet far below any windowing or reduction error (a wrong target, shard or
# window costs order 1). The TP combination of (max, sum of exp) is in double and adds nothing
# visible (1e-14 against numpy).
NLL_ATOL = 2e-5
# One rank against numpy: the same float32 logits up to the head product's rounding (the
# recorded ones come from a product over every position, the scored ones from one over a
# window's scored rows), reduced in double both sides: 1e-14 measured where the BLAS rounds
# alike at both row counts, 2.3e-6 with the Haswell kernels OpenBLAS 0.3.21 picks on a Zen 5,
# which round by the row count (a logit of 10-20 is a few ulps of 1e-6 in float32).
NUMPY_ATOL = 1e-5
# The perplexity is exp of the mean of a few hundred such values, whose errors average out.
PPL_RTOL = 1e-5


def run(cmd, log):
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
    with open(log, "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def read(path):
    with h5py.File(path, "r") as f:
        d = f["output/nll"]
        logits = f["activations/logits"][()] if "activations/logits" in f else None
        return (d[()], float(d.attrs["perplexity"]), int(d.attrs["count"]),
                int(d.attrs["first"]), f["output/tokens"][()], logits)


def check_base(nll, ppl, count, first, tokens, logits, text):
    """tripar's NLL and perplexity against numpy's from the recorded logits."""
    chunks, W = tokens.shape
    assert first == W // 2, f"first scored position {first}, expected W/2 = {W // 2}"
    if text is not None:
        data = np.frombuffer(open(text, "rb").read(), dtype=np.uint8)
        want = min(len(data) // W, chunks)
        assert chunks == want, f"{chunks} windows, expected {want}"
        expect = data[: chunks * W].reshape(chunks, W).astype(np.int32)
        assert (tokens == expect).all(), "the windows are not the text's bytes cut every W"
    x = logits.astype(np.float64)  # (chunks, W, vocab)
    m = x.max(axis=2, keepdims=True)
    logp = x - m - np.log(np.exp(x - m).sum(axis=2, keepdims=True))
    ref = np.full((chunks, W), np.nan)
    for c in range(chunks):
        for j in range(first, W - 1):  # the logits at j score token j + 1
            ref[c, j + 1] = -logp[c, j, tokens[c, j + 1]]
    assert (np.isnan(ref) == np.isnan(nll)).all(), "NaN where numpy scores, or the reverse"
    scored = ~np.isnan(ref)
    assert scored.sum() == count == chunks * (W - 1 - first), \
        f"count {count}, scored {scored.sum()}, expected {chunks * (W - 1 - first)}"
    err = np.abs(nll[scored] - ref[scored]).max()
    ref_ppl = float(np.exp(ref[scored].mean()))
    print(f"one rank: {chunks} windows of {W}, {count} tokens; perplexity {ppl:.6f}, numpy "
          f"{ref_ppl:.6f}; NLL max |diff| {err:.2e}")
    assert err <= NUMPY_ATOL, f"NLL differs from numpy's by {err}"
    assert abs(ppl - ref_ppl) <= 1e-6 * ref_ppl, f"perplexity {ppl} vs numpy {ref_ppl}"
    assert abs(ppl - float(np.exp(nll[scored].mean()))) <= 1e-12 * ppl, \
        "the perplexity attribute is not exp(mean of /output/nll)"


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        extra = args[args.index("--") + 1:]
        args = args[: args.index("--")]
    text = None
    if "--bytes" in args:
        i = args.index("--bytes")
        text = args[i + 1]
        del args[i: i + 2]
    if len(args) < 4:
        sys.exit(__doc__)
    tripar, work, job = (os.path.abspath(a) for a in args[:3])
    check(tripar, work, job, meshes(args[3:]), text, extra)


def meshes(specs):
    """(dp, tp, pp) of every factorization of each world size given, or of each DPxTPxPP."""
    out = []
    for spec in specs:
        if "x" in spec:
            out.append(tuple(int(v) for v in spec.split("x")))
            continue
        world = int(spec)
        for tp in range(1, world + 1):
            for pp in range(1, world // tp + 1):
                if world % (tp * pp) == 0:
                    out.append((world // tp // pp, tp, pp))
    return out


def check(tripar, work, job, mesh_list, text=None, extra=(), nll_atol=NLL_ATOL):
    """The one-rank run against numpy, then each (dp, tp, pp) of mesh_list against one rank."""
    os.makedirs(work, exist_ok=True)
    mpiexec = os.environ.get("MPIEXEC", "mpiexec")
    sets = [a for kv in extra for a in ("--set", kv)]
    base = os.path.join(work, "base.h5")
    out = run([mpiexec, "-n", "1", "--oversubscribe", tripar, "run", job, "--out", base] + sets +
              ["--set", "record.activations=[logits]"], os.path.join(work, "base.log"))
    assert "perplexity" in out, "tripar run printed no perplexity line:\n" + out
    nll0, ppl0, count0, first0, tokens0, logits0 = read(base)
    check_base(nll0, ppl0, count0, first0, tokens0, logits0, text)
    want = rf"perplexity +{ppl0:.4f} over {count0} tokens"
    assert re.search(want, out), f"tripar run does not print /{want}/:\n" + out
    report = run([tripar, "report", base], os.path.join(work, "report.log"))
    assert re.search(want, report), f"tripar report does not print /{want}/:\n" + report
    for dp, tp, pp in mesh_list:
        name = f"dp{dp}-tp{tp}-pp{pp}"
        path = os.path.join(work, name + ".h5")
        run([mpiexec, "-n", str(dp * tp * pp), "--oversubscribe", tripar, "run", job, "--out",
             path, "--set", f"parallel.dp={dp}", "--set", f"parallel.tp={tp}", "--set",
             f"parallel.pp={pp}"] + sets, os.path.join(work, name + ".log"))
        nll, ppl, count, first, tokens, _ = read(path)
        assert (tokens == tokens0).all() and count == count0 and first == first0, \
            f"{name}: other windows than one rank's"
        assert (np.isnan(nll) == np.isnan(nll0)).all(), f"{name}: NaN elsewhere"
        ok = ~np.isnan(nll0)
        err = np.abs(nll[ok] - nll0[ok]).max()
        rel = abs(ppl - ppl0) / ppl0
        print(f"{'ok  ' if err <= nll_atol and rel <= PPL_RTOL else 'FAIL'} {name}: "
              f"perplexity {ppl:.6f} (rel {rel:.1e}), NLL max |diff| {err:.1e}")
        assert err <= nll_atol and rel <= PPL_RTOL, f"{name} differs from one rank"
    print(f"check_perplexity: {len(mesh_list)} factorizations agree with one rank")


if __name__ == "__main__":
    main()
