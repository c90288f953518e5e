"""tripar report says what it cannot know (issue 32), on real runs of tools_tiny.yaml (one rank,
no mpirun) and files derived from them with h5py:
  step.h5     record.timings: step, 1 iteration: the compute/communication shares and the
              slowest rank read "not measured at this timing level" and name record.timings:
              layer (JSON null), the bubble is still given; percentiles of 1 iteration warn
  layer.h5    record.timings: layer, 3 iterations: shares given, no such note, no warning
  notel.h5    layer.h5 with its telemetry samples removed: one line, not an empty table
  cut.h5      a 3-iteration step run whose last iteration event is gone, as a run killed inside
              its last iteration leaves it (its steps flushed, its iteration event still open):
              step must not exceed iteration
Times read in milliseconds, mean beside p50/p90/p99, for latency, TTFT, TPOT and ITL, equal to
/metrics (seconds) x 1000.
usage: report_check.py TRIPAR WORKDIR"""
import json
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

tripar, work = sys.argv[1], sys.argv[2]
job = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools_tiny.yaml")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


def expect(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def path(name):
    return os.path.join(work, name)


def run(out, *sets):
    args = [tripar, "run", job, "--out", path(out)]
    for s in sets:
        args += ["--set", s]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        sys.exit("tripar run %s: exit %d\n%s%s" % (out, done.returncode, done.stdout, done.stderr))
    return done.stdout


def report(*names):
    js = path("report.json")
    done = subprocess.run([tripar, "report", *[path(n) for n in names], "--json", js],
                          capture_output=True, text=True, timeout=120)
    expect(done.returncode == 0, "report %s: exit %d\n%s" % (names, done.returncode, done.stderr))
    with open(js) as f:
        return done.stdout, json.load(f)["runs"]


headline = run("step.h5", "record.timings=step", "bench.iterations=1")
run("layer.h5", "record.timings=layer", "bench.iterations=3")
run("cut_src.h5", "record.timings=step", "bench.iterations=3")

# the run's own table: ITL and the mean beside the percentiles, and the warning
expect(re.search(r"\n {16}ITL +mean +[0-9.]+ +p50 +[0-9.]+ +p90 +[0-9.]+ +p99 +[0-9.]+ ms\n",
                 headline), "run table lacks the ITL row with its mean:\n" + headline)
expect("percentiles of 1 measured iteration: p90 and p99 need 3 or more" in headline,
       "run table does not warn about 1 iteration:\n" + headline)

# 1. step level, one iteration
text, runs = report("step.h5")
expect("not measured at this timing level" in text and "record.timings: layer" in text,
       "step-level report does not say the shares are not measured:\n" + text)
expect(not re.search(r"compute [0-9.]+%", text), "step-level report prints a compute share:\n" + text)
expect(re.search(r"pipeline bubble [0-9.]+%", text), "the bubble is measured at step:\n" + text)
expect("warning: percentiles of 1 measured iteration" in text, "no warning for 1 iteration:\n" + text)
r = runs[0]
expect(r["compute_frac"] is None and r["comm_frac"] is None and r["exposed_comm_frac"] is None
       and r["slowest_rank"] is None and r["bubble_frac"] is not None,
       "step-level JSON shares: %s" % {k: r[k] for k in ("compute_frac", "comm_frac",
                                                         "exposed_comm_frac", "slowest_rank",
                                                         "bubble_frac")})

# milliseconds in the text, seconds in the file and JSON
with h5py.File(path("step.h5"), "r") as f:
    g = f["metrics"]
    itl = g["itl"][...]
    expect(itl.size == 5 and np.all(itl > 0), "1 iteration x 1 replica x 5 decode gaps: %s" % itl)
    expect(abs(g.attrs["itl_mean"] - itl.mean()) <= 1e-12, "itl_mean is the mean of /metrics/itl")
    for name, label in (("latency", "latency"), ("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL")):
        want = " ".join("%s %.3f" % (q, 1e3 * g.attrs["%s_%s" % (name, q)])
                        for q in ("mean", "p50", "p90", "p99"))
        m = re.search(r"\n  %s +mean +([0-9.]+) +p50 +([0-9.]+) +p90 +([0-9.]+) +p99 +([0-9.]+) ms\n"
                      % label, text)
        got = m and " ".join("%s %s" % (q, v) for q, v in zip(("mean", "p50", "p90", "p99"),
                                                            m.groups()))
        expect(got == want, "%s row: %s, want %s (ms)\n%s" % (label, got, want, text))
    expect(abs(r["itl_s"] - g.attrs["itl_mean"]) <= 1e-12, "JSON itl_s in seconds")

# 2. layer level, three iterations: shares measured, no note, no warning
text, runs = report("layer.h5")
expect("not measured" not in text and re.search(r"compute [0-9.]+%", text),
       "layer-level report:\n" + text)
expect("warning: percentiles" not in text, "3 iterations must not warn:\n" + text)
expect(runs[0]["compute_frac"] is not None and runs[0]["slowest_rank"] is not None,
       "layer-level JSON shares")

# 2b. the comparison of both: its legend once, and the note for the step-level run
text, runs = report("step.h5", "layer.h5")
expect(text.count("(TTFT, TPOT, ITL: means") == 1,
       "comparison legend printed %d times:\n%s" % (text.count("(TTFT, TPOT, ITL: means"), text))
expect("(compute, comm, exposed \"-\": not measured at this timing level" in text,
       "comparison lacks the note for its step-level run:\n" + text)
text, runs = report("layer.h5", "layer.h5")
expect("(compute, comm, exposed" not in text, "two layer-level runs need no note:\n" + text)

# 3. telemetry without samples: one line, no empty table
shutil.copyfile(path("layer.h5"), path("notel.h5"))
with h5py.File(path("notel.h5"), "a") as f:
    for d in f["telemetry"].values():
        d.resize((0,))
text, _ = report("notel.h5")
expect("telemetry per phase" not in text and re.search(r"\n  telemetry: 0 samples at [0-9]+ Hz", text),
       "telemetry without samples:\n" + text)

# 4. a run cut inside its last iteration
shutil.copyfile(path("cut_src.h5"), path("cut.h5"))
with h5py.File(path("cut.h5"), "a") as f:
    ev = f["timings/rank_00000/events"]
    rows = ev[...]
    phase_names = {v: k for k, v in h5py.check_enum_dtype(ev.dtype["phase"]).items()}
    last = max(rows["iteration"])
    keep = rows[~((rows["iteration"] == last) &
                  (np.array([phase_names[p] for p in rows["phase"]]) == "iteration"))]
    expect(len(keep) == len(rows) - 1, "one iteration event removed")
    ev.resize((len(keep),))
    ev[...] = keep
    f.attrs.modify("complete", np.int64(0))
text, runs = report("cut.h5")
ph = runs[0]["phases"]
step, iteration = ph["step"]["median_s"], ph["iteration"]["median_s"]
expect(step <= iteration, "cut run: step %.6f s > iteration %.6f s\n%s" % (step, iteration, text))
# the steps counted are those of the two finished iterations
steps_kept = sum(r["t_end"] - r["t_start"] for r in keep
                 if phase_names[r["phase"]] == "step" and 0 <= r["iteration"] < last)
expect(abs(step - steps_kept) <= 1e-9, "cut run: step %.9f, want the finished iterations' %.9f"
       % (step, steps_kept))

if failures:
    sys.exit("%d check(s) failed" % len(failures))
print("report checks passed")
