#!/usr/bin/python3
"""Numerics guards of `tripar run` and `tripar import-hf`, end to end (issue 14, items 6, 9, 10).

  numerics.py OUTDIR MODE [ARGS...]

  nan-weight NP TP           a checkpoint with a NaN (then an Inf) weight that only TP rank 1
                             holds is refused: exit 2, the tensor and element named once, no
                             run file
  import-nonfinite           import-hf refuses a directory with a NaN / -Inf / +Inf element
                             (F32, BF16 in a shard, F16): exit 2, tensor named, no output
  nonfinite PLANT NP K=V...  a checkpoint with huge but finite weights (PLANT: pos = wpe row 7,
                             mlp:L = layer L's MLP, head = final norm) makes the logits
                             non-finite: exit 1, the step and first non-finite layer named
                             once, RUN.h5.partial.HOST.PID readable with complete=0, the tokens before
                             that step equal to a healthy run's, -1 after, per-sequence counts
  nonfinite-moe NP K=V...    the same for a mixture of experts (data/fixtures/factor_moe.yaml)
                             whose layer 3 experts' gate|up weights are huge: the diagnosis
                             re-run meets every all-to-all of an EP group across replicas,
                             one of them short a micro-batch, and names layer 3 (mlp)
  temperature NP K=V...      temperature 1e-300 and 1e-7 give exactly the greedy tokens
  signal-generation          SIGTERM mid-generation: -1 past each sequence's count, counts
                             agree with the tokens, /metrics holds no iteration and no 0
  signal-iterations          SIGTERM after some measured iterations: /metrics holds exactly
                             the completed ones, none of them 0

The model is tests/records_e2e/mesh.yaml (4 layers, embd 32, mlp 128, vocab 97, 6 prompts of
5 tokens); checkpoints come from its synthetic model through --save-checkpoint."""
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import glob
import json

import h5py
import numpy as np

BIN = os.environ["TRIPAR_BIN"]
SRC = os.environ["TRIPAR_SOURCE_DIR"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
JOB = os.path.join(SRC, "tests", "records_e2e", "mesh.yaml")
PROMPT_LEN, BATCH, VOCAB = 5, 6, 97
failures = []



def partials(run):
    """The partial files of runs writing `run` (PATH.partial.HOST.PID, docs/schema.md)."""
    return sorted(glob.glob(glob.escape(run) + ".partial.*"))


def remove_old(run):
    for p in [run] + partials(run):
        if os.path.exists(p):
            os.remove(p)

def expect(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg)
    return cond


def finish():
    if failures:
        sys.exit("%d check(s) failed" % len(failures))
    print("ok")


def sets(pairs):
    out = []
    for kv in pairs:
        out += ["--set", kv]
    return out


def tripar(np_, args, timeout=120):
    cmd = [BIN] + args
    if np_ > 1:
        cmd = [MPIEXEC, "-n", str(np_), "--oversubscribe"] + cmd
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout


def base_run(out, extra=(), np_=1, new_tokens=8):
    """A healthy run of the job (its run file) and, when asked, its synthetic checkpoint."""
    args = ["run", JOB, "--out", out] + sets(["record.activations=[]", "record.timings=off",
                                               "generate.new_tokens=%d" % new_tokens]) + list(extra)
    rc, text = tripar(np_, args)
    if not expect(rc == 0, "healthy run exited %d:\n%s" % (rc, text)):
        finish()
    return text


def saved_checkpoint(out):
    ckpt = os.path.join(out, "base.h5")
    if not os.path.exists(ckpt):
        base_run(os.path.join(out, "base_run.h5"), ["--save-checkpoint", ckpt])
    return ckpt


def once(text, needle, what):
    n = text.count(needle)
    return expect(n == 1, "%s: %r printed %d times, want once:\n%s" % (what, needle, n, text))


def nan_weight(out, np_, tp):
    ckpt = saved_checkpoint(out)
    # fc1_w row 100 of 128 and wte row 90 of 97 lie in TP rank 1's half at tp=2: rank 0, which
    # prints, holds neither, so the ranks must agree on the verdict
    for name, index, value, word in (("fc1_w", (2, 100, 3), np.nan, "NaN"),
                                     ("wte", (90, 5), np.inf, "+Inf")):
        bad = os.path.join(out, "bad_%s_np%d.h5" % (name, np_))
        shutil.copy(ckpt, bad)
        with h5py.File(bad, "r+") as f:
            d = f["weights/" + name]
            a = d[...]
            a[index] = value
            d[...] = a
        run = os.path.join(out, "never_%s_np%d.h5" % (name, np_))
        rc, text = tripar(np_, ["run", JOB, "--out", run] + sets(
            ["model.checkpoint=" + bad, "parallel.tp=%d" % tp, "record.activations=[]"]))
        at = ", ".join(str(i) for i in index)
        expect(rc == 2, "%s %s: exit %d, want 2:\n%s" % (name, word, rc, text))
        once(text, "weight tensor '%s' holds %s at [%s]" % (name, word, at), name)
        expect(not os.path.exists(run) and not partials(run),
               "%s: a run file was written for a refused checkpoint" % name)
    finish()


def safetensors_plant(path, name, index, raw):
    """Overwrites element `index` (flat) of tensor `name` in a safetensors file with raw."""
    with open(path, "r+b") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        entry = header[name]
        width = {"F32": 4, "F16": 2, "BF16": 2}[entry["dtype"]]
        assert len(raw) == width
        f.seek(8 + size + entry["data_offsets"][0] + index * width)
        f.write(raw)


def import_nonfinite(out):
    make = os.path.join(SRC, "tests", "io", "make_hf_dir.py")
    cases = [  # dtype, arguments, tensor, flat index, raw bits, shown as
        ("F32", [], "h.0.mlp.c_fc.weight", 3 * 64 + 5, struct.pack("<f", math.nan), "NaN",
         "[3, 5]"),
        ("BF16", ["--prefix", "--shards", "3"], "transformer.h.1.attn.c_proj.bias", 7,
         struct.pack("<H", 0xff80), "-Inf", "[7]"),
        ("F16", [], "wte.weight", 16 * 200 + 1, struct.pack("<H", 0x7c00), "+Inf", "[200, 1]"),
    ]
    for dtype, args, name, index, raw, word, at in cases:
        d = os.path.join(out, "hf_" + dtype)
        shutil.rmtree(d, ignore_errors=True)
        subprocess.run(["/usr/bin/python3", make, d, "--dtype", dtype] + args, check=True)
        planted = 0
        for fname in sorted(os.listdir(d)):
            if fname.endswith(".safetensors"):
                with open(os.path.join(d, fname), "rb") as f:
                    size = struct.unpack("<Q", f.read(8))[0]
                    if name in json.loads(f.read(size)):
                        safetensors_plant(os.path.join(d, fname), name, index, raw)
                        planted += 1
        assert planted == 1, (name, planted)
        ckpt = os.path.join(out, "never_%s.h5" % dtype)
        rc, text = tripar(1, ["import-hf", d, "--out", ckpt])
        expect(rc == 2, "import-hf %s: exit %d, want 2:\n%s" % (dtype, rc, text))
        once(text, "tensor '%s' holds %s at %s" % (name, word, at), "import-hf " + dtype)
        expect(not os.path.exists(ckpt), "import-hf %s: wrote %s" % (dtype, ckpt))
    finish()


PLANTS = {  # what to overwrite, the step the logits go non-finite, the site named
    "pos": (lambda w: w["wpe"].__setitem__(7, 3e38), 3, "layer 0 (attention)"),
    "head": (lambda w: w["lnf_b"].__setitem__(Ellipsis, 3e38), 0,
             "the final norm or LM head"),
}


def plant_mlp(layer):
    def plant(w):
        w["fc1_b"][layer] = 1e3       # every MLP unit on and positive...
        w["fc2_w"][layer] = 3e38      # ...so the down-projection's sum overflows to +Inf
    return plant, 0, "layer %d (mlp)" % layer


def nonfinite(out, plant, np_, mesh):
    fill, step, site = plant_mlp(int(plant.split(":")[1])) if plant.startswith("mlp:") \
        else PLANTS[plant]
    ckpt = saved_checkpoint(out)
    huge = os.path.join(out, "huge_%s.h5" % plant.replace(":", ""))
    shutil.copy(ckpt, huge)
    with h5py.File(huge, "r+") as f:
        fill(f["weights"])
    common = ["model.checkpoint=%s" % ckpt, "record.activations=[]", "generate.new_tokens=8"]
    tag = "%s_np%d" % (plant.replace(":", ""), np_)
    ref = os.path.join(out, "ref_%s.h5" % tag)
    rc, text = tripar(np_, ["run", JOB, "--out", ref] + sets(common + list(mesh)))
    expect(rc == 0, "healthy reference run: exit %d:\n%s" % (rc, text))
    run = os.path.join(out, "nonfinite_%s.h5" % tag)
    if os.path.exists(run) or partials(run):
        remove_old(run)
    common[0] = "model.checkpoint=%s" % huge
    rc, text = tripar(np_, ["run", JOB, "--out", run] + sets(common + list(mesh)))
    expect(rc == 1, "exit %d, want 1:\n%s" % (rc, text))
    once(text, "the logits went non-finite (NaN or Inf) at step %d" % step, "message")
    once(text, "the first output to do so in that step is that of %s." % site, "message")
    expect(not os.path.exists(run), "a run stopped by non-finite logits left a complete file")
    if not expect(len(partials(run)) == 1, "not one partial of %s: %s" % (run, partials(run))):
        finish()
    partial = partials(run)[0]
    once(text, "Stopped; %s holds the tokens" % partial, "the message names the partial file")
    with h5py.File(partial, "r") as f, h5py.File(ref, "r") as r:
        expect(int(f.attrs["complete"]) == 0, "complete = %s" % f.attrs["complete"])
        tok, want = f["output/tokens"][...], r["output/tokens"][...]
        gen = f["output/generated"][...]
        expect(gen.dtype == np.int32 and gen.shape == (BATCH,), "generated %s %s" % (
            gen.dtype, gen.shape))
        expect(bool((gen == step).all()), "generated %s, want %d everywhere" % (gen, step))
        T = PROMPT_LEN
        expect(bool((tok[:, :T + step] == want[:, :T + step]).all()),
               "tokens before step %d differ from the healthy run's" % step)
        expect(bool((tok[:, T + step:] == -1).all()),
               "tokens from step %d on are not -1:\n%s" % (step, tok))
        g = f["metrics"]
        expect(int(g.attrs["iterations"]) == 0 and g["latency"].shape == (0,),
               "the cut iteration is in /metrics: iterations %s latency %s" % (
                   g.attrs["iterations"], g["latency"][...]))
    rc, text = tripar(1, ["report", partial])
    expect(rc == 0 and "incomplete run file" in text, "report on the partial file: %d\n%s" % (
        rc, text))
    finish()


def nonfinite_moe(out, np_, mesh):
    job = os.path.join(SRC, "data", "fixtures", "factor_moe.yaml")
    quiet = ["record.activations=[]", "record.timings=off"]
    ckpt, huge = os.path.join(out, "moe.h5"), os.path.join(out, "moe_huge.h5")
    rc, text = tripar(1, ["run", job, "--out", os.path.join(out, "moe_run.h5"),
                          "--save-checkpoint", ckpt] + sets(quiet))
    if not expect(rc == 0, "healthy MoE run exited %d:\n%s" % (rc, text)):
        finish()
    shutil.copy(ckpt, huge)
    with h5py.File(huge, "r+") as f:
        d = f["weights/exp_gate_up_w"]  # (layers * experts, 2 mlp, embd): layer 3's 6 experts
        a = d[...]
        a[3 * 6:4 * 6] *= 1e30  # gate x up overflows: the output of layer 3's MLP is Inf
        d[...] = a
    run = os.path.join(out, "moe_nonfinite.h5")
    remove_old(run)
    rc, text = tripar(np_, ["run", job, "--out", run] + sets(
        quiet + ["model.checkpoint=" + huge] + list(mesh)))
    expect(rc == 1, "exit %d, want 1:\n%s" % (rc, text))
    once(text, "the logits went non-finite (NaN or Inf) at step 0", "message")
    once(text, "the first output to do so in that step is that of layer 3 (mlp).", "message")
    expect(len(partials(run)) == 1, "not one partial of %s: %s" % (run, partials(run)))
    finish()


def temperature(out, np_, mesh):
    common = ["record.activations=[]", "record.timings=off", "generate.new_tokens=8"] + list(mesh)
    greedy = os.path.join(out, "greedy_np%d.h5" % np_)
    rc, text = tripar(np_, ["run", JOB, "--out", greedy] + sets(common))
    expect(rc == 0, "greedy run: exit %d:\n%s" % (rc, text))
    want = h5py.File(greedy, "r")["output/tokens"][...]
    for t in ("1e-300", "1e-7"):
        run = os.path.join(out, "temp_%s_np%d.h5" % (t, np_))
        rc, text = tripar(np_, ["run", JOB, "--out", run] + sets(
            common + ["generate.sampling=sample", "generate.temperature=" + t, "generate.top_k=5"]))
        if expect(rc == 0, "temperature %s: exit %d:\n%s" % (t, rc, text)):
            got = h5py.File(run, "r")["output/tokens"][...]
            expect(bool((got == want).all()), "temperature %s: tokens differ from greedy:\n%s\n"
                   "greedy:\n%s" % (t, got, want))
    finish()


def start_and_signal(out, name, np_, extra, wait):
    """Starts a long run, waits until it has worked `wait` seconds, SIGTERMs mpirun; returns
    (exit code, output, partial path)."""
    run = os.path.join(out, name + ".h5")
    if os.path.exists(run) or partials(run):
        remove_old(run)
    cmd = [MPIEXEC, "-n", str(np_), "--oversubscribe", BIN, "run", JOB, "--out", run] + \
        sets(["record.activations=[]"] + extra)
    log = open(os.path.join(out, name + ".log"), "w+")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            if partials(run) or p.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(wait)
        if not expect(p.poll() is None, "the run ended before the signal"):
            finish()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    log.seek(0)
    text = log.read()
    expect(rc == 1, "exit %d after SIGTERM, want 1:\n%s" % (rc, text))
    expect(not os.path.exists(run), "a stopped run left a complete file")
    left = partials(run)
    expect(len(left) == 1, "not one partial of %s: %s" % (run, left))
    return text, left[0] if left else run + ".partial.missing"


def check_tokens(f, new_tokens):
    """-1 exactly past each sequence's count; valid ids before it. Returns the counts."""
    tok, gen = f["output/tokens"][...], f["output/generated"][...]
    T = PROMPT_LEN
    expect(gen.shape == (BATCH,) and bool(((gen >= 0) & (gen <= new_tokens)).all()),
           "generated %s" % gen)
    for i, k in enumerate(gen):
        row = tok[i, T:]
        expect(bool(((row[:k] >= 0) & (row[:k] < VOCAB)).all()) and bool((row[k:] == -1).all()),
               "row %d, %d generated: %s" % (i, k, row))
    return gen


def signal_generation(out):
    new = 20000
    text, partial = start_and_signal(out, "signal_generation", 2, [
        "parallel.pp=2", "parallel.microbatches=2", "model.synthetic.layers=2",
        "model.synthetic.ctx=20010", "generate.new_tokens=%d" % new, "record.timings=step",
        "record.flush_every=20"], 1.5)
    once(text, "stopped by signal", "message")
    with h5py.File(partial, "r") as f:
        gen = check_tokens(f, new)
        expect(len(set(gen.tolist())) == 1 and 0 < gen[0] < new,
               "every sequence stops at the same step, mid-run: %s" % gen)
        g = f["metrics"]
        expect(int(g.attrs["iterations"]) == 0, "iterations %s, want 0" % g.attrs["iterations"])
        for name in ("latency", "ttft", "tpot"):
            expect(g[name].shape == (0,), "/metrics/%s %s holds an unmeasured iteration" % (
                name, g[name][...]))
            expect(math.isnan(g.attrs[name + "_p50"]), "%s_p50 = %s, want NaN" % (
                name, g.attrs[name + "_p50"]))
        expect(int(g.attrs["generated_tokens"]) == 0, "generated_tokens %s claims tokens" %
               g.attrs["generated_tokens"])
        expect(math.isnan(g.attrs["prefill_seconds"]), "prefill_seconds %s" %
               g.attrs["prefill_seconds"])
    finish()


def signal_iterations(out):
    total = 1000000
    text, partial = start_and_signal(out, "signal_iterations", 1, [
        "generate.new_tokens=4", "bench.iterations=%d" % total, "record.timings=off"], 2.0)
    with h5py.File(partial, "r") as f:
        check_tokens(f, 4)
        g = f["metrics"]
        n = int(g.attrs["iterations"])
        expect(0 < n < total, "iterations %d of %d" % (n, total))
        lat, ttft = g["latency"][...], g["ttft"][...]
        expect(lat.shape == (n,) and ttft.shape == (n,), "latency %s ttft %s for %d iterations"
               % (lat.shape, ttft.shape, n))
        expect(bool((lat > 0).all()) and bool((ttft > 0).all()),
               "a 0 latency in /metrics: %d of %d" % ((lat <= 0).sum(), n))
        expect(abs(g.attrs["latency_mean"] - lat.mean()) <= 1e-9 * lat.mean(),
               "latency_mean is not the mean of the completed iterations")
        expect(int(g.attrs["generated_tokens"]) == BATCH * 4,
               "generated_tokens %s per completed iteration" % g.attrs["generated_tokens"])
    finish()


def main():
    out, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out, exist_ok=True)
    if mode == "nan-weight":
        nan_weight(out, int(args[0]), int(args[1]))
    elif mode == "import-nonfinite":
        import_nonfinite(out)
    elif mode == "nonfinite":
        nonfinite(out, args[0], int(args[1]), args[2:])
    elif mode == "nonfinite-moe":
        nonfinite_moe(out, int(args[0]), args[1:])
    elif mode == "temperature":
        temperature(out, int(args[0]), args[1:])
    elif mode == "signal-generation":
        signal_generation(out)
    elif mode == "signal-iterations":
        signal_iterations(out)
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
