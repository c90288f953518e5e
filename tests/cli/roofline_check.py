#!/usr/bin/python3
"""Per-phase rooflines on real small runs (issue 16, item 2): `tripar run` with bench.roofline
stores its ceilings in /metrics/roofline; `tripar report --roofline` prices each phase of the
slowest rank and labels it; `tools/plot.py roofline` draws it. Checked against the run file
itself (event durations read here with h5py), the hand count of the MLP's FLOPs, and the label
rule of docs/benchmarks.md; never against a speed.

  roofline_check.py WORKDIR      (env: TRIPAR_BIN, TRIPAR_SOURCE_DIR, MPIEXEC)
"""
import csv
import json
import math
import os
import shutil
import struct
import subprocess
import sys

import h5py
import numpy as np

TRIPAR = os.environ["TRIPAR_BIN"]
SRC = os.environ["TRIPAR_SOURCE_DIR"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
JOB = os.path.join(SRC, "tests/cli/tools_tiny.yaml")
PLOT = os.path.join(SRC, "tools/plot.py")
COMPUTE = ("embed", "norm", "qkv_gemm", "attention", "attn_out_gemm", "mlp_gemm", "head",
           "sample", "ep_expert")
COMM = ("tp_allreduce", "tp_wait", "pp_send", "pp_recv_wait", "dp_gather", "sample_wait", "nll_wait",
        "stop_wait", "ep_dispatch", "ep_combine", "ep_wait")
BOUNDS = ("compute-bound", "memory-bound", "communication-bound", "overhead-bound", "-")
# The label rule's thresholds (src/analysis/run_roofline.h, docs/benchmarks.md)
OVERHEAD_EFFICIENCY, OVERHEAD_EVENT_SECONDS = 0.10, 50e-6


def run(args, expect=0):
    done = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=240)
    assert done.returncode == expect, "%s exited %d, not %d\n%s\n%s" % (
        " ".join(args), done.returncode, expect, done.stdout, done.stderr)
    return done


def tripar_run(work, name, np_, *sets):
    out = os.path.join(work, name + ".h5")
    args = [MPIEXEC, "-n", str(np_), "--oversubscribe", "--bind-to", "none", TRIPAR, "run", JOB,
            "--out", out]
    for s in sets:
        args += ["--set", s]
    run(args)
    return out


def report(path, work, expect=0):
    js, cs = os.path.join(work, "roof.json"), os.path.join(work, "roof.csv")
    for p in (js, cs):
        if os.path.exists(p):
            os.remove(p)
    done = run([TRIPAR, "report", "--roofline", path, "--json", js, "--csv", cs], expect)
    if expect != 0:
        return done, None, None
    with open(js) as f:
        table = json.load(f)["rooflines"][0]
    with open(cs) as f:
        rows = list(csv.DictReader(f))
    return done, table, rows


def events_of(f, rank):
    ev = f["timings/rank_%05d/events" % rank][()]
    names = {v: k for k, v in h5py.check_enum_dtype(ev.dtype["phase"]).items()}
    return ev, np.array([names[p] for p in ev["phase"]])


def busiest_rank(f):
    best, rank = -1.0, 0
    for r in range(int(f.attrs["world_size"])):
        ev, names = events_of(f, r)
        keep = (ev["iteration"] >= 0) & np.isin(names, COMPUTE)
        busy = float((ev["t_end"][keep] - ev["t_start"][keep]).sum())
        if busy > best:
            best, rank = busy, r
    return rank


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def check_table(path, table, rows, stdout, ceilings):
    with h5py.File(path, "r") as f:
        rank = busiest_rank(f)
        assert table["rank"] == rank, "table is for rank %d, the busiest is %d" % (
            table["rank"], rank)
        assert "rooflines of rank %d, the slowest" % rank in stdout, stdout
        ev, names = events_of(f, rank)
        if ceilings:
            g = f["metrics/roofline"].attrs
            assert table["has_ceilings"]
            assert close(table["peak_gflops"],
                         max(g["sgemm_gflops_before"], g["sgemm_gflops_after"]))
            assert close(table["peak_gbs"], g["stream_gbs"])
            assert table["gflops_probe"] == g["gflops_probe"].decode()
            assert table["gbs_probe"] == g["gbs_probe"].decode()
        else:
            assert "metrics/roofline" not in f
            assert not table["has_ceilings"]
            assert "no ceilings in the file (run with bench.roofline: true)" in stdout, stdout
    assert len(rows) == len(table["phases"]), "csv and json have other rows"
    seen = set()
    for r in table["phases"]:
        seen.add((r["period"], r["phase"]))
        # the time is the sum of this rank's measured events of the phase in the period
        step = ev["step"]
        in_period = (step == 0) if r["period"] == "prefill" else (step >= 1)
        sel = (names == r["phase"]) & in_period & (ev["iteration"] >= 0)
        assert r["events"] == int(sel.sum()), r
        assert close(r["seconds"], float((ev["t_end"][sel] - ev["t_start"][sel]).sum()), 1e-6), r
        assert r["bound"] in BOUNDS, r
        assert close(r["bytes"], r["weight_bytes"] + r["kv_bytes"] + r["act_bytes"]), r
        if r["phase"] in COMM:
            assert r["bound"] == "communication-bound", r
            assert r["flops"] == 0 and r["gflops"] is None, r
            continue
        if r["phase"] not in COMPUTE:
            assert r["bound"] == "-", r
            continue
        # achieved = analytic cost / measured time
        assert r["flops"] >= 0 and r["bytes"] > 0, r
        assert close(r["gflops"], r["flops"] / r["seconds"] / 1e9), r
        assert close(r["gbs"], r["bytes"] / r["seconds"] / 1e9), r
        if not ceilings:
            assert r["bound"] == "-" and r["efficiency"] is None, r
            continue
        # the label rule, redone from the row and the ceilings
        ridge = table["peak_gflops"] / table["peak_gbs"]
        compute = r["flops"] / r["bytes"] > ridge
        eff = r["gflops"] / table["peak_gflops"] if compute else r["gbs"] / table["peak_gbs"]
        assert close(r["efficiency"], eff), r
        want = "compute-bound" if compute else "memory-bound"
        if eff < OVERHEAD_EFFICIENCY and r["seconds"] / r["events"] < OVERHEAD_EVENT_SECONDS:
            want = "overhead-bound"
        assert r["bound"] == want, (r, want)
        assert "%s: %s" % (r["phase"], want) in stdout, stdout
    for period in ("prefill", "decode"):
        for p in ("norm", "qkv_gemm", "attention", "attn_out_gemm", "mlp_gemm"):
            assert (period, p) in seen, "%s %s missing from the table" % (period, p)
    return table


def mlp_prefill_flops(table, layers, C, M, tp, rows, pieces):
    """GPT-2's MLP by hand: fc1 2 R C M/tp, bias + GELU 10 R M/tp, fc2 2 R (M/tp) C, per layer,
    per priced micro-batch prefill."""
    Ml = M // tp
    per_layer = 2 * rows * C * Ml + 10 * rows * Ml + 2 * rows * Ml * C
    return per_layer * layers * pieces


def row(table, period, phase):
    for r in table["phases"]:
        if r["period"] == period and r["phase"] == phase:
            return r
    raise AssertionError("no row %s %s" % (period, phase))


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % path
    return struct.unpack(">II", head[16:24])


def check_plot(src, out):
    env = dict(os.environ, TRIPAR_BIN=TRIPAR)
    subprocess.run(["/usr/bin/python3", PLOT, "roofline", src, "-o", out], check=True, env=env,
                   timeout=240)
    assert os.path.getsize(out) > 10000, "%s is nearly empty" % out
    w, h = png_size(out)
    assert w >= 600 and h >= 250, "%s is %dx%d" % (out, w, h)


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    # tools_tiny: 2 layers, embd 16, mlp 64, batch 2 x 4 prompt tokens, 6 new tokens
    a = tripar_run(work, "roof_tp2", 2, "bench.roofline=true", "parallel.tp=2",
                   "bench.iterations=2")
    done, table, rows = report(a, work)
    check_table(a, table, rows, done.stdout, ceilings=True)
    # 2 measured iterations x 1 micro-batch of 2 x 4 rows, this rank's half of the MLP
    mlp = row(table, "prefill", "mlp_gemm")
    assert mlp["flops"] == mlp_prefill_flops(table, 2, 16, 64, 2, 2 * 4, 2), mlp
    check_plot(a, os.path.join(work, "roof_tp2.png"))
    check_plot(os.path.join(work, "roof.json"), os.path.join(work, "roof_json.png"))

    # TP overlap in 2 pieces: the prefill runs as 2 nano-batches (a sequence each), each cut
    # into 2 pieces, and each piece of attention-out reads the whole (16, 8)-per-rank weight
    # (and TP rank 0 its 16 biases), 2 layers, 1 measured prefill
    o = tripar_run(work, "roof_overlap", 2, "bench.roofline=true", "parallel.tp=2",
                   "parallel.overlap=true", "parallel.chunks=2")
    done, table, rows = report(o, work)
    check_table(o, table, rows, done.stdout, ceilings=True)
    ao = row(table, "prefill", "attn_out_gemm")
    assert ao["events"] == 2 * 2 * 2, ao  # nano-batches x P x L
    bias = 16 * 4 if table["rank"] == 0 else 0
    assert ao["weight_bytes"] == 2 * 2 * 2 * (16 * 8 * 4 + bias), ao
    # the column-parallel qkv product reads its weights once per nano-batch
    qkv = row(table, "prefill", "qkv_gemm")
    assert qkv["events"] == 2 * 2 and qkv["weight_bytes"] == 2 * 2 * (24 * 16 * 4 + 24 * 4), qkv

    # pipeline, 2 micro-batches of 1 sequence, paged int8: no ceilings recorded
    b = tripar_run(work, "roof_pp2", 2, "parallel.pp=2", "parallel.microbatches=2",
                   "model.kv_cache=paged", "model.kv_block=4", "model.precision=int8w")
    done, table, rows = report(b, work)
    check_table(b, table, rows, done.stdout, ceilings=False)
    assert table["weight_dtype"] == "int8w" and table["kv_cache"] == "paged", table
    stage_layers = 1  # 2 layers over 2 stages
    mlp = row(table, "prefill", "mlp_gemm")
    assert mlp["flops"] == mlp_prefill_flops(table, stage_layers, 16, 64, 1, 1 * 4, 2), mlp

    # int8w in groups of 32 with the tied head as an int8 copy (quantize_head), embd 64: the
    # job's int8_group and quantize_head set the bytes. A head event reads the final LN's gain
    # and bias and 64 x 64 int8 weights with 2 scales a row, not the fp32 wte; a layer's qkv
    # 64 x 192 int8, 2 scales a row and the fp32 bias
    q = tripar_run(work, "roof_qhead", 1, "model.synthetic.embd=64", "model.precision=int8w",
                   "model.int8_group=32", "model.quantize_head=true", "record.activations=[]")
    done, table, rows = report(q, work)
    check_table(q, table, rows, done.stdout, ceilings=False)
    for period in ("prefill", "decode"):
        head, qkv = row(table, period, "head"), row(table, period, "qkv_gemm")
        assert head["weight_bytes"] == head["events"] * (2 * 64 * 4 + 64 * 64 + 64 * 2 * 4), head
        assert qkv["weight_bytes"] == qkv["events"] * (64 * 192 + 192 * 2 * 4 + 192 * 4), qkv

    # Llama (tests/cli/llama_tiny.yaml: 4 layers, 4 heads over 2 kv heads of 8, embd 32) at
    # tp=2 in bf16: a rank's QKV rows are 2 query heads + 1 kv head's k and v = (2 + 2) x 8
    llama = os.path.join(SRC, "tests/cli/llama_tiny.yaml")
    d = os.path.join(work, "roof_llama.h5")
    run([MPIEXEC, "-n", "2", "--oversubscribe", "--bind-to", "none", TRIPAR, "run", llama,
         "--out", d, "--set", "parallel.tp=2", "--set", "model.precision=bf16", "--set",
         "record.activations=[]", "--set", "bench.roofline=true"])
    done, table, rows = report(d, work)
    check_table(d, table, rows, done.stdout, ceilings=True)
    qkv = row(table, "prefill", "qkv_gemm")
    assert qkv["flops"] == 4 * 2 * (2 * 4) * 32 * ((2 + 2) * 8), qkv
    assert qkv["weight_bytes"] == 4 * 32 * ((2 + 2) * 8) * 2, qkv  # bf16, no biases

    # the same Llama as a mixture of experts (4 experts of mlp 48, top 2) at tp=2: each
    # (iteration, step) reads the fp32 router (4 x 32, replicated) and the weights of the
    # experts its rows reach, each expert this rank's 24 columns of gate|up (48 x 32) and down
    # (32 x 24). The experts reached are priced as the run routed its rows: each layer's share
    # s_e of the routed rows it recorded (/moe/expert_load, all steps), an expert reached by a
    # row with q_e = min(1, 2 s_e), so sum_e 1 - (1 - q_e)^rows of them, the mean over the 4
    # layers. Without the record, uniform routing: 4 (1 - (1 - 2/4)^rows) (the copy below).
    e = os.path.join(work, "roof_moe.h5")
    run([MPIEXEC, "-n", "2", "--oversubscribe", "--bind-to", "none", TRIPAR, "run", llama,
         "--out", e, "--set", "parallel.tp=2", "--set", "model.arch=mixtral", "--set",
         "model.synthetic.experts=4", "--set", "model.synthetic.experts_top_k=2", "--set",
         "record.activations=[]"])
    done, table, rows = report(e, work)
    check_table(e, table, rows, done.stdout, ceilings=False)
    expert = (2 * 24 * 32 + 32 * 24) * 4
    with h5py.File(e, "r") as f:
        load = f["moe/expert_load"][()]
        counts = load[:, :int(f["moe"].attrs["steps_run"])].sum(axis=(0, 1)).astype(float)
    shares = counts / counts.sum(axis=1, keepdims=True)  # (layers, experts)
    uniform = os.path.join(work, "roof_moe_uniform.h5")
    shutil.copy(e, uniform)
    with h5py.File(uniform, "r+") as f:
        del f["moe"]
    _, table_u, _ = report(uniform, work)
    for period, n_rows in (("prefill", 2 * 4), ("decode", 2)):
        for t, touched in (
                (table, sum(1 - (1 - min(1.0, 2 * float(np.float32(x)))) ** n_rows
                            for x in shares.flat) / len(shares)),
                (table_u, 4 * (1 - (1 - 2 / 4) ** n_rows))):
            mlp = row(t, period, "mlp_gemm")
            priced = mlp["events"] // 4  # one event per layer and (iteration, step)
            assert close(mlp["weight_bytes"], priced * 4 * (4 * 32 * 4 + touched * expert)), mlp

    # timings at step level cannot be priced per phase: exit 2 with the reason, once
    c = tripar_run(work, "roof_step", 1, "record.timings=step")
    done, _, _ = report(c, work, expect=2)
    lines = [l for l in done.stderr.splitlines() if l.startswith("tripar report:")]
    assert len(lines) == 1 and "timings are not at layer level" in lines[0], done.stderr
    # and a file that is not a run file
    bogus = os.path.join(work, "not_a_run.h5")
    with open(bogus, "w") as f:
        f.write("not hdf5")
    done, _, _ = report(bogus, work, expect=2)
    assert "tripar report:" in done.stderr and "Traceback" not in done.stderr, done.stderr
    print("roofline_check: ok")


if __name__ == "__main__":
    main()
