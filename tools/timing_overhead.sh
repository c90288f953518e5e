#!/usr/bin/env bash
# Benchmark (not a test): what `record.timings: layer` costs against `off` (and `step`), on the
# GPT-2 124M shape (jobs/bench-gpt2-124m.yaml) with a short prompt, runs interleaved so drift in
# the machine's load hits every level alike. Prints the median TPOT (decode step time) and
# latency per level and the overhead of each level over `off`; the target is <= 2% of the step.
#   tools/timing_overhead.sh [REPEATS] [--set KEY=VALUE ...]
#   NP=2 tools/timing_overhead.sh 3 --set parallel.tp=2      # a multi-rank variant
# Environment: TRIPAR_BIN (default build/tripar), MPIEXEC (mpirun), NP (1), OUT (a temp dir).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TRIPAR_BIN:-$root/build/tripar}
mpi=${MPIEXEC:-mpirun}
np=${NP:-1}
reps=3
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then reps=$1; shift; fi
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/timing_overhead.XXXXXX")}
mkdir -p "$out"
common=(--set input.synthetic.length=16 --set generate.new_tokens=32 --set bench.warmup=1
        --set bench.iterations=8 --set bench.roofline=false --set record.activations=[] "$@")
levels=(off step layer)
# The host cost of one event, from the real src/timing.c in a tight loop: with the number of
# events per decode step this bounds the overhead without the noise of whole runs.
cost=none
if command -v mpicc >/dev/null; then
    mpicc -O2 -std=gnu11 -DTRIPAR_VERSION=\"0\" -I"$root/src" -I"$root/kernels" -I"$root/parallel" \
        "$root/tools/timing_cost.c" "$root/src/timing.c" "$root/src/check.c" -o "$out/timing_cost" &&
        cost=$("$mpi" -n 1 "$out/timing_cost")
fi
for rep in $(seq "$reps"); do
    for level in "${levels[@]}"; do
        "$mpi" -n "$np" --oversubscribe "$bin" run "$root/jobs/bench-gpt2-124m.yaml" \
            --out "$out/$level.$rep.h5" --set record.timings="$level" "${common[@]}" >"$out/$level.$rep.log" 2>&1 ||
            { echo "run failed: $out/$level.$rep.log"; cat "$out/$level.$rep.log"; exit 1; }
        echo "rep $rep $level done" >&2
    done
done
/usr/bin/python3 - "$out" "$reps" "$cost" "${levels[@]}" <<'PY'
import re, sys, h5py, numpy as np
out, reps, cost, levels = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
res = {}
for level in levels:
    tpot, lat, events = [], [], 0
    for rep in range(1, reps + 1):
        with h5py.File("%s/%s.%d.h5" % (out, level, rep), "r") as f:
            tpot.extend(f["metrics/tpot"][...])
            lat.extend(f["metrics/latency"][...])
            events = sum(f["timings/%s/events" % k].shape[0] for k in f["timings"])
            shape = f.attrs["world_size"], f.attrs["tp"], f.attrs["pp"]
    # the minimum is the least disturbed by other load on a shared machine; the median shows spread
    res[level] = (float(np.min(tpot)), float(np.median(tpot)), float(np.median(lat)), events)
base, base_med = res["off"][0], res["off"][1]
print("timing overhead: GPT-2 124M shape, prompt 16, 32 new tokens, %d ranks (tp %d pp %d), "
      "%d runs x 8 iterations per level" % (shape[0], shape[1], shape[2], reps))
print("%-6s %13s %13s %13s %11s %11s %11s" % ("level", "TPOT min ms", "TPOT p50 ms",
      "latency p50", "events/run", "min vs off", "p50 vs off"))
for level in levels:
    t, m, l, n = res[level]
    print("%-6s %13.3f %13.3f %13.2f %11d %+10.2f%% %+10.2f%%" % (
        level, 1e3 * t, 1e3 * m, 1e3 * l, n, 100 * (t / base - 1), 100 * (m / base_med - 1)))
# Accounting: events a rank records per decode step at `layer` times the cost of one event.
with h5py.File("%s/layer.1.h5" % out, "r") as f:
    per_step = max(int(((e["step"] == 1) & (e["iteration"] == 0)).sum())
                   for e in (f["timings/%s/events" % k][...] for k in f["timings"]))
m = re.search(r"timer_begin\+timer_end ([0-9.]+) ns", cost)
if m:
    ns = float(m.group(1))
    print("accounting: %d events per decode step per rank x %.0f ns (%s) = %.1f us per step, "
          "%.3f%% of the %.3f ms step (off, min)" % (per_step, ns, cost.strip(), per_step * ns / 1e3,
                                                      100 * per_step * ns * 1e-9 / base, 1e3 * base))
PY
echo "files in $out"
