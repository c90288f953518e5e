#!/usr/bin/python3
"""The ranking test of `tripar plan` (issue 13): calibrate on two measured runs of
plan_rank.yaml (one rank, and tp=2), plan every strategy of 2 ranks on this machine, then run
the predicted top 3 and bottom 3 for real. Passes when the measured latencies (each run's
/metrics median) keep the plan's order between the groups: the top 3 measure lower on average
than the bottom 3, and the predicted best measures lower than the predicted worst. Within a
group the strategies may swap (they are predicted within a few percent, closer than a shared
machine's noise). It asserts the ranking, never a time.
Usage: plan_ranking.py WORKDIR   (env: TRIPAR_BIN, TRIPAR_SOURCE_DIR, MPIEXEC)"""
import json
import os
import shutil
import subprocess
import sys

import h5py

BIN = os.environ["TRIPAR_BIN"]
SRC = os.environ["TRIPAR_SOURCE_DIR"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
JOB = os.path.join(SRC, "tests", "cli", "plan_rank.yaml")
CLUSTER = os.path.join(SRC, "data", "clusters", "this-machine.yaml")
WORK = sys.argv[1]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)


def run(name, np_, dp=1, tp=1, pp=1, microbatches=1, overlap=0, order="auto"):
    out = os.path.join(WORK, name + ".h5")
    sets = [f"parallel.dp={dp}", f"parallel.tp={tp}", f"parallel.pp={pp}",
            f"parallel.microbatches={microbatches}", f"parallel.overlap={'true' if overlap else 'false'}",
            f"parallel.order={order}"]
    args = [MPIEXEC, "-n", str(np_), "--oversubscribe", "--bind-to", "none", BIN, "run", JOB]
    for s in sets:
        args += ["--set", s]
    r = subprocess.run(args + ["--out", out], capture_output=True, text=True, timeout=240)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)}: {r.stdout}{r.stderr}")
    with h5py.File(out, "r") as f:
        return out, float(f["metrics"].attrs["latency_p50"])


calibration = [run("cal-r1", 1)[0], run("cal-tp2", 2, tp=2)[0]]
r = subprocess.run([BIN, "plan", JOB, "--cluster", CLUSTER, "--gpus", "2", "--calibrate", *calibration,
                    "--format", "json"], capture_output=True, text=True, timeout=60)
assert r.returncode == 0, r.stderr
rows = [s for s in json.loads(r.stdout)["strategies"] if s["fits"]]
assert len(rows) >= 6, rows
top, bottom = rows[:3], rows[-3:]
assert top[-1]["e2e_s"] < bottom[0]["e2e_s"], "the plan does not separate top from bottom"


def measure(rows, tag):
    out = []
    for i, s in enumerate(rows):
        _, latency = run(f"{tag}{i}", 2, s["dp"], s["tp"], s["pp"], s["microbatches"], s["overlap"], s["order"])
        label = f"dp{s['dp']}-tp{s['tp']}-pp{s['pp']} m{s['microbatches']}{' overlap' if s['overlap'] else ''} {s['order']}"
        print(f"{tag} {i + 1}: {label}: predicted {1e3 * s['e2e_s']:.2f} ms, measured {1e3 * latency:.2f} ms")
        out.append(latency)
    return out


measured_top, measured_bottom = measure(top, "top"), measure(bottom, "bottom")
mean = lambda v: sum(v) / len(v)  # noqa: E731
assert mean(measured_top) < mean(measured_bottom), \
    f"measured order differs from the plan: top {measured_top}, bottom {measured_bottom}"
assert measured_top[0] < measured_bottom[-1], \
    f"the predicted best measured slower than the predicted worst: {measured_top[0]} vs {measured_bottom[-1]}"
print("plan_ranking: OK")
