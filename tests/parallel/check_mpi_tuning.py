#!/usr/bin/python3
"""tripar sets the MPI variables TP overlap needs, never over the user's, and records them.

  check_mpi_tuning.py WORKDIR JOB

Runs JOB on 2 ranks at tp=2 (parallel/mpi_tuning.h):
  - overlap on: the three TCP eager limits at 4 MiB (set in the environment before MPI_Init)
    and libnbc's iallreduce algorithm 4 (recursive doubling, through MPI_T), each "(tripar, ...)"
    in the run file's mpi_settings, and the values are the ones Open MPI has in force (its
    MPI_T read-back, which an unapplied setting would not pass);
  - overlap on, but one eager limit in the environment and the algorithm by mpirun --mca: those
    two are the user's values, marked "(user)", and the rest still tripar's;
  - overlap on with parallel.mpi_tuning: off, and overlap off: nothing set, Open MPI's defaults;
  - a sweep whose first point has overlap off and second on: MPI is set up once for both, so
    both points' files record the tuning;
  - tripar report prints the overlapped run's settings.
Environment: TRIPAR_BIN, MPIEXEC (default mpiexec)."""
import os
import re
import subprocess
import sys

import h5py

TUNED = {"btl_tcp_eager_limit": 4194304, "btl_tcp_rndv_eager_limit": 4194304,
         "btl_tcp_max_send_size": 4194304, "coll_libnbc_iallreduce_algorithm": 4}
HOW = {"btl_tcp_eager_limit": "tripar, environment", "btl_tcp_rndv_eager_limit":
       "tripar, environment", "btl_tcp_max_send_size": "tripar, environment",
       "coll_libnbc_iallreduce_algorithm": "tripar, MPI_T"}
failures = []


def expect(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg)


def run(work, name, sets, env=None, mca=(), sweep=None):
    out = os.path.join(work, name + ".h5")
    cmd = [os.environ.get("MPIEXEC", "mpiexec"), "-n", "2", "--oversubscribe", *mca,
           os.environ["TRIPAR_BIN"], "run", sys.argv[2], "--out", out,
           "--set", "parallel.tp=2", "--set", "generate.new_tokens=2"]
    for kv in sets:
        cmd += ["--set", kv]
    if sweep:
        cmd += ["--sweep", sweep]
    log = os.path.join(work, name + ".log")
    with open(log, "w") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=240,
                              env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        print(open(log).read())
        sys.exit("FAIL %s: the run failed (exit %d)" % (name, proc.returncode))
    return out


def settings(path):
    """{name: (value, who)} and the whole line of a run file's mpi_settings."""
    with h5py.File(path, "r") as f:
        line = f.attrs["mpi_settings"]
    line = line.decode() if isinstance(line, bytes) else str(line)
    found = {m.group(1): (int(m.group(2)), m.group(3))
             for m in re.finditer(r"([a-z_]+)=(-?\d+) \(([^)]*)\)", line)}
    return found, line


def check_tuned(path, user=None):
    user = user or {}
    found, line = settings(path)
    print("%s: %s" % (os.path.basename(path), line))
    expect(not line.startswith("tripar set nothing"), "%s: nothing set: %s" % (path, line))
    for name, value in TUNED.items():
        want = (user[name], "user") if name in user else (value, HOW[name])
        expect(found.get(name) == want, "%s: %s is %s, expected %s" % (
            path, name, found.get(name), want))


def check_untouched(path):
    found, line = settings(path)
    print("%s: %s" % (os.path.basename(path), line))
    expect(line.startswith("tripar set nothing"), "%s: %s" % (path, line))
    for name in TUNED:
        expect(found.get(name, (0, ""))[1] == "default",
               "%s: %s is %s, expected Open MPI's default" % (path, name, found.get(name)))


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    tuned = run(work, "tuned", ["parallel.overlap=true"])
    check_tuned(tuned)
    # tripar report shows the settings of an overlapped run, as the file has them
    text = subprocess.run([os.environ["TRIPAR_BIN"], "report", tuned], capture_output=True,
                          text=True, timeout=60).stdout
    expect("  MPI for TP overlap: " + settings(tuned)[1] + "\n" in text,
           "tripar report prints no MPI line for %s:\n%s" % (tuned, text))
    check_tuned(run(work, "user", ["parallel.overlap=true"],
                    env={"OMPI_MCA_btl_tcp_eager_limit": "1000000"},
                    mca=("--mca", "coll_libnbc_iallreduce_algorithm", "1")),
                user={"btl_tcp_eager_limit": 1000000, "coll_libnbc_iallreduce_algorithm": 1})
    check_untouched(run(work, "off", ["parallel.overlap=true", "parallel.mpi_tuning=off"]))
    check_untouched(run(work, "no_overlap", ["parallel.overlap=false"]))
    sweep_dir = os.path.join(work, "sweep")
    os.makedirs(sweep_dir, exist_ok=True)
    run(sweep_dir, "s", [], sweep="parallel.overlap=false,true")
    points = sorted(p for p in os.listdir(sweep_dir) if p.endswith(".h5"))
    expect(len(points) == 2, "the sweep wrote %s" % points)
    for p in points:
        check_tuned(os.path.join(sweep_dir, p))
    if failures:
        sys.exit(1)
    print("ok: tuned, the user's values kept, off, no overlap, a sweep")


if __name__ == "__main__":
    main()
