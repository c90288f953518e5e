#!/usr/bin/python3
"""`tripar explain` on planted differences (issue 16, item 1): real small runs, then files
derived from them with h5py in which one cause is planted with a known size, and explain must
find it, with the right size, every other bucket unchanged, and the parts summing to the total.

  explain_plant.py make WORKDIR          real runs + planted files (env: TRIPAR_BIN,
                                         TRIPAR_SOURCE_DIR, MPIEXEC)
  explain_plant.py check WORKDIR CASE    CASE: mlp | bubble | gap | cancel | formats

The plants (PLANT_S seconds each, on each measured iteration's critical rank, the rank whose
iteration event ends last, as explain defines it; docs/explain.md):
  mlp.h5     from base.h5: every mlp_gemm event made PLANT_S longer
  bubble.h5  from pp2.h5 (pp=2, 2 micro-batches): every pp_recv_wait made PLANT_S longer
  gap.h5     from base.h5: PLANT_S of nothing inserted after each embed
  cancel_base.h5, cancel_other.h5  from base.h5: every decode step's mlp_gemm made PLANT_S
             longer, and the prefill's longer by as much in all (the same latency)
Every later timestamp of that rank in the iteration moves by the time planted before it (so a
step or iteration enclosing a planted event ends later), and every timestamp of every rank in
later iterations by all the time planted in earlier ones, so the iterations stay ordered and
the critical rank stays the one planted. /metrics latency, ttft and tpot (series and summaries)
are updated by the same amounts, so the files agree with themselves; explain's numbers come
from the events either way.
"""
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys

import h5py
import jsonschema
import numpy as np

TRIPAR = os.environ["TRIPAR_BIN"]
SRC = os.environ["TRIPAR_SOURCE_DIR"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
JOB = os.path.join(SRC, "tests/cli/tools_tiny.yaml")
PLANT_S = 1e-3  # far above the tiny model's phase times, so the planted rank stays critical
BENCH = ["bench.warmup=1", "bench.iterations=3"]
ROWS = ("embed", "norm", "qkv_gemm", "attention", "attn_out_gemm", "mlp_gemm", "head", "sample",
        "tp_wait", "pp_recv_wait", "pp_send", "dp_gather", "sample_wait", "nll_wait", "stop_wait",
        "host_gap")
# rows of phases only some runs record (expert parallelism across replicas): work kinds, which
# join the work rows after sample, and waits
OPTIONAL_ROWS = ("ep_expert",)
SCHEMA = os.path.join(SRC, "docs/explain.schema.json")


def validate(out):
    """explain's JSON against docs/explain.schema.json (every number a number, every field
    named there)."""
    with open(SCHEMA) as f:
        jsonschema.validate(out, json.load(f))


def run(args, expect=0):
    done = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=240)
    assert done.returncode == expect, "%s exited %d, not %d\n%s\n%s" % (
        " ".join(args), done.returncode, expect, done.stdout, done.stderr)
    return done


def tripar_run(work, name, ranks, *sets):
    args = [TRIPAR, "run", JOB, "--out", os.path.join(work, name + ".h5")]
    if ranks > 1:
        args = [MPIEXEC, "-n", str(ranks), "--oversubscribe", "--bind-to", "none"] + args
    for s in list(BENCH) + list(sets):
        args += ["--set", s]
    run(args)


# ---- planting ----

def load_events(f):
    world = int(f.attrs["world_size"])
    events = [f["timings/rank_%05d/events" % r][()] for r in range(world)]
    names = h5py.check_enum_dtype(events[0].dtype["phase"])
    pp_rank = f["mesh"][()]["pp_rank"]
    return events, names, pp_rank


def critical_ranks(events, names, pp_rank):
    """Per measured iteration, the rank whose iteration event ends last (ties: the later
    pipeline stage, then the higher rank), and every rank's iteration end."""
    it = names["iteration"]
    n_it = 1 + max(int(ev["iteration"][ev["phase"] == it].max()) for ev in events)
    ends = np.zeros((len(events), n_it))
    for r, ev in enumerate(events):
        sel = (ev["phase"] == it) & (ev["iteration"] >= 0)
        ends[r, ev["iteration"][sel]] = ev["t_end"][sel]
    crit = []
    for j in range(n_it):
        c = 0
        for r in range(1, len(events)):
            if ends[r, j] > ends[c, j] or (ends[r, j] == ends[c, j] and pp_rank[r] >= pp_rank[c]):
                c = r
        crit.append(c)
    return crit, ends


def plant(src, dst, phase, mode, steps="all", amount=PLANT_S):
    """Plants `amount` seconds per `phase` event of each measured iteration's critical rank, in
    the steps named ('all', 'prefill': step 0, 'decode': the later ones): mode 'lengthen' makes
    the event longer, 'gap_after' inserts idle time after it. Returns the
    planted counts per iteration (total, and in step 0 when the rank is a last stage) and the
    critical rank of each iteration (on a busy machine it need not be the same rank in all)."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "a") as f:
        events, names, pp_rank = load_events(f)
        crit, ends = critical_ranks(events, names, pp_rank)
        n_it, last_stage = len(crit), int(f.attrs["pp"]) - 1
        points, counts, first = [], [], []
        for j, c in enumerate(crit):
            ev = events[c]
            sel = (ev["phase"] == names[phase]) & (ev["iteration"] == j)
            if steps != "all":
                sel &= (ev["step"] == 0) if steps == "prefill" else (ev["step"] > 0)
            points.append(np.sort(ev["t_end"][sel]))
            counts.append(int(sel.sum()))
            first.append(int((sel & (ev["step"] == 0)).sum()) if pp_rank[c] == last_stage else None)
        before = np.concatenate([[0], np.cumsum(counts)]) * amount  # planted in iterations < j
        last_end = ends[:, -1].max()
        for r, ev in enumerate(events):
            for field in ("t_start", "t_end"):
                t = ev[field].copy()
                tag = ev["iteration"]
                shift = np.where(tag >= 0, before[np.clip(tag, 0, n_it - 1)],
                                 np.where(t > last_end, before[-1], 0.0))
                for j, c in enumerate(crit):
                    if c != r:
                        continue
                    mine = tag == j
                    # an event ends after a planted end, or starts at or after it
                    side = "right" if (mode == "lengthen" or field == "t_start") else "left"
                    shift[mine] += amount * np.searchsorted(points[j], t[mine], side=side)
                ev[field] = t + shift
            f["timings/rank_%05d/events" % r][...] = ev
        metrics_shift(f, counts, first, amount)
    return counts, first, [int(c) for c in crit]


def metrics_shift(f, counts, first, amount):
    """The /metrics series and summaries moved by the planted time of each iteration."""
    m = f["metrics"]
    lat = m["latency"][()] + amount * np.array(counts)
    ttft = m["ttft"][()] + amount * np.array([c or 0 for c in first])
    steps = steps_of(f)  # max(new_tokens, 1)
    tpot = (lat - ttft) / (steps - 1) if steps > 1 else np.zeros_like(lat)
    for name, series in (("latency", lat), ("ttft", ttft), ("tpot", tpot)):
        m[name][...] = series
        m.attrs.modify(name + "_mean", np.float64(series.mean()))
        for p in (50, 90, 99):
            m.attrs.modify("%s_p%d" % (name, p), np.float64(np.percentile(series, p)))


def steps_of(f):
    events, names, _ = load_events(f)
    return 1 + max(int(ev["step"][(ev["phase"] == names["step"]) & (ev["iteration"] >= 0)].max())
                   for ev in events)


def make(work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    tripar_run(work, "base", 1)
    tripar_run(work, "pp2", 2, "parallel.pp=2", "parallel.microbatches=2")
    tripar_run(work, "layers3", 1, "model.synthetic.layers=3")
    tripar_run(work, "int8w", 1, "model.precision=int8w")
    tripar_run(work, "steplevel", 1, "record.timings=step")
    tripar_run(work, "embd32", 1, "model.synthetic.embd=32")
    planted = {}
    for case, src, phase, mode in (("mlp", "base", "mlp_gemm", "lengthen"),
                                   ("bubble", "pp2", "pp_recv_wait", "lengthen"),
                                   ("gap", "base", "embed", "gap_after")):
        counts, first, crit = plant(os.path.join(work, src + ".h5"),
                                    os.path.join(work, case + ".h5"), phase, mode)
        planted[case] = {"src": src, "counts": counts, "first": first, "critical": crit}
    # a slower first token that faster decode steps pay back exactly: BASE is base with every
    # decode step's mlp_gemm lengthened, OTHER with the prefill's lengthened by as much in all
    with h5py.File(os.path.join(work, "base.h5"), "r") as f:
        events, names, _ = load_events(f)
        ev = events[0][(events[0]["phase"] == names["mlp_gemm"]) & (events[0]["iteration"] == 0)]
        in_prefill, in_decode = int((ev["step"] == 0).sum()), int((ev["step"] > 0).sum())
    plant(os.path.join(work, "base.h5"), os.path.join(work, "cancel_base.h5"), "mlp_gemm",
          "lengthen", "decode")
    plant(os.path.join(work, "base.h5"), os.path.join(work, "cancel_other.h5"), "mlp_gemm",
          "lengthen", "prefill", PLANT_S * in_decode / in_prefill)
    planted["cancel"] = {"prefill_s": PLANT_S * in_decode}
    with open(os.path.join(work, "planted.json"), "w") as f:
        json.dump(planted, f)


# ---- checks ----

def explain(work, *files, fmt="json"):
    done = run([TRIPAR, "explain"] + [os.path.join(work, p) for p in files] + ["--format", fmt])
    if fmt != "json":
        return done.stdout
    out = json.loads(done.stdout)
    validate(out)
    return out


def rows_of(other, quantity, kind=None):
    return [r for r in other["rows"] if r["quantity"] == quantity and (kind is None or
                                                                       r["kind"] == kind)]


def check_sums(other):
    """The buckets sum to the total, the total is the measured difference, every bucket's layer
    rows and its outside-layers row sum to it, the shares to 1."""
    run_o = other["run"]
    for q in ("ttft", "tpot", "e2e"):
        agg = [r for r in rows_of(other, q) if r["kind"] in ("phase", "comm", "gap")]
        total = [r for r in rows_of(other, q, "total")][0]
        names = [r["bucket"] for r in agg]
        # the documented rows, in order; a wait phase the run file's enum adds (sample_wait)
        # joins the waits, before the host gap
        extra = [n for n in names if n not in ROWS and n not in OPTIONAL_ROWS]
        assert all(n.endswith("_wait") for n in extra), names
        assert [n for n in names if n in ROWS] == list(ROWS) and names[-1] == "host_gap", names
        s = sum(r["diff_s"] for r in agg)
        # the buckets' differences cancel to a total that may be exactly 0 (a decode-only plant
        # leaves TTFT alone), so rounding is measured against the times they are taken from
        scale = max(abs(total["diff_s"]), total["base_s"], total["other_s"], 1e-12)
        assert abs(s - total["diff_s"]) <= 1e-9 * scale, (q, s, total["diff_s"])
        assert abs(sum(r["base_s"] for r in agg) - total["base_s"]) <= 1e-9 * total["base_s"]
        assert abs(sum(r["other_s"] for r in agg) - total["other_s"]) <= 1e-9 * total["other_s"]
        assert abs(total["other_s"] - run_o["measured"]["%s_s" % q]) <= 1e-9 * total["other_s"], (
            q, total["other_s"], run_o["measured"])
        if total["diff_s"] != 0:
            assert abs(sum(r["share"] for r in agg) - 1) <= 1e-9, q
        for r in agg:  # a bucket is its layer rows plus its outside-layers row
            parts = [x for x in rows_of(other, q) if x["bucket"] == r["bucket"] and
                     x["kind"] in ("layer", "outside_layers")]
            assert len([x for x in parts if x["kind"] == "outside_layers"]) <= 1, parts
            for side in ("base_s", "other_s"):
                inside = sum(x[side] for x in parts)
                assert abs(inside - r[side]) <= 1e-9 * max(r[side], 1e-12) + 1e-15, (q, r, inside)
            if r["bucket"] in ("qkv_gemm", "attention", "attn_out_gemm", "mlp_gemm"):
                assert all(x["kind"] == "layer" for x in parts), parts
        assert isinstance(run_o["model"]["embd"], int) and isinstance(run_o["model"]["vocab"],
                                                                      int), run_o["model"]


def check_planted(work, case):
    with open(os.path.join(work, "planted.json")) as f:
        planted = json.load(f)[case]
    bucket = {"mlp": "mlp_gemm", "bubble": "pp_recv_wait", "gap": "host_gap"}[case]
    out = explain(work, planted["src"] + ".h5", case + ".h5")
    other = out["others"][0]
    check_sums(other)
    counts, first = planted["counts"], planted["first"]
    steps = out["base"]["steps"]
    expect = {"e2e": PLANT_S * np.mean(counts)}
    if all(c is not None for c in first):  # the critical ranks are last stages: TTFT moves too
        expect["ttft"] = PLANT_S * np.mean(first)
        expect["tpot"] = (expect["e2e"] - expect["ttft"]) / (steps - 1)
    for q, want in expect.items():
        for r in rows_of(other, q):
            if r["kind"] not in ("phase", "comm", "gap"):
                continue
            if r["bucket"] == bucket:
                assert abs(r["diff_s"] - want) <= 0.02 * want, (q, r, want)
            else:
                assert abs(r["diff_s"]) <= 1e-9 + 1e-6 * want, (q, r)
    # the planted ranks stay critical: explain names the one critical in most iterations, and
    # counts exactly the iterations in which the source had it critical
    crit, per_iteration = other["run"]["critical_rank"], planted["critical"]
    assert crit["rank"] in per_iteration, (crit, per_iteration)
    assert crit["iterations"] == per_iteration.count(crit["rank"]), (crit, per_iteration)
    assert crit["iterations"] == max(per_iteration.count(r) for r in per_iteration), (
        crit, per_iteration)
    # the verdict ranks the planted bucket first, as the whole difference
    verdict = other["verdict"]
    assert "100% of the difference" in verdict, verdict
    first_clause = verdict[verdict.index("of the difference"):].split(". ")[0]
    assert bucket in first_clause, verdict
    print("%s: planted %s +%.6f s per iteration found as %+.6f s; verdict: %s" % (
        case, bucket, expect["e2e"],
        [r for r in rows_of(other, "e2e") if r["bucket"] == bucket and r["kind"] != "layer"][0]
        ["diff_s"], verdict))


def check_cancel(work):
    """The same latency from a slower first token and faster decode: the verdict says there is
    no end-to-end cause and still ranks each window's (docs/explain.md, "The verdict")."""
    with open(os.path.join(work, "planted.json")) as f:
        prefill_s = json.load(f)["cancel"]["prefill_s"]
    other = explain(work, "cancel_base.h5", "cancel_other.h5")["others"][0]
    check_sums(other)
    verdict = other["verdict"]
    e2e = [r for r in rows_of(other, "e2e") if r["bucket"] == "mlp_gemm" and r["kind"] == "phase"]
    assert abs(e2e[0]["diff_s"]) <= 1e-9, e2e
    assert "no cause to rank end to end" in verdict and " End to end: " not in verdict, verdict
    ttft = re.search(r"To the first token \(\+([0-9.]+) ms\): 100% of the difference \([^)]*\) is "
                     r"mlp_gemm", verdict)
    assert ttft and abs(float(ttft.group(1)) * 1e-3 - prefill_s) <= 0.02 * prefill_s, verdict
    assert re.search(r"Per token \(-[0-9.]+ ms\): 100% of the difference \([^)]*\) is mlp_gemm",
                     verdict), verdict
    print("cancel:", verdict)


def check_formats(work):
    """Several OTHER files; csv and text carry the json's rows; the structure splits exactly;
    the events agree with the /metrics means the run measured with host timers."""
    out = explain(work, "base.h5", "layers3.h5", "int8w.h5", "mlp.h5")
    assert [o["file"].rsplit("/", 1)[1] for o in out["others"]] == ["layers3.h5", "int8w.h5",
                                                                   "mlp.h5"]
    base = out["base"]
    for q in ("ttft", "e2e"):  # one rank: the same instants, two clocks; generous bound
        m, e = base["metrics"]["%s_s" % q], base["measured"]["%s_s" % q]
        assert abs(m - e) <= 0.05 * m + 50e-6, (q, m, e)
    for other in out["others"]:
        check_sums(other)
        for q, s in other["structure"].items():
            terms = (s["layer_count_s"], s["per_layer_cost_s"], s["pipeline_bubble_s"],
                     s["outside_layers_s"])
            scale = max(abs(s["total_s"]), max(abs(t) for t in terms), 1e-12)
            assert abs(sum(terms) - s["total_s"]) <= 1e-9 * scale, (q, s)
    layers3 = out["others"][0]["structure"]["e2e"]
    assert (layers3["layers_base"], layers3["layers_other"]) == (2, 3), layers3
    assert abs(layers3["layer_count_s"] - layers3["per_layer_base_s"]) <= 1e-12, layers3
    assert "3 vs 2 layers" in out["others"][0]["verdict"], out["others"][0]["verdict"]
    assert "int8w: dequantisation fused" in out["others"][1]["verdict"] or \
        "int8w" not in out["others"][1]["verdict"], out["others"][1]["verdict"]
    text = explain(work, "base.h5", "layers3.h5", "int8w.h5", "mlp.h5", fmt="text")
    assert text.count("verdict: OTHER is") == 3, text
    for other in out["others"]:
        assert other["verdict"] in text, other["verdict"]
    rows = list(csv.DictReader(io.StringIO(explain(work, "base.h5", "layers3.h5", "int8w.h5",
                                                   "mlp.h5", fmt="csv"))))
    json_rows = [(o["file"], r) for o in out["others"] for r in o["rows"]]
    assert len(rows) == len(json_rows), (len(rows), len(json_rows))
    for c, (file, j) in zip(rows, json_rows):
        assert c["other"] == file and c["bucket"] == j["bucket"] and c["quantity"] == j["quantity"]
        assert abs(float(c["diff_s"]) - j["diff_s"]) <= 1e-8 * max(abs(j["diff_s"]), 1e-9), (c, j)
    print("formats: 3 OTHER files, %d rows each in json and csv; %s" % (
        len(rows) // 3, out["others"][0]["verdict"]))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    mode, work = sys.argv[1], sys.argv[2]
    if mode == "make":
        make(work)
    elif mode == "check" and len(sys.argv) == 4:
        if sys.argv[3] == "formats":
            check_formats(work)
        elif sys.argv[3] == "cancel":
            check_cancel(work)
        else:
            check_planted(work, sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
