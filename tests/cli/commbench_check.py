#!/usr/bin/env python3
"""commbench end to end: runs `tripar commbench` under mpiexec and checks what it prints and
the HDF5 file it writes (docs/benchmarks.md, "Communication benchmark").

  commbench_check.py MODE WORKDIR
    tiers_np2     --tiers on 2 ranks of this node: the intra tier measured (positive alpha,
                  finite positive beta, the fit reproduced from the raw samples), the inter
                  tier absent and said so, every round trip verified
    tiers_planted --tiers --plant-error: the check catches the corrupted element (exit 1)
    nodes_np4     the collective sweep on tp=2 x dp=2: each axis's groups and how many cross
                  nodes, in the header, the rows and /commbench/axes; each table's closing
                  mean busbw and the run's "Avg bus bandwidth", against the file's rows
    alltoall_np3  the all-to-all over 3 ranks (tp 3): its table over tp and world, sizes below
                  one element per peer skipped, every row's fields sane (count a multiple of
                  the ranks, size its bytes, busbw algbw x (n-1)/n, positive finite times),
                  all verified; times are never compared to anything
    nccl1         --comm nccl on one rank and one GPU: every op verified on device buffers
                  (exit 77, a skip, without a usable CUDA device)
Needs TRIPAR_BIN; MPIEXEC (default mpirun).
"""
import math
import os
import shutil
import socket
import subprocess
import sys

import h5py
import numpy as np

BIN = os.environ["TRIPAR_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "mpirun")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def commbench(np_, *args, expect=0, env=None):
    cmd = [MPIEXEC, "-n", str(np_), "--oversubscribe", "--bind-to", "none", BIN, "commbench",
           *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    if p.returncode != expect:
        print(p.stdout, p.stderr, sep="\n")
        sys.exit(f"FAIL {' '.join(cmd)}: exit {p.returncode}, expected {expect}")
    return p.stdout


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def weighted_fit(sizes, times):
    """t = alpha + n / beta by least squares in relative error (weights 1/t^2), as documented."""
    w = 1.0 / times**2
    a = np.array([[w.sum(), (w * sizes).sum()], [(w * sizes).sum(), (w * sizes**2).sum()]])
    rhs = np.array([(w * times).sum(), (w * sizes * times).sum()])
    alpha, slope = np.linalg.solve(a, rhs)
    return alpha, 1.0 / slope


def tiers_np2(work):
    out = os.path.join(work, "tiers.h5")
    stdout = commbench(2, "--tiers", "--sizes", "8:64K", "--iters", "10", "--warmup", "2",
                       "--out", out)
    check("# tier intra: ranks 0 (" in stdout, "the intra tier is printed with its pair")
    check("# tier inter: no inter-node pair: all 2 ranks run on one node" in stdout,
          "the inter tier says it has no pair")
    check("#wrong total: 0\n" in stdout, "every round trip verified")
    host = socket.gethostname()
    sizes = 8 * 2.0 ** np.arange(14)  # 8 B .. 64 KiB
    with h5py.File(out, "r") as f:
        check(text(f.attrs["format"]) == "tripar-commbench", "format attribute")
        check(int(f.attrs["format_version"]) == 2, "format_version 2")
        check(text(f.attrs["mode"]) == "tiers", "mode tiers")
        check(int(f.attrs["world_size"]) == 2 and int(f.attrs["node_count"]) == 1,
              "world_size 2 on 1 node")
        check(text(f.attrs["comm"]) == "mpi" and text(f.attrs["memory"]) == "host", "comm mpi")
        check("results" not in f["commbench"], "no collective rows in tiers mode")
        ranks = f["commbench/ranks"][()]
        check(list(ranks["rank"]) == [0, 1] and list(ranks["node_index"]) == [0, 0],
              "both ranks on node 0")
        check(all(text(h) == host for h in ranks["host"]), f"ranks' host is {host}")
        tiers = f["commbench/tiers"]
        rows = tiers[()]
        check(len(rows) == 1 and text(rows[0]["tier"]) == "intra", "one tier row: intra")
        check("no inter-node pair" in text(tiers.attrs["absent_inter"]),
              "absent_inter says why")
        r = rows[0]
        check(r["rank_a"] == 0 and r["rank_b"] == 1, "intra pair is ranks 0 and 1")
        check(text(r["host_a"]) == host and text(r["host_b"]) == host, "pair hosts")
        check(r["n_sizes"] == 14 and r["wrong"] == 0, "14 sizes, none wrong")
        # sane, not tuned: a same-node ping-pong of 8 B is well under 10 ms on any machine,
        # and moves more than 1 MB/s
        check(0 < r["alpha_small_s"] < 0.01, f"alpha_small {r['alpha_small_s']} in (0, 10 ms)")
        check(math.isfinite(r["beta_bytes_s"]) and r["beta_bytes_s"] > 1e6,
              f"beta {r['beta_bytes_s']} finite and > 1 MB/s")
        samples = f["commbench/tier_samples"][()]
        check(len(samples) == 14 and all(text(t) == "intra" for t in samples["tier"]),
              "14 intra samples")
        check(np.array_equal(samples["size_bytes"], sizes.astype(np.int64)),
              "sample sizes double from 8 B")
        check(np.all(samples["time_s"] > 0) and np.all(samples["wrong"] == 0),
              "positive times, none wrong")
        check(r["alpha_small_s"] == samples["time_s"][0], "alpha_small is the smallest size's")
        alpha, beta = weighted_fit(samples["size_bytes"].astype(float), samples["time_s"])
        check(math.isclose(alpha, r["alpha_s"], rel_tol=1e-6, abs_tol=1e-12),
              f"alpha {r['alpha_s']} is the fit of the samples ({alpha})")
        check(math.isclose(beta, r["beta_bytes_s"], rel_tol=1e-6),
              f"beta {r['beta_bytes_s']} is the fit of the samples ({beta})")
        axes = f["commbench/axes"][()]
        check([text(a) for a in axes["axis"]] == ["tp", "pp", "dp", "world"], "four axes")
        check(np.all(axes["groups_crossing"] == 0) and all(text(t) == "intra" for t in
                                                           axes["tier"]), "no axis crosses")


def tiers_planted(work):
    stdout = commbench(2, "--tiers", "--sizes", "8:1K", "--iters", "2", "--plant-error",
                       expect=1)
    # one element corrupted per size, 8 sizes, on the intra tier only
    check("#wrong total: 8  FAILED" in stdout, "the planted errors are counted, one per size")


def nodes_np4(work):
    out = os.path.join(work, "nodes.h5")
    stdout = commbench(4, "--tp", "2", "--dp", "2", "--sizes", "8:1K", "--iters", "2",
                       "--ops", "allreduce", "--axes", "tp,dp,world", "--out", out)
    check("# axis tp   : 2 groups of 2 ranks, 0 of 2 cross nodes (intra-node)" in stdout,
          "header: tp groups and crossings")
    check("# allreduce over dp: 2 groups of 2 ranks, running at once; 0 of 2 cross nodes "
          "(intra-node)" in stdout, "op header: dp groups and crossings")
    check("#wrong total: 0\n" in stdout, "all verified")
    with h5py.File(out, "r") as f:
        check(text(f.attrs["mode"]) == "collectives", "mode collectives")
        rows = f["commbench/results"][()]
        check(len(rows) == 3 * 8, "8 sizes x 3 axes")
        want = {"tp": 2, "dp": 2, "world": 1}
        for r in rows:
            axis = text(r["axis"])
            check(r["groups"] == want[axis] and r["groups_crossing"] == 0 and
                  text(r["tier"]) == "intra", f"row {axis}: groups and tier")
        axes = {text(a["axis"]): a for a in f["commbench/axes"][()]}
        check(axes["pp"]["groups"] == 4 and axes["pp"]["ranks"] == 1, "pp: 4 groups of 1")
    # each table closes with its mean busbw and where the result lands, and the run with the
    # mean over every row (nccl-tests' "Avg bus bandwidth"), printed at 6 digits
    for axis in ("tp", "dp", "world"):
        mine = rows[[text(a) == axis for a in rows["axis"]]]
        line = [l for l in stdout.splitlines() if l.startswith(f"# allreduce over {axis}: avg busbw ")]
        check(len(line) == 1 and line[0].endswith(f" GB/s over {len(mine)} sizes (in place)"),
              f"allreduce over {axis}: one closing line {line}")
        if line:
            shown = float(line[0].split("avg busbw ")[1].split()[0])
            check(math.isclose(shown, float(np.mean(mine["busbw_gbs"])), rel_tol=1e-5),
                  f"{axis}: avg busbw {shown} is the mean of its rows")
    tail = stdout.split("# #wrong total: 0\n")[-1].splitlines()  # then "# wrote FILE"
    last = tail[0] if tail else ""
    check(last.startswith("# Avg bus bandwidth : ") and
          last.endswith(f" GB/s, the mean busbw of the {len(rows)} rows above"),
          f"the closing line: {last}")
    shown = float(last.split(": ")[1].split()[0]) if ": " in last else math.nan
    check(math.isclose(shown, float(np.mean(rows["busbw_gbs"])), rel_tol=1e-5),
          f"Avg bus bandwidth {shown} is the mean busbw of every row")


def alltoall_np3(work):
    out = os.path.join(work, "alltoall.h5")
    stdout = commbench(3, "--sizes", "8:1K", "--iters", "2", "--warmup", "1", "--ops",
                       "alltoall", "--out", out)
    check("# alltoall over tp: 1 groups of 3 ranks, running at once; 0 of 1 cross nodes "
          "(intra-node)" in stdout, "op header: alltoall over tp")
    check("#wrong total: 0\n" in stdout, "every all-to-all verified")
    # 8 B is 2 floats, less than one a peer: skipped; 16 B .. 1 KiB are 7 sizes
    sizes = [16 * 2**k for k in range(7)]
    with h5py.File(out, "r") as f:
        rows = f["commbench/results"][()]
    check(sorted({text(r["op"]) for r in rows}) == ["alltoall"], "only alltoall rows")
    for axis in ("tp", "world"):
        mine = rows[[text(a) == axis for a in rows["axis"]]]
        check(len(mine) == len(sizes), f"alltoall over {axis}: {len(mine)} rows, want 7")
        for r, size in zip(mine, sizes):
            count = size // 4 // 3 * 3
            check(r["count"] == count and r["size_bytes"] == 4 * count,
                  f"{axis} {size} B: count {r['count']} (want {count}), size {r['size_bytes']}")
            check(r["ranks"] == 3 and r["groups"] == 1 and r["groups_crossing"] == 0 and
                  text(r["tier"]) == "intra" and text(r["type"]) == "float" and r["wrong"] == 0,
                  f"{axis} {size} B: ranks, groups, tier, type, wrong")
            check(math.isfinite(r["time_us"]) and r["time_us"] > 0, f"{axis}: time positive")
            check(math.isclose(r["algbw_gbs"], r["size_bytes"] / (r["time_us"] * 1e-6) / 1e9,
                               rel_tol=1e-9), f"{axis} {size} B: algbw is size / time")
            check(math.isclose(r["busbw_gbs"], r["algbw_gbs"] * 2 / 3, rel_tol=1e-9),
                  f"{axis} {size} B: busbw is algbw x (n-1)/n")
        line = [l for l in stdout.splitlines() if l.startswith(f"# alltoall over {axis}: avg busbw ")]
        check(len(line) == 1 and line[0].endswith(" GB/s over 7 sizes (out of place)"),
              f"alltoall over {axis}: one closing line {line}")


def nccl1(work):
    if not shutil.which("nvidia-smi"):
        print("skipped: no CUDA device (no nvidia-smi)")
        sys.exit(77)
    out = os.path.join(work, "nccl1.h5")
    cmd = [MPIEXEC, "-n", "1", "--oversubscribe", BIN, "commbench", "--comm", "nccl",
           "--sizes", "8:4M", "--iters", "5", "--warmup", "2", "--out", out]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if "no CUDA device is visible" in p.stderr or "built without CUDA" in p.stderr:
        print("skipped: no CUDA device:", p.stderr.strip().splitlines()[0])
        sys.exit(77)
    print(p.stdout[-3000:], p.stderr[-3000:], sep="\n")
    check(p.returncode == 0, f"exit {p.returncode}")
    check("comm nccl (device buffers)" in p.stdout, "the header names nccl and device buffers")
    check("#wrong total: 0\n" in p.stdout, "every op verified on device buffers")
    check("# sendrecv over world: a ring of one rank over nccl, skipped" in p.stdout,
          "send to oneself is skipped over nccl")
    with h5py.File(out, "r") as f:
        check(text(f.attrs["comm"]) == "nccl" and text(f.attrs["memory"]) == "device",
              "file says nccl on device memory")
        rows = f["commbench/results"][()]
        ops = sorted({text(r["op"]) for r in rows})
        check(ops == ["allgather", "allreduce", "alltoall", "bcast"],
              f"ops on a communicator of one: {ops}")
        check(np.all(rows["wrong"] == 0), "none wrong")


MODES = {"tiers_np2": tiers_np2, "tiers_planted": tiers_planted, "nodes_np4": nodes_np4,
         "alltoall_np3": alltoall_np3, "nccl1": nccl1}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in MODES:
        sys.exit(__doc__)
    os.makedirs(sys.argv[2], exist_ok=True)
    MODES[sys.argv[1]](sys.argv[2])
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("ok", sys.argv[1])
