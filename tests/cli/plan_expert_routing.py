#!/usr/bin/python3
"""A mixture of experts priced as its runs routed it (docs/planner.md "Mixture of experts"):
one run of data/fixtures/factor_moe.yaml (6 experts, top 2, 8 layers, batch 8) records its
expert load (/moe/expert_load), and
- `tripar report --roofline` prices the run's own experts from that load: a copy whose load is
  all on expert 0 of each layer reads one expert per layer in decode, a copy without /moe the
  6 (1 - (2/3)^8) experts uniform routing touches at 8 rows, and the decode MLP's weight
  bytes of the two stand in the ratio of router + 1 expert to router + that many;
- `tripar plan --calibrate` takes the routing: JSON says expert_routing "recorded" and the
  hottest expert's rows over its layer's mean, as computed here from the file with h5py;
  without a calibration run, "uniform"; the text says the same in its `experts:` line.

  plan_expert_routing.py TRIPAR FACTOR_MOE.yaml CLUSTER.yaml WORKDIR   (MPIEXEC: the launcher)"""
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

tripar, job, cluster, work = sys.argv[1:5]
mpiexec = os.environ.get("MPIEXEC", "mpirun")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
run = os.path.join(work, "run.h5")
r = subprocess.run([mpiexec, "-n", "1", tripar, "run", job, "--set", "record.activations=[]",
                    "--out", run], capture_output=True, text=True)
assert r.returncode == 0, r.stdout + r.stderr

with h5py.File(run, "r") as f:
    load = f["moe/expert_load"][()]  # (replicas, steps, layers, experts)
    steps_run = int(f["moe"].attrs["steps_run"])
counts = load[:, :steps_run].sum(axis=(0, 1)).astype(np.float64)  # (layers, experts)
layers, experts = counts.shape
hottest = float((counts / counts.sum(axis=1, keepdims=True)).max() * experts)
assert hottest > 1, hottest

# the run's roofline with its own load, all on one expert, and without one (uniform)
one = os.path.join(work, "one_expert.h5")
shutil.copy(run, one)
with h5py.File(one, "r+") as f:
    d = f["moe/expert_load"]
    skewed = np.zeros_like(d[()])
    skewed[..., 0] = d[()].sum(axis=-1)
    d[...] = skewed
uniform = os.path.join(work, "uniform.h5")
shutil.copy(run, uniform)
with h5py.File(uniform, "r+") as f:
    del f["moe"]


def decode_mlp_weight_bytes(path):
    out = os.path.join(work, os.path.basename(path) + ".roof.json")
    r = subprocess.run([tripar, "report", "--roofline", path, "--json", out], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    phases = json.load(open(out))["rooflines"][0]["phases"]
    return next(p["weight_bytes"] for p in phases
                if p["period"] == "decode" and p["phase"] == "mlp_gemm")


C, M, E, k, rows = 96, 40, 6, 2, 8  # factor_moe.yaml; decode rows = the batch on one rank
router, expert = 4 * C * E, 4 * 3 * C * M  # fp32: the router, one expert's gate|up and down
touched = E * (1 - (1 - k / E) ** rows)
got = decode_mlp_weight_bytes(one) / decode_mlp_weight_bytes(uniform)
want = (router + expert) / (router + touched * expert)
assert abs(got - want) < 1e-9, (got, want)
recorded = decode_mlp_weight_bytes(run)
assert decode_mlp_weight_bytes(one) < recorded, recorded


def plan(*extra, fmt="json"):
    args = [tripar, "plan", job, "--cluster", cluster, "--gpus", "2"] + list(extra)
    r = subprocess.run(args + (["--format", "json"] if fmt == "json" else []),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout) if fmt == "json" else r.stdout


base = plan()
assert base["expert_routing"] == "uniform" and base["expert_routing_runs"] == 0, base
assert base["expert_hottest_ratio"] is None
cal = plan("--calibrate", run)
assert cal["expert_routing"] == "recorded" and cal["expert_routing_runs"] == 1, cal
assert abs(cal["expert_hottest_ratio"] - hottest) < 1e-5 * hottest, (cal["expert_hottest_ratio"],
                                                                      hottest)
text = plan("--calibrate", run, fmt="text")
line = "experts: routed as 1 calibration run recorded (hottest expert %.2fx its layer's mean)"
assert line % hottest in text, text
assert "experts: uniform routing (no calibration run recorded this model's routing)" in plan(fmt="text")
# a run without the load (a file from before /moe) calibrates the rates, not the routing
assert plan("--calibrate", uniform)["expert_routing"] == "uniform"
print("ok: hottest expert %.3fx its layer's mean; one-expert decode MLP bytes %.4f of uniform"
      % (hottest, got))
