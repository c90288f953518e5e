#!/usr/bin/python3
"""The thread count changes no bit: JOB (tests/kernels/threads_bitwise.yaml) runs on one rank
in fp32, bf16, int8w, q8_0, q4_0 and q4_1, each with backend.threads 1, 2 and 3, and
`tripar diff --rtol 0 --atol 0` must find the 2- and 3-thread runs' prefill logits and
generated tokens equal to the 1-thread run's (docs/kernels.md, "Threads on the CPU").

  check_threads.py WORKDIR JOB

Environment: TRIPAR_BIN, MPIEXEC (default mpiexec)."""
import os
import shutil
import subprocess
import sys

PRECISIONS = ["fp32", "bf16", "int8w", "q8_0", "q4_0", "q4_1"]
THREADS = [1, 2, 3]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    work, job = sys.argv[1], sys.argv[2]
    tripar = os.environ["TRIPAR_BIN"]
    mpiexec = os.environ.get("MPIEXEC", "mpiexec")
    shutil.rmtree(work, ignore_errors=True)  # run files are never overwritten: start empty
    os.makedirs(work)
    fail = 0
    for precision in PRECISIONS:
        outs = []
        for threads in THREADS:
            out = os.path.join(work, f"{precision}-t{threads}.h5")
            cmd = [mpiexec, "-n", "1", tripar, "run", job, "--out", out,
                   "--set", f"model.precision={precision}", "--set", f"backend.threads={threads}"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}\n{r.stdout}{r.stderr}")
            outs.append(out)
        for threads, out in zip(THREADS[1:], outs[1:]):
            r = subprocess.run([tripar, "diff", outs[0], out, "--rtol", "0", "--atol", "0"],
                               capture_output=True, text=True)
            ok = r.returncode == 0
            fail |= not ok
            print(f"{'ok  ' if ok else 'FAIL'} {precision:6s} {threads} threads against 1: "
                  f"{'equal bit for bit' if ok else 'differ'}")
            if not ok:
                print(r.stdout + r.stderr)
    sys.exit(1 if fail else 0)


if __name__ == "__main__":
    main()
