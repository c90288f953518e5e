#!/usr/bin/python3
"""generate.stop_at_eos under every factorization: a first one-rank run without eos shows which
ids the synthetic model generates; the eos id is the one that ends the most sequences while
leaving at least one running to new_tokens. Then check_factorizations.sh runs every dp x tp x pp
of the given world sizes with that eos id and must reproduce the one-rank tokens exactly (the -1
after each eos included), and the one-rank run with eos must hold the first run's tokens up to
and with each sequence's first eos, -1 after, /output/generated counting them and /output's
eos_id attribute naming the id. Then the prompts of the sequences that stop, alone, under every
factorization of 2 ranks: every sequence stops, so the generation ends one step
after the last eos (the timing events' last step), on every rank alike (no hang).

Usage: check_eos_factorizations.py WORKDIR JOB NEW_TOKENS WORLD_SIZE... [-- EXTRA SETS]"""
import os
import subprocess
import sys

import h5py
import numpy as np


def main(work, job, new_tokens, sizes, extra):
    tripar = os.environ["TRIPAR_BIN"]
    mpiexec = os.environ.get("MPIEXEC", "mpiexec")
    os.makedirs(work, exist_ok=True)
    sets = [f"generate.new_tokens={new_tokens}"] + extra
    first = os.path.join(work, "no_eos.h5")
    cmd = [mpiexec, "-n", "1", "--oversubscribe", tripar, "run", job, "--out", first,
           "--set", "generate.stop_at_eos=false"]
    for s in sets:
        cmd += ["--set", s]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    with h5py.File(first, "r") as f:
        tokens = f["output/tokens"][...]
    prompt = tokens.shape[1] - new_tokens
    gen = tokens[:, prompt:]
    best, best_stops = None, 0
    for cand in sorted(set(gen.flatten().tolist())):
        stops = sum(1 for row in gen if cand in row)
        if stops < len(gen) and stops > best_stops:
            best, best_stops = cand, stops
    assert best is not None and best_stops > 0, f"no id ends some sequences only:\n{gen}"
    firsts = [list(row).index(best) if best in row else None for row in gen]
    print(f"eos id {best}: ends {best_stops} of {len(gen)} sequences, after "
          f"{[None if p is None else p + 1 for p in firsts]} tokens")
    work_f = os.path.join(work, "factor")
    r = subprocess.run([os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "check_factorizations.sh"), work_f, job]
                       + [str(s) for s in sizes] + ["--", f"generate.eos_id={best}"] + sets)
    assert r.returncode == 0, "a factorization disagrees with one rank under stop_at_eos"
    with h5py.File(os.path.join(work_f, "base.h5"), "r") as f:
        got = f["output/tokens"][...]
        counts = f["output/generated"][...]
        assert float(f["output"].attrs["eos_id"]) == best, "/output eos_id is not the eos id"
    for i, p in enumerate(firsts):
        n = new_tokens if p is None else p + 1
        assert counts[i] == n, f"sequence {i}: generated {counts[i]}, expected {n}"
        assert np.array_equal(got[i, :prompt + n], tokens[i, :prompt + n]), \
            f"sequence {i}: tokens before its eos differ from the run without eos"
        assert (got[i, prompt + n:] == -1).all(), f"sequence {i}: tokens after its eos"
    # Every sequence stops: only those prompts, as input.tokens
    stopping = [i for i, p in enumerate(firsts) if p is not None]
    assert len(stopping) >= 2, "dp = 2 needs two prompts that stop"
    prompts = "[" + ", ".join("[" + ", ".join(str(int(t)) for t in tokens[i, :prompt]) + "]"
                              for i in stopping) + "]"
    work_all = os.path.join(work, "all_stop")
    sets_all = [s for s in sets if not s.startswith("parallel.microbatches")]
    r = subprocess.run([os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "check_factorizations.sh"), work_all, job, "2",
                        "--", f"generate.eos_id={best}", f"input.tokens={prompts}"] + sets_all)
    assert r.returncode == 0, "a factorization disagrees with one rank when every sequence stops"
    with h5py.File(os.path.join(work_all, "base.h5"), "r") as f:
        counts = f["output/generated"][...]
        last_step = max(int(f["timings"][g]["events"]["step"].max()) for g in f["timings"])
    want = [firsts[i] + 1 for i in stopping]
    assert list(counts) == want, f"generated {list(counts)}, expected {want}"
    assert last_step == max(want), \
        f"the generation's last step is {last_step}, not one after the last eos ({max(want)})"
    print(f"every sequence stopped: generated {want}, last step {last_step} of {new_tokens}")
    print("check_eos_factorizations: passed")


if __name__ == "__main__":
    args = sys.argv[1:]
    extra = args[args.index("--") + 1:] if "--" in args else []
    args = args[:args.index("--")] if "--" in args else args
    if len(args) < 4:
        sys.exit("usage: check_eos_factorizations.py WORKDIR JOB NEW_TOKENS WORLD_SIZE... "
                 "[-- EXTRA SETS]")
    main(args[0], args[1], int(args[2]), [int(s) for s in args[3:]], extra)
