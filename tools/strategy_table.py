#!/usr/bin/python3
"""Prints a strategy comparison from run files: prefill and decode tokens/s, parallel efficiency
against a baseline run, and the communication fractions, with the TP all-reduce time of the
prefill split into hidden and exposed parts (tp_allreduce vs tp_wait events of step 0).

usage: strategy_table.py BASELINE.h5 RUN.h5... [--comm-only RUN.h5...]
"""
import sys

import h5py
import numpy as np


def load(path):
    f = h5py.File(path, "r")
    a = f.attrs
    m = f["metrics"]
    ttft = np.median(m["ttft"][()])
    tpot = np.median(m["tpot"][()])
    job_batch = int(f["output/tokens"].shape[0])
    prompt = int(f["output/tokens"].shape[1])
    names = {}
    phase_type = None
    comm = exposed = busy = 0.0
    tp_total = tp_wait = pp_wait = 0.0
    ranks = [k for k in f["timings"] if k.startswith("rank_")]
    comm_phases = {"tp_allreduce", "pp_send", "dp_gather"}
    for r in ranks:
        ev = f["timings"][r]["events"][()]
        if phase_type is None:
            phase_type = f["timings"][r]["events"].dtype["phase"]
            names = {v: k for k, v in h5py.check_enum_dtype(phase_type).items()}
        measured = ev[ev["iteration"] >= 0]
        dur = measured["t_end"] - measured["t_start"]
        ph = np.array([names[p] for p in measured["phase"]])
        step = measured["step"]
        comm += dur[np.isin(ph, list(comm_phases))].sum()
        exposed += dur[np.isin(ph, ["tp_wait", "pp_recv_wait"])].sum()
        busy += dur[ph == "iteration"].sum()
        tp_total += dur[(ph == "tp_allreduce") & (step == 0)].sum()
        tp_wait += dur[(ph == "tp_wait") & (step == 0)].sum()
        pp_wait += dur[(ph == "pp_recv_wait") & (step == 0)].sum()
    return {
        "label": f"dp{a['dp']}-tp{a['tp']}-pp{a['pp']}" + (" m%d" % a["microbatches"]),
        "overlap": "overlap: true" in (a["job"].decode() if isinstance(a["job"], bytes) else a["job"]),
        "prefill_tps": float(m.attrs["prompt_tokens"]) / ttft if ttft > 0 else 0,
        "ttft": ttft,
        "tpot": tpot,
        "batch": job_batch,
        "comm_frac": comm / busy if busy else 0,
        "exposed_frac": exposed / busy if busy else 0,
        "tp_hidden": (1 - tp_wait / tp_total) if tp_total > 0 else float("nan"),
        # the prefill's (step 0) TP all-reduce and PP wait, summed over ranks and iterations
        "prefill_tp_total": tp_total,
        "prefill_tp_wait": tp_wait,
        "prefill_pp_wait": pp_wait,
        "ranks": len(ranks),
        "iterations": int(len(m["ttft"][()])),
    }


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    comm_only = []
    if "--comm-only" in argv:
        i = argv.index("--comm-only")
        comm_only = argv[i + 1:]
        argv = argv[:i]
    base = load(argv[1])
    print(f"{'strategy':<22}{'overlap':>8}{'prefill tok/s':>15}{'decode tok/s':>14}"
          f"{'efficiency':>12}{'comm':>8}{'exposed':>9}{'TP hidden':>11}")
    for path in argv[1:] + comm_only:
        r = load(path)
        decode = r["batch"] / r["tpot"] if r["tpot"] > 0 else 0
        if path in comm_only:
            print(f"{r['label']:<22}{'on' if r['overlap'] else 'off':>8}{'-':>15}{'-':>14}{'-':>12}"
                  f"{100 * r['comm_frac']:>7.1f}%{100 * r['exposed_frac']:>8.1f}%{100 * r['tp_hidden']:>10.1f}%")
            continue
        eff = base["ttft"] / r["ttft"] if r["ttft"] > 0 else 0
        print(f"{r['label']:<22}{'on' if r['overlap'] else 'off':>8}{r['prefill_tps']:>15.1f}{decode:>14.1f}"
              f"{100 * eff:>11.1f}%{100 * r['comm_frac']:>7.1f}%{100 * r['exposed_frac']:>8.1f}%"
              f"{100 * r['tp_hidden']:>10.1f}%")
    print("efficiency = baseline prefill time / this run's prefill time (same cores); comm and exposed"
          " are fractions of iteration time summed over ranks; TP hidden = 1 - tp_wait / tp_allreduce"
          " over the prefill")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
