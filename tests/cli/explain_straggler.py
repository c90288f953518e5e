#!/usr/bin/python3
"""`tripar explain` names what was planted (issue 29): each case makes real runs with one cause
planted and asserts what explain names, never a time.

  explain_straggler.py make WORKDIR CASE     the runs of one case (env: TRIPAR_BIN,
                                             TRIPAR_SOURCE_DIR, MPIEXEC)
  explain_straggler.py check WORKDIR CASE    what explain must name
  explain_straggler.py test WORKDIR CASE     make, then check
  explain_straggler.py bar WORKDIR N         N repetitions of the tp straggler case, each made
                                             and checked; prints how many named the slowed rank

Cases (2 ranks; the straggler cases bind rank r to core r % ncores):
  tp_straggler   tp=2: BASE, then OTHER with busy loops on rank 1's core. explain must name
                 rank 1 as the straggler and rank 0 as the rank that waited for it.
  pp_straggler   pp=2: the same with the busy loops on rank 0's core (stage 0).
  allreduce      tp=2, the tiny model: OTHER with Open MPI's shared-memory transport off (TCP
                 loopback, tens of times slower per all-reduce): the verdict's first E2E
                 clause must name an all-reduce's wait (tp_wait; or the sampler's, sample_wait,
                 inside sample in files without it), tp_wait among the E2E clauses, and no
                 clause a share over 100%.
  bubble         pp=1 tp=1 BASE against pp=2 with one micro-batch: the structure names the
                 pipeline bubble; the parts cancel (fewer layers per rank, a bubble), so no
                 share over 100% is said.
  precision      fp32 against int8w: a GEMM row is named as int8w's (dequantisation fused).
  sched          no run: /sched planted (h5py) in two copies of the tp BASE file, rank 1 with
                 run delays; explain must say rank 1 was preempted and name it; without /sched
                 it must say preemption was not recorded.
  lead           no run: the tp BASE file with rank 1's iteration ends moved: 1 us after rank
                 0's (the TP group finishes together) and 20% of E2E after (named, with "the
                 other rank").

Where real time is allowed (root), the ranks of the two-rank runs run round-robin at real-time
priority 10, pinned one per core, and the planted loop FIFO at 20 on the slowed rank's core:
load from elsewhere on the machine (another build) then cannot take the ranks' cores, and the
planted loop takes about two thirds of one of them, in 2 ms slices, in every iteration. Without
real time, the same at normal priority (a loaded machine then blurs the case).
"""
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
JOB = os.path.join(SRC, "tests/cli/explain_straggler.yaml")
TINY = os.path.join(SRC, "tests/cli/tools_tiny.yaml")
SCHEMA = os.path.join(SRC, "docs/explain.schema.json")
ITERATIONS = int(os.environ.get("EXPLAIN_STRAGGLER_ITERATIONS", "10"))
BUSY_ON, BUSY_OFF = 0.002, 0.001  # the planted loop takes about 2/3 of the slowed rank's core


def run(args, expect=0, env=None):
    done = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=280, env=env)
    assert done.returncode == expect, "%s exited %d, not %d\n%s\n%s" % (
        " ".join(args), done.returncode, expect, done.stdout[-2000:], done.stderr[-2000:])
    return done


def realtime_allowed():
    """Whether this process may start real-time tasks (root, or CAP_SYS_NICE with RT time)."""
    return subprocess.run(["chrt", "-r", "10", "true"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def tripar_run(work, name, job, sets, ranks=2, pin=True, mca=()):
    """One run on `ranks` ranks. pin: rank r bound to core r % ncores (taskset inside the
    launch, so the binding does not depend on the launcher's mapping) and, where allowed,
    real-time round-robin, so that other load on the machine cannot take the ranks' cores;
    only the planted loops, at a higher real-time priority, do."""
    out = os.path.join(work, name + ".h5")
    args = [TRIPAR, "run", job, "--out", out, "--set", "bench.warmup=1",
            "--set", "bench.iterations=%d" % ITERATIONS]
    for s in sets:
        args += ["--set", s]
    if ranks == 1:
        run(args)
        return out
    cores = os.cpu_count() or 1
    inner = args
    if pin:
        rt = "chrt -r 10 " if realtime_allowed() else ""
        inner = ["sh", "-c", 'exec %staskset -c $((OMPI_COMM_WORLD_RANK %% %d)) "$@"' % (rt, cores),
                 "sh"] + args
    cmd = [MPIEXEC, "-n", str(ranks), "--oversubscribe", "--bind-to", "none"]
    for k, v in mca:
        cmd += ["--mca", k, v]
    run(cmd + inner)
    return out


DUTY = """import time
while True:
    t = time.perf_counter() + %g
    while time.perf_counter() < t:
        pass
    time.sleep(%g)
"""


def busy_loops(core):
    """The planted load on one core: a loop that spins BUSY_ON s and sleeps BUSY_OFF s, at a
    real-time priority above the ranks' (so it takes the core from the rank at once, in small
    slices, in every iteration), or a plain busy loop where real time is not allowed."""
    core %= os.cpu_count() or 1
    loop = [sys.executable, "-c", DUTY % (BUSY_ON, BUSY_OFF)]
    rt = ["chrt", "-f", "20"] if realtime_allowed() else []
    return [subprocess.Popen(rt + ["taskset", "-c", str(core)] + loop)]


def stop(procs):
    for p in procs:
        p.kill()
        p.wait()


def make_straggler(work, axis, slow_rank):
    sets = ["parallel.%s=2" % axis]
    tripar_run(work, "%s_base" % axis, JOB, sets)
    loops = busy_loops(slow_rank)
    try:
        tripar_run(work, "%s_slow" % axis, JOB, sets)
    finally:
        stop(loops)


def make(work, case):
    os.makedirs(work, exist_ok=True)
    if case == "tp_straggler":
        make_straggler(work, "tp", 1)
    elif case == "pp_straggler":
        make_straggler(work, "pp", 0)
    elif case == "allreduce":
        tripar_run(work, "ar_base", TINY, ["parallel.tp=2"])
        tripar_run(work, "ar_slow", TINY, ["parallel.tp=2"],
                   mca=[("btl", "self,tcp"), ("btl_tcp_if_include", "lo")])
    elif case == "bubble":
        tripar_run(work, "bubble_base", TINY, [], ranks=1)
        tripar_run(work, "bubble_pp2", TINY, ["parallel.pp=2", "parallel.microbatches=1"],
                   pin=False)
    elif case == "precision":
        # the larger model: its products are most of a step, so the precision's change to them
        # stands above a loaded machine's noise in the other rows. 32 new tokens: int8w's
        # prefill is slower (activations quantised per row) and its decode faster, and at 8
        # tokens a fast box (Zen 5) had the two cancel within explain's 1% end to end
        decode_heavy = ["generate.new_tokens=32"]
        tripar_run(work, "prec_fp32", JOB, decode_heavy, ranks=1)
        tripar_run(work, "prec_int8w", JOB, decode_heavy + ["model.precision=int8w"], ranks=1)
    elif case in ("sched", "lead"):
        tripar_run(work, "tp_tiny", TINY, ["parallel.tp=2"], pin=False)
    else:
        sys.exit("unknown case " + case)


# ---- checks ----

def explain(work, *files, fmt="json"):
    done = run([TRIPAR, "explain"] + [os.path.join(work, f) for f in files] + ["--format", fmt])
    if fmt != "json":
        return done.stdout
    out = json.loads(done.stdout)
    with open(SCHEMA) as f:
        jsonschema.validate(out, json.load(f))  # docs/explain.schema.json
    return out


def no_share_over_100(text):
    for m in re.finditer(r"(\d+)% of the", text):
        assert int(m.group(1)) <= 100, (m.group(0), text)


def check_straggler(work, axis, slow_rank):
    out = explain(work, "%s_base.h5" % axis, "%s_slow.h5" % axis)
    other = out["others"][0]
    ranks = other["ranks"]
    named = [r["rank"] for r in ranks if r["straggler"]]
    assert named == [slow_rank], ("stragglers named", named, "slowed", slow_rank,
                                  other["stragglers"], ranks)
    waiter = 1 - slow_rank
    assert ranks[waiter]["waiter"], (ranks, other["stragglers"])
    words = other["stragglers"]
    group = "TP group" if axis == "tp" else "pipeline"
    assert words.startswith("In the %s of ranks 0, 1, rank %d (host " % (group, slow_rank)), words
    assert "than the other rank" in words, words
    assert "rank %d (host" % waiter in words and "waited for it" in words, words
    assert words in other["verdict"], other["verdict"]
    no_share_over_100(other["verdict"])
    print("%s straggler: rank %d named; %s" % (axis, slow_rank, words))
    return named == [slow_rank]


def first_e2e_clause(verdict):
    """The end-to-end verdict's first named part. Where increases and savings cancel, the
    verdict opens with a sentence that sums them ("The parts cancel: ... make the ...
    difference"); the part it names first follows."""
    tail = verdict[verdict.index("End to end: ") + len("End to end: "):]
    clauses = tail.split(". ")
    if clauses[0].startswith("The parts cancel:") and len(clauses) > 1:
        return clauses[1]
    return clauses[0]


def check_allreduce(work):
    other = explain(work, "ar_base.h5", "ar_slow.h5")["others"][0]
    verdict = other["verdict"]
    # the slowed all-reduces: the layers' (tp_wait) and the sampler's (sample_wait where the
    # file records it, else inside sample) are ranked end to end, and take a fifth of the
    # difference or more. Not necessarily first: over TCP the ranks' compute phases can slow
    # too (one CI run: attention 56%, tp_wait 31%, the TPOT 20x)
    comm = sum(r["share"] for r in other["rows"]
               if r["quantity"] == "e2e" and r["kind"] in ("phase", "comm")
               and r["bucket"] in ("tp_wait", "sample_wait", "sample"))
    assert comm >= 0.2, (comm, verdict)
    assert "tp_wait" in verdict.split("To the first token")[0], verdict
    no_share_over_100(verdict)
    print("allreduce:", first_e2e_clause(verdict))


def check_bubble(work):
    other = explain(work, "bubble_base.h5", "bubble_pp2.h5")["others"][0]
    verdict, s = other["verdict"], other["structure"]["e2e"]
    # pp=2 on one micro-batch runs its stages in turn, so its latency is pp=1's plus the
    # transfers: on a fast box within explain's 1% of BASE, where the verdict ranks no cause
    # and says why; the structure below is given either way
    if "no cause to rank" in verdict:
        assert "is within 1% of BASE's latency" in verdict, verdict
    else:
        assert "the pipeline bubble (pp_recv_wait outside layers) is" in verdict, verdict
    assert s["pipeline_bubble_s"] > 0, s
    assert (s["layers_base"], s["layers_other"]) == (2, 1), s
    terms = (s["layer_count_s"], s["per_layer_cost_s"], s["pipeline_bubble_s"],
             s["outside_layers_s"])
    scale = max(abs(s["total_s"]), max(abs(t) for t in terms), 1e-12)  # the parts may cancel
    assert abs(sum(terms) - s["total_s"]) <= 1e-9 * scale, s
    no_share_over_100(verdict)
    text = explain(work, "bubble_base.h5", "bubble_pp2.h5", fmt="text")
    assert "pipeline bubble" in text, text
    for m in re.finditer(r"(-?\d+\.\d)%", text.split("structure")[0]):
        assert abs(float(m.group(1))) <= 100.0, (m.group(0), text)
    print("bubble:", verdict)


def check_precision(work):
    other = explain(work, "prec_fp32.h5", "prec_int8w.h5")["others"][0]
    verdict = other["verdict"]
    # How int8w compares with fp32 depends on the build: in Release its products (int8 GEMM,
    # int8 GEMV) beat fp32's in every window; under the sanitizers its instrumented kernels
    # prefill 3-4x slower than uninstrumented OpenBLAS, and per token the two may come within
    # 10%, where noise ranks the causes (one CI run: attention and head). So each window that
    # differs clearly (1.25x or more either way) must name the products with the precision;
    # one always does (the first token: 2.6-3.5x in both builds).
    named = r"(qkv_gemm|attn_out_gemm|mlp_gemm) \(OTHER int8w: dequantisation fused\)"
    windows = verdict.split(" To the first token")
    assert len(windows) == 2 and "Per token" in windows[1], verdict
    parts = {"end to end": windows[0], "to the first token": windows[1].split("Per token")[0],
             "per token": windows[1].split("Per token")[1]}

    def ratio(window):
        m = re.search(r"(\d+\.\d+)x (?:slower|faster) " + window, verdict)
        return float(m.group(1)) if m else 1.0

    clear = [w for w in parts if ratio(w) >= 1.25]
    assert clear, verdict
    for w in clear:
        assert re.search(named, parts[w]), (w, verdict)
    if "end to end" in clear:
        assert "Both critical ranks run 2 layers" in verdict, verdict
    no_share_over_100(verdict)
    print("precision:", verdict)


def plant_sched(src, dst, delays, extra=(0.0, 0.0)):
    """A /sched table per rank with one row per step event: run_delay = delays[rank] x the
    step's duration + extra[rank] seconds (the same in every step, so the lead it plants has
    no spread across iterations: a slow build's noisy steps, ASan's, cannot hide it)."""
    shutil.copyfile(src, dst)
    dtype = np.dtype([("iteration", "<i8"), ("step", "<i8"), ("microbatch", "<i8"),
                      ("t_start", "<f8"), ("t_end", "<f8"), ("run_delay", "<f8"),
                      ("nivcsw", "<i8"), ("nvcsw", "<i8")])
    with h5py.File(dst, "a") as f:
        if "sched" in f:  # the run recorded its own (record.sched): the plant replaces it
            del f["sched"]
        g = f.create_group("sched")
        g.attrs["source"] = "planted by explain_straggler.py"
        g.attrs["threads"] = np.int64(1)
        for r in range(int(f.attrs["world_size"])):
            ev = f["timings/rank_%05d/events" % r][()]
            names = h5py.check_enum_dtype(ev.dtype["phase"])
            st = ev[ev["phase"] == names["step"]]
            rows = np.zeros(len(st), dtype)
            for k in ("iteration", "step", "microbatch", "t_start", "t_end"):
                rows[k] = st[k]
            rows["run_delay"] = delays[r] * (st["t_end"] - st["t_start"]) + extra[r]
            rows["nivcsw"] = np.int64(10 * delays[r])
            g.create_dataset("rank_%05d" % r, data=rows, maxshape=(None,), chunks=True)


def check_sched(work):
    src = os.path.join(work, "tp_tiny.h5")
    plant_sched(src, os.path.join(work, "sched_base.h5"), [0.01, 0.01])
    plant_sched(src, os.path.join(work, "sched_slow.h5"), [0.01, 0.6], extra=(0.0, 0.02))
    other = explain(work, "sched_base.h5", "sched_slow.h5")["others"][0]
    ranks = other["ranks"]
    assert [r["rank"] for r in ranks if r["straggler"]] == [1], (ranks, other["stragglers"])
    assert ranks[1]["preempted_s"] > ranks[0]["preempted_s"] > 0, ranks
    assert other["run"]["sched"]["source"] == "planted by explain_straggler.py", other["run"]
    assert "rank 1 was preempted for" in other["stragglers"], other["stragglers"]
    assert "was preempted" in other["verdict"], other["verdict"]
    bare = os.path.join(work, "sched_none.h5")  # as a run with record.sched: false writes it
    shutil.copyfile(src, bare)
    with h5py.File(bare, "a") as f:
        if "sched" in f:
            del f["sched"]
    text = explain(work, "sched_none.h5", "sched_none.h5", fmt="text")
    assert "preemption not recorded" in text, text
    print("sched:", other["stragglers"])


def plant_lead(src, dst, lead_of_e2e):
    """Rank 1's measured iteration events end lead_of_e2e x rank 0's mean iteration after rank
    0's, the same in every iteration (1e-6 s when lead_of_e2e is 0)."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "a") as f:
        evs = [f["timings/rank_%05d/events" % r][()] for r in range(2)]
        it = h5py.check_enum_dtype(evs[0].dtype["phase"])["iteration"]
        mine = (evs[0]["phase"] == it) & (evs[0]["iteration"] >= 0)
        d = lead_of_e2e * float(np.mean(evs[0]["t_end"][mine] - evs[0]["t_start"][mine])) or 1e-6
        for j in range(int(evs[0]["iteration"].max()) + 1):
            e0 = evs[0][(evs[0]["phase"] == it) & (evs[0]["iteration"] == j)][0]
            sel = (evs[1]["phase"] == it) & (evs[1]["iteration"] == j)
            evs[1]["t_end"][sel] = e0["t_end"] + d
        for r in range(2):
            f["timings/rank_%05d/events" % r][...] = evs[r]


def check_lead(work):
    src = os.path.join(work, "tp_tiny.h5")
    plant_lead(src, os.path.join(work, "lead_none.h5"), 0)
    plant_lead(src, os.path.join(work, "lead_big.h5"), 0.2)
    out = explain(work, "lead_none.h5", "lead_big.h5")
    base, other = out["base"]["critical_rank"], out["others"][0]["run"]["critical_rank"]
    assert not base["named"] and base["words"].startswith("the TP group finishes together"), base
    assert other["named"] and other["rank"] == 1, other
    assert "the other rank" in other["words"] and "median" not in other["words"], other
    print("lead:", base["words"], "|", other["words"])


def check(work, case):
    if case == "tp_straggler":
        check_straggler(work, "tp", 1)
    elif case == "pp_straggler":
        check_straggler(work, "pp", 0)
    elif case == "allreduce":
        check_allreduce(work)
    elif case == "bubble":
        check_bubble(work)
    elif case == "precision":
        check_precision(work)
    elif case == "sched":
        check_sched(work)
    elif case == "lead":
        check_lead(work)
    else:
        sys.exit("unknown case " + case)


def bar(work, n):
    named = 0
    for i in range(n):
        make(work, "tp_straggler")
        try:
            named += check_straggler(work, "tp", 1)
        except AssertionError as e:
            print("repetition %d: the slowed rank was not named: %s" % (i + 1, e))
        print("repetition %d/%d: %d named so far" % (i + 1, n, named), flush=True)
    print("bar: the slowed rank was named in %d of %d repetitions" % (named, n))
    return named == n


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    mode, work, arg = sys.argv[1:]
    if mode == "make":
        make(work, arg)
    elif mode == "check":
        check(work, arg)
    elif mode == "test":
        make(work, arg)
        check(work, arg)
    elif mode == "bar":
        sys.exit(0 if bar(work, int(arg)) else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
