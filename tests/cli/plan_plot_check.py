#!/usr/bin/python3
"""`tools/plot.py plan` on real `tripar plan` output (docs/planner.md, "Output"): plans of one
model at two batch sizes give a PNG and a front CSV, and the front is exactly the Pareto set:
no fitting strategy beats a front point on both latency and throughput, and every fitting
strategy off the front is beaten by a front point. The title speaks of the SLO (hollow
markers) only when a plan was given one, and says when one batch size makes the front a single
point (read from an SVG with its text kept as text, svg.fonttype: none).
Usage: plan_plot_check.py WORKDIR  (env: TRIPAR_BIN, TRIPAR_SOURCE_DIR)"""
import csv
import json
import os
import subprocess
import sys

BIN, SRC, WORK = os.environ["TRIPAR_BIN"], os.environ["TRIPAR_SOURCE_DIR"], sys.argv[1]
os.makedirs(WORK, exist_ok=True)
for name in os.listdir(WORK):
    os.remove(os.path.join(WORK, name))
plans = []
for batch in (1, 4):
    out = os.path.join(WORK, f"plan-b{batch}.json")
    subprocess.run([BIN, "plan", "--preset", "gpt2-124m", "--cluster",
                    os.path.join(SRC, "data", "clusters", "this-machine.yaml"), "--batch",
                    str(batch), "--prompt", "64", "--new-tokens", "8", "--format", "json", "-o",
                    out], check=True)
    plans.append(out)
png, front_csv = os.path.join(WORK, "plan.png"), os.path.join(WORK, "front.csv")
subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "plot.py"), "plan", *plans, "-o",
                png, "--front", front_csv], check=True)
if os.path.getsize(png) < 1000:
    sys.exit("FAIL: the plot is empty")

fits = []
for path in plans:
    doc = json.load(open(path))
    fits += [(s["e2e_s"], s["tokens_per_s"]) for s in doc["strategies"] if s["fits"]]
front = [(float(r["e2e_s"]), float(r["tokens_per_s"])) for r in csv.DictReader(open(front_csv))]
if not front:
    sys.exit("FAIL: an empty front")


# the front CSV holds 9 significant digits: a strategy beats another by more than that
TOL = 1e-8


def beats(a, b):
    return (a[0] <= b[0] * (1 + TOL) and a[1] >= b[1] * (1 - TOL)
            and (a[0] < b[0] * (1 - TOL) or a[1] > b[1] * (1 + TOL)))


def close(a, b):
    return abs(a[0] - b[0]) <= 1e-6 * b[0] and abs(a[1] - b[1]) <= 1e-6 * b[1]


for f in front:
    if any(beats(p, f) for p in fits):
        sys.exit(f"FAIL: front point {f} is beaten by another strategy")
for p in fits:
    if not any(close(p, f) for f in front) and not any(beats(f, p) for f in front):
        sys.exit(f"FAIL: {p} is off the front but no front point beats it")

# The title's words, from SVGs whose text stays text (matplotlibrc: svg.fonttype none)
with open(os.path.join(WORK, "matplotlibrc"), "w") as f:
    f.write("svg.fonttype: none\n")
env = dict(os.environ, MATPLOTLIBRC=os.path.join(WORK, "matplotlibrc"))
slo = os.path.join(WORK, "plan-b4-slo.json")
subprocess.run([BIN, "plan", "--preset", "gpt2-124m", "--cluster",
                os.path.join(SRC, "data", "clusters", "this-machine.yaml"), "--batch", "4",
                "--prompt", "64", "--new-tokens", "8", "--tpot", "0.03", "--format", "json",
                "-o", slo], check=True)


def title_text(*plan_files):
    svg = os.path.join(WORK, "title.svg")
    subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "plot.py"), "plan",
                    *plan_files, "-o", svg], check=True, env=env, stdout=subprocess.DEVNULL)
    return open(svg).read()


HOLLOW, ONE_BATCH = "hollow: misses the SLO", "one batch size (1)"
both = title_text(*plans)
if HOLLOW in both or "one batch size" in both:
    sys.exit("FAIL: no SLO and two batch sizes, yet the title speaks of the SLO or one batch")
one = title_text(plans[0])
if ONE_BATCH not in one or HOLLOW in one:
    sys.exit("FAIL: one batch size, no SLO: the title should say the front is one point, "
             "and not speak of the SLO")
with_slo = title_text(plans[0], slo)
if HOLLOW not in with_slo or "one batch size" in with_slo:
    sys.exit("FAIL: with an SLO the title says what hollow markers mean")
print(f"PASS: {len(fits)} fitting strategies at batch 1 and 4, {len(front)} on the front; "
      "the title's SLO and one-batch words only where they apply")
