#!/usr/bin/python3
"""Prints jobs/bench-nodes.sh's table: per link setting, mesh and TP placement, MPI setting and overlap, the median over
rounds of prefill time (TTFT), decode time per token (TPOT), the prefill's TP all-reduce time per
rank (total, and the exposed part a rank spent blocked in it), the prefill's PP wait, and the
bytes the run sent over the emulated network. Then, per link and placement, the share of the
exposed TP time that overlap hid: 1 - exposed(overlap on) / exposed(overlap off), both with the
same MPI setting.

usage: nodes_table.py RUNS.tsv   (lines: link, mesh:placement, MPI setting, overlap, bytes, run file,
                                  round)
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from strategy_table import load  # noqa: E402  (the run-file reader the strategy table uses)


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    rows = {}
    links = []
    settings = []
    meshes = []
    for line in open(argv[1]):
        link, mesh, mpi, overlap, nbytes, path, _round = line.rstrip("\n").split("\t")
        if link not in links:
            links.append(link)
        if mesh not in meshes:
            meshes.append(mesh)
        r = load(path)
        per = r["ranks"] * r["iterations"]
        if mpi not in settings:
            settings.append(mpi)
        rows.setdefault((link, mesh, mpi, overlap), []).append({
            "ttft": r["ttft"], "tpot": r["tpot"],
            "tp_total": r["prefill_tp_total"] / per, "tp_wait": r["prefill_tp_wait"] / per,
            "pp_wait": r["prefill_pp_wait"] / per, "bytes": int(nbytes)})

    def med(key, cell):
        return statistics.median(x[key] for x in cell)

    print(f"{'link':<14}{'mesh: TP':<16}{'MPI':<9}{'overlap':>8}{'prefill ms':>12}{'TPOT ms':>9}"
          f"{'TP ms':>9}{'exposed ms':>12}{'PP wait ms':>12}{'MB crossed':>12}{'rounds':>8}")
    for link in links:
        for mesh in meshes:
            for mpi in settings:
                for ov in ("false", "true"):
                    cell = rows.get((link, mesh, mpi, ov))
                    if not cell:
                        continue
                    print(f"{link:<14}{mesh:<16}{mpi:<9}{'on' if ov == 'true' else 'off':>8}"
                          f"{1e3 * med('ttft', cell):>12.1f}{1e3 * med('tpot', cell):>9.2f}"
                          f"{1e3 * med('tp_total', cell):>9.1f}{1e3 * med('tp_wait', cell):>12.1f}"
                          f"{1e3 * med('pp_wait', cell):>12.1f}{med('bytes', cell) / 1e6:>12.1f}"
                          f"{len(cell):>8}")
    print()
    print("overlap hides (1 - exposed TP time with overlap on / off, prefill, medians):")
    for link in links:
        for mesh in meshes:
            for mpi in settings:
                off = rows.get((link, mesh, mpi, "false"))
                on = rows.get((link, mesh, mpi, "true"))
                if not off or not on:
                    continue
                e_off, e_on = med("tp_wait", off), med("tp_wait", on)
                hidden = 1 - e_on / e_off if e_off > 0 else float("nan")
                print(f"  {link:<14}{mesh:<16}{mpi:<9}{100 * hidden:6.1f}%  "
                      f"(exposed {1e3 * e_off:.1f} -> {1e3 * e_on:.1f} ms per rank; target >= 70%)")
    print("TP ms / exposed ms: per rank and iteration, from the first tp_allreduce start to its known"
          " completion, and the part spent blocked in tp_wait; MB crossed: bytes all nodes sent on"
          " their emulated interface during the whole run (set-up included)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
