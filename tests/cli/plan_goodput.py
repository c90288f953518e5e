#!/usr/bin/python3
"""`tripar plan --rate` end to end (docs/planner.md "Goodput under an arrival rate"): JSON says
the stream (rate_rps, stream_seconds) and gives every strategy its `served` object,
ranked by goodput; a rate far below capacity with loose targets gives every strategy a goodput
of exactly the rate; a rate far above it keeps every goodput within its capacity; CSV appends
the same columns and text shows the stream and the goodput columns; without --rate none of it
appears (rate_rps and stream_seconds null, no `served`). --validate on a real arrival-rate run prints a row for its stream. No time asserted.
Usage: plan_goodput.py WORKDIR (env: TRIPAR_BIN, TRIPAR_SOURCE_DIR)"""
import csv
import io
import json
import os
import subprocess
import sys

BIN = os.environ["TRIPAR_BIN"]
SRC = os.environ["TRIPAR_SOURCE_DIR"]
CLUSTER = os.path.join(SRC, "data", "clusters", "this-machine.yaml")
WORK = sys.argv[1]
os.makedirs(WORK, exist_ok=True)
SERVED = ["goodput_rps", "slo_attainment", "load_ttft_p50_s", "load_ttft_p90_s", "load_tpot_p50_s",
          "load_tpot_p90_s", "mean_batch", "capacity_rps", "arrived", "served", "met"]


def run(*args):
    # `tripar run` starts MPI, whose allocations outlive MPI_Finalize (tests/cli/tools.cmake):
    # leak checking stays on for `tripar plan` alone
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0") if args[0] == "run" else None
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300, env=env)
    if r.returncode != 0:
        sys.exit(f"FAIL: tripar {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r.stdout


def plan(*args, fmt="json"):
    out = run("plan", "--preset", "gpt2-124m", "--cluster", CLUSTER, "--gpus", "2", "--batch", "4",
              "--prompt", "32", "--new-tokens", "8", *args, "--format", fmt)
    return json.loads(out) if fmt == "json" else out


def fail(msg):
    sys.exit(f"FAIL: {msg}")


# A stream of 3 requests/s with 2000 expected: the header and every fitting row
doc = plan("--rate", "3", "--ttft", "2", "--tpot", "0.2")
if doc["rate_rps"] != 3 or abs(doc["stream_seconds"] - 2000 / 3) > 1e-9 or doc["objective"] != "goodput":
    fail(f"stream header: {doc['rate_rps']} {doc['stream_seconds']} {doc['objective']}")
rows = [r for r in doc["strategies"] if r["fits"]]
for r in rows:
    s = r["served"]
    if sorted(s) != sorted(SERVED):
        fail(f"served keys {sorted(s)}")
    if not 0 <= s["met"] <= s["served"] <= s["arrived"] or s["arrived"] < 1000:
        fail(f"counts {s}")
    if abs(s["goodput_rps"] - 3 * s["met"] / s["arrived"]) > 1e-9:
        fail(f"goodput != rate x met / arrived: {s}")
    if abs(s["slo_attainment"] - s["met"] / s["arrived"]) > 1e-9:
        fail(f"attainment: {s}")
    if not s["load_ttft_p50_s"] <= s["load_ttft_p90_s"] or not s["load_tpot_p50_s"] <= s["load_tpot_p90_s"]:
        fail(f"percentiles out of order: {s}")
    if abs(s["capacity_rps"] - 4 / r["e2e_s"]) > 1e-9 * s["capacity_rps"]:
        fail(f"capacity != batch / E2E: {s} {r['e2e_s']}")
goodputs = [r["served"]["goodput_rps"] for r in rows]
if goodputs != sorted(goodputs, reverse=True):
    fail(f"not ranked by goodput: {goodputs}")

# Far below capacity, loose targets: every request meets both, goodput = rate exactly
for r in plan("--rate", "0.01", "--ttft", "100", "--tpot", "10")["strategies"]:
    if r["fits"] and (r["served"]["goodput_rps"] != 0.01 or r["served"]["met"] != r["served"]["arrived"]):
        fail(f"light load: {r['served']}")
# Far above: within the capacity, most requests never served in the loop's 2 x duration
for r in plan("--rate", "1000", "--ttft", "1", "--tpot", "1", "--duration", "20")["strategies"]:
    s = r["served"]
    if r["fits"] and not (s["goodput_rps"] <= s["capacity_rps"] and s["served"] < s["arrived"]):
        fail(f"overload: {s}")
# --objective latency with --rate keeps its order and still reports goodput
doc = plan("--rate", "3", "--ttft", "2", "--tpot", "0.2", "--objective", "latency")
e2e = [r["e2e_s"] for r in doc["strategies"] if r["fits"]]
if doc["objective"] != "latency" or e2e != sorted(e2e) or "served" not in doc["strategies"][0]:
    fail("--objective latency with --rate")

# CSV appends the columns; text names the stream and shows the goodput columns
text = plan("--rate", "3", "--ttft", "2", "--tpot", "0.2", fmt="text")
if "stream: 3 requests/s, Poisson, for 666.667 s (seed 1)" not in text or "goodput" not in text \
        or "met %" not in text or "p90 TTFT ms" not in text:
    fail(f"text:\n{text}")
table = list(csv.DictReader(io.StringIO(plan("--rate", "3", "--ttft", "2", "--tpot", "0.2", fmt="csv"))))
if list(table[0])[-len(SERVED):] != SERVED:
    fail(f"CSV columns {list(table[0])}")
first = plan("--rate", "3", "--ttft", "2", "--tpot", "0.2")["strategies"][0]
if abs(float(table[0]["goodput_rps"]) - first["served"]["goodput_rps"]) > 1e-6:
    fail("CSV and JSON disagree")

# Without --rate: no stream anywhere
doc = plan()
if doc["rate_rps"] is not None or doc["stream_seconds"] is not None or "served" in doc["strategies"][0]:
    fail("a stream without --rate")
if "goodput_rps" in plan(fmt="csv").splitlines()[0] or "stream:" in plan(fmt="text"):
    fail("goodput columns without --rate")

# --validate on a real arrival-rate run (a tiny model, 1 s at 20 requests/s) and a plain one
job = os.path.join(SRC, "tests", "cli", "tools_tiny.yaml")
plain, streamed = os.path.join(WORK, "plain.h5"), os.path.join(WORK, "stream.h5")
for path in (plain, streamed):
    if os.path.exists(path):
        os.remove(path)
run("run", job, "--out", plain)
run("run", job, "--out", streamed, "--set", "bench.arrival_rate=20", "--set", "bench.duration=1")
text = run("plan", "--validate", plain, streamed, "--cluster", CLUSTER, "--ttft", "1", "--tpot", "1")
lines = text.splitlines()
head = [i for i, l in enumerate(lines) if l.startswith("arrival streams")]
if len(head) != 1:
    fail(f"--validate: no arrival streams table:\n{text}")
rows = [l for l in lines[head[0] + 2:] if l.startswith("stream.h5")]
if len(rows) != 1 or " 20.00 " not in rows[0]:
    fail(f"--validate: the stream's row:\n{text}")
if not any(l.startswith("|relative error| over 1 streams: TTFT p50 median") for l in lines):
    fail(f"--validate: the stream summary:\n{text}")
if any(l.startswith("plain.h5") for l in lines[head[0]:]):
    fail("--validate: a run without a stream in the streams table")
print("plan_goodput: OK")
