#!/usr/bin/python3
"""Every dp x tp x pp factorization of a low-precision run against its single-rank run.

  check_lowp_factorizations.py WORKDIR JOB RTOL [--experts N] WORLD_SIZE... [-- KEY=VALUE...]

With --experts N (a mixture of experts of N experts per layer), each factorization also runs
with every parallel.ep > 1 dividing N and either dividing its tp or a multiple of tp dividing
dp x tp (EP groups across replicas).

Low precision rounds activations (bf16 at each product, int8 in blocks), and rounding is not
continuous: the fp32 summation-order differences of two meshes (1e-7, from the TP all-reduce
and from sgemm's blocking of other row counts) become one rounding step of an element or a
block where a value sits on a boundary (docs/kernels.md, "Accuracy"). So, for every
factorization:
  - every activation point is within RTOL of the one-rank run's (max|a - b| <= RTOL max|a|);
  - every sequence's tokens equal the one-rank run's, except that a sequence may part ways at
    a position whose token the one-rank run chose by a top-2 logit margin of at most twice the
    activation tolerance (2 RTOL max|logits|): a near tie that the allowed noise can flip.
    The margins come from a teacher-forced one-rank run over the one-rank tokens
    (near_ties.py).
Prints one ok/FAIL line per factorization (and each near tie taken); exit 1 on any failure.
Environment: TRIPAR_BIN, MPIEXEC (default mpiexec)."""
import os
import subprocess
import sys

import h5py
import numpy as np

from near_ties import judge_tokens, teacher_forced_margins


def run(cmd, log):
    with open(log, "w") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=240)
    return proc.returncode == 0


def read(path):
    with h5py.File(path, "r") as f:
        tokens = np.asarray(f["output/tokens"])
        points = {k: np.asarray(f["activations"][k], dtype=np.float64) for k in f["activations"]}
    return tokens, points


def meshes(worlds, experts):
    """Every (world, dp, tp, pp, ep): ep 1, and with experts > 1 every ep > 1 dividing the
    experts and either dividing tp (expert parallelism inside the TP group) or a multiple of tp
    dividing dp x tp (across replicas, docs/jobs.md)."""
    for world in worlds:
        for tp in range(1, world + 1):
            if world % tp:
                continue
            for pp in range(1, world // tp + 1):
                if (world // tp) % pp:
                    continue
                dp = world // tp // pp
                for ep in range(1, dp * tp + 1):
                    inside, across = tp % ep == 0, ep % tp == 0 and (dp * tp) % ep == 0
                    if experts % ep == 0 and (inside or across):
                        yield world, dp, tp, pp, ep


def main():
    args = sys.argv[1:]
    sets = []
    if "--" in args:
        sets = args[args.index("--") + 1:]
        args = args[:args.index("--")]
    experts = 1
    if "--experts" in args:
        at = args.index("--experts")
        experts = int(args[at + 1])
        del args[at:at + 2]
    if len(args) < 4:
        sys.exit(__doc__)
    work, job, rtol, worlds = args[0], args[1], float(args[2]), [int(w) for w in args[3:]]
    tripar, mpiexec = os.environ["TRIPAR_BIN"], os.environ.get("MPIEXEC", "mpiexec")
    os.makedirs(work, exist_ok=True)
    for name in os.listdir(work):  # run files are never overwritten: start from an empty dir
        os.remove(os.path.join(work, name))
    set_args = [a for s in sets for a in ("--set", s)]

    def tripar_run(n, out, extra, job_path=job):
        cmd = [mpiexec, "-n", str(n), "--oversubscribe", tripar, "run", job_path, "--out", out]
        return run(cmd + set_args + extra, out + ".log")

    base = os.path.join(work, "base.h5")
    if not tripar_run(1, base, ["--set", "parallel.microbatches=1", "--set", "parallel.overlap=false"]):
        sys.exit(open(base + ".log").read() + "FAIL base run")
    base_tokens, base_points = read(base)
    margin, prompt = teacher_forced_margins(tripar, mpiexec, base, work)
    near_tie = 2 * rtol * np.max(np.abs(base_points["logits"]))

    fail = count = 0
    for world, dp, tp, pp, ep in meshes(worlds, experts):
        name = f"w{world}-dp{dp}-tp{tp}-pp{pp}" + (f"-ep{ep}" if ep > 1 else "")
        out = os.path.join(work, name + ".h5")
        count += 1
        if not tripar_run(world, out, ["--set", f"parallel.dp={dp}", "--set",
                                       f"parallel.tp={tp}", "--set", f"parallel.pp={pp}",
                                       "--set", f"parallel.ep={ep}"]):
            print(f"FAIL {name}: run failed\n" + open(out + ".log").read())
            fail = 1
            continue
        tokens, points = read(out)
        problems, ties = [], []
        for point, ref in base_points.items():
            err = np.max(np.abs(points[point] - ref)) / max(np.max(np.abs(ref)), 1e-30)
            if err > rtol:
                problems.append(f"{point} max_rel {err:.3e} > {rtol:g}")
        for text, tie in judge_tokens(tokens, base_tokens, margin, prompt, near_tie):
            (ties if tie else problems).append(text)
        tag = "ok  " if not problems else "FAIL"
        fail |= bool(problems)
        print(f"{tag} {name} {' '.join(sets)}")
        for text in problems:
            print(f"       {text}")
        for text in ties:
            print(f"       near tie taken the other way: {text}")
    print(f"{count} factorizations checked (activations within {rtol:g}; tokens apart only at "
          f"near ties)")
    sys.exit(1 if fail or count == 0 else 0)


if __name__ == "__main__":
    main()
