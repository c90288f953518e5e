#!/usr/bin/env python3
"""record.telemetry end to end: a real 2-rank run samples on every rank into /telemetry, on the
timing clock; record.telemetry 0 writes no /telemetry group; bad values exit 2 with file:line.

usage: test_telemetry.py MPIEXEC TRIPAR OUT_DIR  (the test env: TRIPAR_TEST_ENV)"""
import os
import subprocess
import sys
import time

import h5py
import numpy as np

mpiexec, tripar, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
RATE = 50
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def job_file(name, record_extra):
    # enough work to last well over 0.3 s on any machine this runs on: 100 generations
    path = os.path.join(out, name + ".yaml")
    with open(path, "w") as f:
        f.write("model:\n  synthetic: {layers: 4, heads: 4, embd: 256, vocab: 256, ctx: 64, seed: 1}\n"
                "backend: cpu\nparallel: {dp: 1, tp: 2, pp: 1}\n"
                "input:\n  tokens:\n    - [1, 2, 3, 4, 5, 6, 7, 8]\n    - [9, 10, 11, 12, 13, 14, 15, 16]\n"
                "generate: {new_tokens: 16}\nbench: {warmup: 1, iterations: 100}\n"
                "record:\n  out: %s\n  timings: layer\n%s" % (os.path.join(out, name + ".h5"), record_extra))
    return path


def run(name, record_extra, np_=2):
    job = job_file(name, record_extra)
    cmd = [mpiexec, "-n", str(np_), "--oversubscribe", "--bind-to", "none", tripar, "run", job]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return p, time.monotonic() - t0, job


# 1. samples on every rank, monotonic, within the run, plausible values
p, wall, _ = run("tel50", "  telemetry: %d\n" % RATE)
check(p.returncode == 0, "telemetry 50 run exits 0 (got %d: %s)" % (p.returncode, p.stderr[-2000:]))
with h5py.File(os.path.join(out, "tel50.h5"), "r") as f:
    g = f["telemetry"]
    check(g.attrs["rate_hz"] == RATE, "rate_hz attribute is %d" % RATE)
    check(b"off:" in g.attrs["nvml"], "nvml attribute says off on the cpu backend: %r" % g.attrs["nvml"])
    check(len(g.attrs["memory_bandwidth"]) > 0, "memory_bandwidth says where it comes from or why NaN")
    check(list(g.attrs["dropped"]) == [0, 0], "no sample dropped: %r" % g.attrs["dropped"])
    cores = os.cpu_count()
    for r in range(2):
        name = "rank_%05d" % r
        check(name in g, "/telemetry/%s exists" % name)
        s = g[name][:]
        ev = f["timings/%s/events" % name][:]
        span = float(ev["t_end"].max() - ev["t_start"].min())
        # the schedule gives span * RATE samples during the events alone; a quarter of that
        # leaves room for a starved sampler thread on an oversubscribed machine
        need = max(1, int(span * RATE) // 4)
        print("rank %d: %d samples over an event span of %.3f s (need >= %d)" % (r, len(s), span, need))
        check(len(s) >= need, "rank %d has >= %d samples (has %d)" % (r, need, len(s)))
        if len(s) == 0:
            continue
        t = s["t"]
        check(bool(np.all(np.diff(t) > 0)), "rank %d sample times strictly increase" % r)
        # the clock starts at the run's start (timer_init), after mpiexec started, and sampling
        # stops before the file is finished, so every t lies in [0, the command's wall time]
        check(t.min() >= 0 and t.max() <= wall, "rank %d times in [0, %.2f]: [%g, %g]" % (r, wall, t.min(), t.max()))
        u = s["cpu_util"]
        # One sample may show more than the cores (CPU time accounted at scheduler ticks, a
        # sampler preempted between its clock and getrusage: 2.35 of 2 cores seen on a busy
        # machine); 4x the cores still catches a unit slip (percent: 100x). Over the run those
        # errors cancel, the CPU deltas adding up to the run's own: at most the cores, with a
        # quarter for the two ends of the span.
        check(bool(np.all((u >= 0) & (u <= 4 * cores))), "rank %d cpu_util in [0, %d]: [%g, %g]" % (r, 4 * cores, u.min(), u.max()))
        if len(s) > 1:
            mean = float(np.sum(u[1:] * np.diff(t)) / (t[-1] - t[0]))
            check(mean <= 1.25 * cores, "rank %d mean cpu_util %.2f <= 1.25 x %d cores" % (r, mean, cores))
        check(bool(np.all(s["rss_bytes"] > 0)), "rank %d rss_bytes > 0" % r)
        for field in ("gpu_sm_util", "gpu_power_w", "gpu_sm_clock_mhz"):
            check(bool(np.all(np.isnan(s[field]))), "rank %d %s is NaN on the cpu backend" % (r, field))

# the report's per-phase telemetry table, text and JSON
rep = subprocess.run([tripar, "report", os.path.join(out, "tel50.h5"), "--json", os.path.join(out, "tel50.json")],
                     capture_output=True, text=True, timeout=300)
check(rep.returncode == 0, "report exits 0 (%s)" % rep.stderr[-500:])
check("telemetry per phase" in rep.stdout, "report prints the telemetry per phase table:\n" + rep.stdout[-3000:])
import json
with open(os.path.join(out, "tel50.json")) as jf:
    j = json.load(jf)
tel = j["runs"][0].get("telemetry")
check(tel is not None and "mlp_gemm" in tel.get("phases", {}), "report --json carries telemetry per phase: %r" % (tel,))
if tel and "mlp_gemm" in tel.get("phases", {}):
    row = tel["phases"]["mlp_gemm"]
    check(row["samples"] >= 1 and row["rss_bytes"] > 0, "mlp_gemm averages over samples inside it: %r" % row)

# 2. record.telemetry 0: no /telemetry at all, and report prints nothing extra
p, _, _ = run("tel0", "  telemetry: 0\n")
check(p.returncode == 0, "telemetry 0 run exits 0")
with h5py.File(os.path.join(out, "tel0.h5"), "r") as f:
    check("telemetry" not in f, "record.telemetry 0 writes no /telemetry group")
rep = subprocess.run([tripar, "report", os.path.join(out, "tel0.h5")], capture_output=True, text=True, timeout=300)
check(rep.returncode == 0 and "telemetry per phase" not in rep.stdout, "report of a file without /telemetry prints no telemetry")

# 2b. a run stopped by SIGTERM leaves a partial file (complete=0) that keeps every rank's
# samples so far: the final write happens on the stop path too
import glob
import signal
job = job_file("telterm", "  telemetry: %d\n  flush_every: 20\n" % RATE)
with open(job) as jf:
    text = jf.read().replace("iterations: 100", "iterations: 100000")
with open(job, "w") as jf:
    jf.write(text)
for stale in glob.glob(os.path.join(out, "telterm.h5.partial.*")):
    os.remove(stale)  # an earlier run's
proc = subprocess.Popen([mpiexec, "-n", "2", "--oversubscribe", "--bind-to", "none", tripar, "run", job],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
partial = []
deadline = time.monotonic() + 120
while not partial and time.monotonic() < deadline and proc.poll() is None:
    time.sleep(0.1)
    partial = glob.glob(os.path.join(out, "telterm.h5.partial.*"))
time.sleep(1.0)  # generating by now: the file is created after the model is built
proc.send_signal(signal.SIGTERM)
_, err = proc.communicate(timeout=300)
check(proc.returncode != 0, "the stopped run exits non-zero (got %d)" % proc.returncode)
check(len(partial) == 1, "the run created one partial file: %r" % partial)
if partial:
    with h5py.File(partial[0], "r") as f:
        check(int(f.attrs["complete"]) == 0, "the partial file says complete=0")
        for r in range(2):
            n = len(f["telemetry/rank_%05d" % r]) if "telemetry/rank_%05d" % r in f else 0
            check(n >= 1, "the partial file keeps rank %d's samples (%d)" % (r, n))

# 3. bad values: exit 2, one message with the file, the line and the allowed range
for bad in ("-1", "1001", "fast"):
    p, _, job = run("telbad", "  telemetry: %s\n" % bad, np_=2)
    check(p.returncode == 2, "record.telemetry %s exits 2 (got %d)" % (bad, p.returncode))
    want = ("record.telemetry = %s is out of range; allowed: 0 to 1000" % bad) if bad != "fast" else \
        "record.telemetry: expected an integer"
    check(want in p.stderr and ("%s:14" % job) in p.stderr,
          "record.telemetry %s says %r at %s:14: %s" % (bad, want, job, p.stderr[-600:]))
    check(p.stderr.count(want) == 1, "the message is printed once (rank 0)")

# 4. tools/plot.py timeline overlays the series on a second axis (test_plot.py's pattern: a
# non-empty PNG), GPU SM utilisation when a rank has it; skipped without matplotlib
try:
    import matplotlib  # noqa: F401
    have_mpl = True
except ImportError:
    have_mpl = False
    print("plot checks skipped: no matplotlib")
if have_mpl:
    plot = os.path.join(os.environ["TRIPAR_SOURCE_DIR"], "tools", "plot.py")

    def timeline(run_file, *extra):
        png = os.path.join(out, os.path.basename(run_file) + ".png")
        p = subprocess.run([sys.executable, plot, "timeline", run_file, "-o", png] + list(extra),
                           capture_output=True, text=True, timeout=300)
        ok = p.returncode == 0 and os.path.getsize(png) > 10000
        check(ok, "plot.py timeline %s draws a PNG: %s" % (run_file, p.stderr[-800:]))
        return p.stdout

    check("telemetry cpu_util" in timeline(os.path.join(out, "tel50.h5")),
          "the timeline overlays cpu_util on the cpu backend")
    check(", telemetry " not in timeline(os.path.join(out, "tel50.h5"), "--telemetry", "none"),
          "--telemetry none draws no overlay")
    check(", telemetry " not in timeline(os.path.join(out, "tel0.h5")),
          "a file without /telemetry gets no overlay")
    # the same file with GPU fields planted, as NVML would fill them: auto picks the SM use
    gpu = os.path.join(out, "tel50_gpu.h5")
    with h5py.File(os.path.join(out, "tel50.h5"), "r") as src, h5py.File(gpu, "w") as dst:
        for k, v in src.attrs.items():
            dst.attrs[k] = v
        for name in ("timings", "mesh", "telemetry"):
            src.copy(name, dst)
        for r in range(2):
            d = dst["telemetry/rank_%05d" % r]
            s = d[...]
            s["gpu_sm_util"] = np.linspace(10, 90, len(s))
            d[...] = s
    check("telemetry gpu_sm_util" in timeline(gpu), "auto overlays gpu_sm_util when present")

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("ok")
