#!/usr/bin/python3
"""/mesh of every run of a factorization sweep on the emulated cluster (ranks placed by slot,
the default order tp-pp-dp): each rank's host, node index and local rank are those of its
slot, its coordinates are tp fastest, then pp, then dp, and the log warns that a TP group
spans nodes exactly when one does.
usage: check_mesh.py WORKDIR SLOTS_PER_NODE"""
import glob
import os
import re
import sys

import h5py

SPANS_WARNING = "a tensor-parallel group spans nodes"


def check_run(path, slots):
    # w4-dp1-tp4-pp1.h5, or w4-dp1-tp4-pp1-ep2.h5 with expert blocks (they place ranks alike)
    dp, tp, pp = map(int, re.search(r"-dp(\d+)-tp(\d+)-pp(\d+)(-ep\d+)?\.h5$", path).groups()[:3])
    errors = []
    with h5py.File(path, "r") as f:
        mesh = f["/mesh"][()]
    if len(mesh) != dp * tp * pp:
        return [f"{len(mesh)} rows for {dp * tp * pp} ranks"]
    groups = {}
    for row in mesh:
        r = int(row["rank"])
        want = {
            "host": f"node{r // slots + 1}", "node": r // slots, "local_rank": r % slots,
            "tp_rank": r % tp, "pp_rank": r // tp % pp, "dp_rank": r // (tp * pp),
        }
        got = {k: row[k].decode() if k == "host" else int(row[k]) for k in want}
        if got != want:
            errors.append(f"rank {r}: {got}, expected {want}")
        groups.setdefault((got["dp_rank"], got["pp_rank"]), set()).add(got["host"])
    spans = any(len(hosts) > 1 for hosts in groups.values())
    log = open(path[:-3] + ".log").read()
    if (SPANS_WARNING in log) != spans:
        errors.append(f"TP groups {'span' if spans else 'do not span'} nodes, but the warning is "
                      f"{'missing' if spans else 'printed'}")
    return errors


def main():
    work, slots = sys.argv[1], int(sys.argv[2])
    runs = sorted(glob.glob(os.path.join(work, "w*-dp*-tp*-pp*.h5")))
    if not runs:
        sys.exit(f"FAIL: no run files in {work}")
    failed = 0
    for path in runs:
        errors = check_run(path, slots)
        print(("FAIL " if errors else "ok   ") + "mesh " + os.path.basename(path))
        for e in errors:
            print("     " + e)
        failed += bool(errors)
    print(f"{len(runs)} meshes checked, {failed} wrong")
    sys.exit(1 if failed else 0)


main()
