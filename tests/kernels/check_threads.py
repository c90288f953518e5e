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


def run(job, out, precision, threads):
    """One run of job on one rank, at this precision and thread count, into out."""
    cmd = [os.environ.get("MPIEXEC", "mpiexec"), "-n", "1", os.environ["TRIPAR_BIN"], "run", job,
           "--out", out, "--set", f"model.precision={precision}",
           "--set", f"backend.threads={threads}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}\n{r.stdout}{r.stderr}")
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    work, job = sys.argv[1:]
    # run files are never overwritten: start from an empty folder
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failed = False
    for precision in PRECISIONS:
        outs = [run(job, os.path.join(work, f"{precision}-t{t}.h5"), precision, t) for t in THREADS]
        for threads, out in zip(THREADS[1:], outs[1:]):
            r = subprocess.run([os.environ["TRIPAR_BIN"], "diff", outs[0], out, "--rtol", "0",
                                "--atol", "0"], capture_output=True, text=True)
            same = r.returncode == 0
            failed |= not same
            print(f"{'ok  ' if same else 'FAIL'} {precision:6s} {threads} threads against 1: "
                  f"{'equal bit for bit' if same else 'differ'}")
            if not same:
                print(r.stdout + r.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
