#!/usr/bin/python3
"""tools/plot.py given the wrong kind of file: a JSON that is not a plan, a run file to `plan`,
a plan to `timeline`, `phases` and `roofline`, a missing file, a directory, a text file, an HDF5
file that is not a run file, a study folder without runs, an output folder that does not exist.
Each exits 2 with one line `plot.py: CMD: ...` on stderr that names the file, and never a
Python traceback. Then the right kinds still plot (exit 0).
Usage: plot_errors.py WORKDIR RUN.h5 (a real run file: tools_fixtures.sh's run.h5)
(env: TRIPAR_BIN, TRIPAR_SOURCE_DIR)"""
import json
import os
import subprocess
import sys

import h5py

BIN, SRC = os.environ["TRIPAR_BIN"], os.environ["TRIPAR_SOURCE_DIR"]
WORK, RUN = sys.argv[1], sys.argv[2]
PLOT = os.path.join(SRC, "tools", "plot.py")
os.makedirs(WORK, exist_ok=True)
os.chdir(WORK)

PLAN = os.path.join(WORK, "plan.json")
subprocess.run([BIN, "plan", "--preset", "gpt2-124m", "--cluster",
                os.path.join(SRC, "data", "clusters", "this-machine.yaml"), "--gpus", "2",
                "--format", "json", "-o", PLAN], check=True, stdout=subprocess.DEVNULL)
with open("notes.txt", "w") as f:
    f.write("not a plot input\n")
with open("report.json", "w") as f:
    json.dump({"runs": [{"file": "x.h5"}]}, f)  # JSON, but of another command
with open("list.json", "w") as f:
    json.dump([1, 2, 3], f)
with h5py.File("other.h5", "w") as f:
    f.attrs["format"] = "tripar-commbench"
os.makedirs("empty-study", exist_ok=True)

failures = []


def plot(*args):
    return subprocess.run(["/usr/bin/python3", PLOT, *args], capture_output=True, text=True,
                          timeout=120)


def refused(what, args, names):
    """plot.py ARGS exits 2 with one stderr line naming `names`, no traceback."""
    r = plot(*args)
    lines = r.stderr.splitlines()
    ok = (r.returncode == 2 and len(lines) == 1 and lines[0].startswith("plot.py: ")
          and names in lines[0] and "Traceback" not in r.stderr + r.stdout)
    if not ok:
        failures.append(what)
        print(f"FAIL {what}: exit {r.returncode}, stderr:\n{r.stderr}", file=sys.stderr)
    else:
        print(f"ok   {what}: {lines[0]}")


refused("a JSON that is not a plan, to plan", ["plan", "report.json", "-o", "p.png"], "report.json")
refused("a JSON list, to plan", ["plan", "list.json", "-o", "p.png"], "list.json")
refused("a run file, to plan", ["plan", RUN, "-o", "p.png"], RUN)
refused("a text file, to plan", ["plan", "notes.txt", "-o", "p.png"], "notes.txt")
refused("a missing file, to plan", ["plan", PLAN, "missing.json", "-o", "p.png"], "missing.json")
refused("a directory, to plan", ["plan", WORK, "-o", "p.png"], WORK)
refused("a plan, to timeline", ["timeline", PLAN, "-o", "t.png"], PLAN)
refused("a missing file, to timeline", ["timeline", "missing.h5", "-o", "t.png"], "missing.h5")
refused("a text file, to timeline", ["timeline", "notes.txt", "-o", "t.png"], "notes.txt")
refused("an HDF5 file not a run, to timeline", ["timeline", "other.h5", "-o", "t.png"], "other.h5")
refused("a plan, to phases", ["phases", RUN, PLAN, "-o", "ph.png"], PLAN)
refused("a plan, to roofline", ["roofline", PLAN, "-o", "r.png"], PLAN)
refused("a missing file, to roofline", ["roofline", "missing.h5", "-o", "r.png"], "missing.h5")
refused("a missing study folder, to scaling", ["scaling", "no-study", "-o", "s.png"], "no-study")
refused("a study folder without runs, to scaling", ["scaling", "empty-study", "-o", "s.png"],
        "empty-study")
refused("an output in a missing folder", ["plan", PLAN, "-o", "no-dir/p.png"], "no-dir/p.png")

# the right kinds still plot
for what, args in (("a plan, to plan", ["plan", PLAN, "-o", "p.png"]),
                   ("a run file, to timeline", ["timeline", RUN, "-o", "t.png"]),
                   ("a run file, to phases", ["phases", RUN, "-o", "ph.png"])):
    r = plot(*args)
    if r.returncode != 0:
        failures.append(what)
        print(f"FAIL {what}: exit {r.returncode}\n{r.stderr}", file=sys.stderr)

if failures:
    sys.exit(f"FAIL: {len(failures)} case(s): {failures}")
print("PASS: every wrong input refused in one line with exit 2")
