#!/usr/bin/python3
"""The TP all-reduces calibrated from runs (docs/planner.md "Calibration"): a real blocking
tp=2 run of data/fixtures/factor.yaml on 2 ranks, and a copy whose tp_allreduce events last 3
times as long (h5py). `tripar plan --calibrate` with the copy prices every TP all-reduce on a
node where each rank has a core (the strategies of 2 ranks on this 2-core cluster file) at 3
times what it prices them at with the run itself, and leaves those of nodes whose ranks
time-share the cores (4 ranks), which no calibration run measured, alone. A run with
parallel.overlap does not calibrate them: its events span the products they ran under, so
the same copy of an overlapped run changes nothing.

  plan_comm_calibration.py TRIPAR FACTOR.yaml CLUSTER.yaml WORKDIR   (MPIEXEC: the launcher)"""
import json
import os
import shutil
import subprocess
import sys

import h5py

tripar, job, cluster, work = sys.argv[1:5]
mpiexec = os.environ.get("MPIEXEC", "mpirun")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def run(name, *sets):
    out = os.path.join(work, name + ".h5")
    args = [mpiexec, "-n", "2", tripar, "run", job, "--set", "parallel.tp=2", "--set",
            "record.activations=[]", "--out", out]
    for kv in sets:
        args += ["--set", kv]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def slowed(src, factor):
    """A copy of src whose tp_allreduce events last factor times as long."""
    dst = src.replace(".h5", "_slow.h5")
    shutil.copy(src, dst)
    n = 0
    with h5py.File(dst, "r+") as f:
        for name in f["timings"]:
            d = f["timings"][name]["events"]
            ev = d[()]
            code = h5py.check_enum_dtype(d.dtype["phase"])["tp_allreduce"]
            sel = ev["phase"] == code
            ev["t_end"][sel] = ev["t_start"][sel] + factor * (ev["t_end"][sel] - ev["t_start"][sel])
            d[...] = ev
            n += int(sel.sum())
    assert n > 0, "the run recorded no tp_allreduce events"
    return dst


def plan(calibration):
    """The strategies of 2 and of 4 ranks, priced with the calibration run."""
    rows = []
    for gpus in ("2", "4"):
        out = os.path.join(work, "%s.%s.json" % (os.path.basename(calibration), gpus))
        r = subprocess.run([tripar, "plan", job, "--cluster", cluster, "--gpus", gpus,
                            "--calibrate", calibration, "--format", "json", "-o", out],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        with open(out) as f:
            rows += json.load(f)["strategies"]
    key = lambda s: (s["dp"], s["tp"], s["pp"], s["ep"], s["microbatches"], s["overlap"], s["order"])
    return {key(s): s for s in rows}


blocking = run("blocking")
own, slow = plan(blocking), plan(slowed(blocking, 3.0))
assert own.keys() == slow.keys()
alone = shared = 0
for k, a in own.items():
    b = slow[k]
    if a["tp"] == 1:
        assert b["tp_allreduce_s"] == a["tp_allreduce_s"] == 0, (k, a, b)
        continue
    assert a["tp_allreduce_s"] > 0, (k, a)
    world = a["dp"] * a["tp"] * a["pp"]
    if world <= 2:  # a core per rank: the run measured these
        ratio = b["tp_allreduce_s"] / a["tp_allreduce_s"]
        assert abs(ratio - 3) < 1e-9, (k, ratio, a, b)
        assert b["compute_s"] == a["compute_s"], (k, a, b)  # the phases are calibrated alike
        alone += 1
    else:  # time-shared cores: nothing measured there
        assert b["tp_allreduce_s"] == a["tp_allreduce_s"], (k, a, b)
        shared += 1
assert alone > 0 and shared > 0, (alone, shared)

overlapped = run("overlapped", "parallel.overlap=true", "parallel.chunks=2")
own, slow = plan(overlapped), plan(slowed(overlapped, 3.0))
for k, a in own.items():
    assert slow[k]["tp_allreduce_s"] == a["tp_allreduce_s"], (k, a, slow[k])
print("ok: %d strategies of 2 ranks priced at 3x, %d of 4 ranks unchanged; an overlapped run "
      "calibrates nothing" % (alone, shared))
