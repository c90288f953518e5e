#!/usr/bin/python3
"""tripar report, diff and trace on the real run files that run_case.sh left in OUTDIR:

  check_tools.py OUTDIR     (TRIPAR_BIN names the tripar binary)

report: every phase of the file and its rank count in the text; --json per-rank totals equal to
sums over the file's events; two files give a comparison table naming both strategies.
diff: the 4-rank tp2 pp2 run agrees with the 1-rank run at rtol 1e-5; a copy with
/activations/layer.2.mlp and every later point perturbed fails (exit 1) naming layer.2.mlp.
trace: one pid per rank, per-rank and per-phase event counts equal to the file's."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_lib as L  # noqa: E402
from e2e_lib import expect, h5py, np  # noqa: E402

TRIPAR = os.environ.get("TRIPAR_BIN", "tripar")


def tripar(*args):
    p = subprocess.run([TRIPAR] + list(args), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def measured_totals(run):
    """Per rank: phase -> summed seconds, over measured iterations when the file marks any
    (the rule of docs/schema.md, Derived metrics)."""
    measured = any(ev is not None and (ev["iteration"] >= 0).any() for ev in run.events)
    out = []
    for ev in run.events:
        keep = ev["iteration"] >= 0 if measured else np.ones(len(ev["phase"]), bool)
        tot = {}
        for p in set(ev["phase"][keep]):
            sel = keep & (ev["phase"] == p)
            tot[p] = float((ev["t_end"][sel] - ev["t_start"][sel]).sum())
        out.append(tot)
    return out


def check_report(d, main, other):
    run = L.Run(main)
    rc, text = tripar("report", main, "--json", os.path.join(d, "report.json"))
    expect(rc == 0, "report exit %d\n%s" % (rc, text))
    expect("%d ranks on 1 host" % run.world in text, "report does not say '%d ranks'" % run.world)
    expect("dp1-tp2-pp2 m2" in text, "report lacks the strategy label")
    # the table covers measured iterations: set-up (weight_init) and the final gather are
    # recorded with iteration -1 and stay out of it
    phases = sorted({str(p) for ev in run.events for p in ev["phase"][ev["iteration"] >= 0]})
    table = [line.split()[0] for line in text.splitlines() if line.startswith("    ")]
    for p in phases:
        expect(p in table, "report's phase table lacks %s" % p)
    expect(set(table) - {"phase"} <= set(phases), "report lists phases the file lacks: %s" %
           sorted(set(table) - {"phase"} - set(phases)))
    with open(os.path.join(d, "report.json")) as fh:
        js = json.load(fh)["runs"][0]
    totals = measured_totals(run)
    for p, v in js["phases"].items():
        per_rank = v["per_rank_s"]
        expect(len(per_rank) == run.world, "json %s: %d ranks" % (p, len(per_rank)))
        for r in range(run.world):
            want = totals[r].get(p, 0.0)
            expect(abs(per_rank[r] - want) <= 1e-9 + 1e-9 * abs(want),
                   "json %s rank %d: %.9g s, the file sums to %.9g s" % (p, r, per_rank[r], want))
        expect(v["min_s"] <= v["median_s"] <= v["max_s"], "json %s: min/median/max order" % p)
    expect(js["world_size"] == run.world and js["tp"] == 2 and js["pp"] == 2, "json mesh")
    expect(0 < js["compute_frac"] <= 1, "compute fraction %s" % js["compute_frac"])

    rc, text = tripar("report", main, other)
    expect(rc == 0, "report of two files: exit %d" % rc)
    rows = text[text.rfind("strategy"):].splitlines()
    expect(len(rows) == 3, "comparison table has %d lines, want header + 2:\n%s" % (
        len(rows), "\n".join(rows)))
    o = L.Run(other)
    want = ["dp1-tp2-pp2 m2", "dp%d-tp%d-pp%d m%d" % (o.dp, o.tp, o.pp, o.microbatches)]
    for row, label, world in zip(rows[1:], want, (run.world, o.world)):
        expect(row.startswith(label) and row[28:].split()[0] == str(world),
               "comparison row %r, want strategy %s with %d ranks" % (row, label, world))


def check_diff(d, one, main):
    rc, text = tripar("diff", one, main, "--rtol", "1e-5")
    expect(rc == 0 and "AGREE" in text, "diff of 1 rank vs tp2 pp2 at 1e-5: exit %d\n%s" % (rc, text))
    with h5py.File(main, "r") as f:
        points = list(f["activations"].keys())
    expect(len(points) == 3 + 2 * 4, "activations: %s" % points)
    listed = {line.split()[0]: line.split()[-1] for line in text.splitlines()
              if line.split() and line.split()[0] in points}
    expect(listed == dict.fromkeys(points, "ok"), "diff at 1e-5: points %s" % listed)

    planted = os.path.join(d, "planted.h5")
    shutil.copyfile(main, planted)
    later = ["layer.2.mlp", "layer.3.attn", "layer.3.mlp", "final", "logits"]
    with h5py.File(planted, "r+") as f:
        for name in later:
            a = f["activations/" + name]
            x = a[...]
            x[0, -1, :] += 0.01 * float(np.abs(x).max()) + 1e-3  # one position, well past 1e-5
            a[...] = x
    rc, text = tripar("diff", main, planted, "--rtol", "1e-5")
    expect(rc == 1, "diff of the planted copy: exit %d, want 1\n%s" % (rc, text))
    expect("first divergence: layer.2.mlp " in text, "diff names the wrong point:\n%s" % text)
    expect("tokens: " in text and "equal (100.00%)" in text, "tokens should still agree")
    for line in text.splitlines():
        name = line.split(" ")[0]
        if name in points:
            want = "EXCEEDS" if name in later else "ok"
            expect(line.rstrip().endswith(want), "diff line %r, want %s" % (line, want))


def check_trace(d, main):
    run = L.Run(main)
    out = os.path.join(d, "trace.json")
    rc, text = tripar("trace", main, "-o", out)
    expect(rc == 0, "trace exit %d\n%s" % (rc, text))
    with open(out) as fh:
        tr = json.load(fh)
    evs = tr["traceEvents"]
    xs = [e for e in evs if e["ph"] == "X"]
    names = {e["pid"]: e["args"]["name"] for e in evs
             if e["ph"] == "M" and e["name"] == "process_name"}
    expect(sorted(names) == list(range(run.world)), "trace pids %s" % sorted(names))
    for r in range(run.world):
        dp, tp, pp = run.coords(r)
        expect(names.get(r, "").startswith("rank %d (dp%d tp%d pp%d)" % (r, dp, tp, pp)),
               "process name %r" % names.get(r))
        mine = [e for e in xs if e["pid"] == r]
        ev = run.events[r]
        expect(len(mine) == len(ev["phase"]), "rank %d: %d trace events, the file has %d" % (
            r, len(mine), len(ev["phase"])))
        for p in set(ev["phase"]):
            n_file = int((ev["phase"] == p).sum())
            n_trace = sum(1 for e in mine if e["name"] == p)
            expect(n_file == n_trace, "rank %d %s: trace %d, file %d" % (r, p, n_trace, n_file))
        ts = sorted(e["ts"] for e in mine)
        expect(abs(ts[0] - 1e6 * float(ev["t_start"].min())) < 1e-3 and
               all(e["dur"] >= 0 for e in mine), "rank %d: ts/dur not the file's times" % r)


def main():
    d = sys.argv[1]
    main_run, other, one = (os.path.join(d, n + ".h5") for n in ("tp2pp2", "pp2", "one"))
    for p in (main_run, other, one):
        if not os.path.exists(p):
            print("FAIL: %s missing (run the records_e2e_events tests first)" % p)
            sys.exit(1)
    check_report(d, main_run, other)
    check_diff(d, one, main_run)
    check_trace(d, main_run)
    L.finish("check_tools")


if __name__ == "__main__":
    main()
