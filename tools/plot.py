#!/usr/bin/python3
"""Plots from tripar run files (docs/schema.md): a per-rank timeline, phase breakdowns across
strategies, and throughput/efficiency scaling over a study folder.

  plot.py timeline RUN.h5 -o timeline.png [--iteration N] [--full] [--telemetry FIELD]
  plot.py phases RUN1.h5 RUN2.h5 ... -o phases.png
  plot.py scaling STUDY_DIR -o scaling.png
  plot.py roofline RUN.h5|ROOFLINE.json -o roofline.png
  plot.py plan PLAN.json [PLAN2.json ...] -o plan.png [--front FRONT.csv]

A file of the wrong kind (missing, a directory, text, JSON that is not what the command reads,
an HDF5 file that is not a run file) or an output that cannot be written: one line
`plot.py: ...` on stderr and exit 2.
"""
import argparse
import glob
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import h5py  # noqa: E402
    import matplotlib.pyplot as plt  # noqa: E402
    import numpy as np  # noqa: E402
except ImportError as e:  # one line, not a traceback; tools/setup.sh installs them
    sys.exit("plot.py: %s (it needs matplotlib, h5py and numpy: run it with /usr/bin/python3, "
             "or see tools/setup.sh)" % e)


class PlotError(Exception):
    """A wrong input or output: main prints `plot.py: MESSAGE` on one line and exits 2."""


def input_file(cmd, path):
    """path, when it names a file that can be read; else a PlotError saying what it is."""
    if not os.path.exists(path):
        raise PlotError("%s: %s: no such file" % (cmd, path))
    if os.path.isdir(path):
        raise PlotError("%s: %s is a directory, not a file" % (cmd, path))
    if not os.access(path, os.R_OK):
        raise PlotError("%s: %s: cannot be read (permission denied)" % (cmd, path))
    return path


def open_run(cmd, path):
    """A tripar run file (docs/schema.md: format "tripar-run"), open for reading."""
    input_file(cmd, path)
    if not h5py.is_hdf5(path):
        raise PlotError("%s: %s is not an HDF5 file; %s reads a tripar run file (RUN.h5)" %
                        (cmd, path, cmd))
    f = h5py.File(path, "r")
    kind = attr_str(f, "format")
    if kind != "tripar-run":
        f.close()
        raise PlotError("%s: %s is an HDF5 file but not a tripar run file (format %r)" %
                        (cmd, path, kind or "none"))
    return f


def load_json(cmd, path, key, what):
    """The JSON object at path that holds key (what: the command that writes such a file)."""
    import json
    input_file(cmd, path)
    if h5py.is_hdf5(path):
        raise PlotError("%s: %s is an HDF5 file; %s reads the JSON of %s" % (cmd, path, cmd, what))
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        raise PlotError("%s: %s is not JSON (%s); %s reads the JSON of %s" %
                        (cmd, path, str(e).split(":")[0], cmd, what))
    if not isinstance(doc, dict) or key not in doc:
        raise PlotError("%s: %s is JSON but not the output of %s (no \"%s\")" %
                        (cmd, path, what, key))
    return doc


# Phases that enclose others; drawn as a thin band, never stacked with the work inside them.
SPANS = ("iteration", "step", "weight_init")
COMM = ("tp_allreduce", "pp_send", "dp_gather", "ep_dispatch", "ep_combine")
WAIT = ("tp_wait", "pp_recv_wait", "sample_wait", "nll_wait", "stop_wait", "ep_wait")
PHASE_COLORS = {
    "embed": "#8c564b", "norm": "#bcbd22", "qkv_gemm": "#1f77b4", "attention": "#17becf",
    "attn_out_gemm": "#aec7e8", "mlp_gemm": "#2ca02c", "head": "#9467bd", "sample": "#c5b0d5",
    "tp_allreduce": "#ff7f0e", "tp_wait": "#d62728", "pp_send": "#ffbb78",
    "pp_recv_wait": "#e377c2", "dp_gather": "#7f7f7f", "sample_wait": "#ff9896",
    "nll_wait": "#f7b6d2", "stop_wait": "#c49c94", "ep_dispatch": "#9467bd",
    "ep_expert": "#aec7e8", "ep_combine": "#c5b0d5", "ep_wait": "#8c6d31",
    "step": "#dddddd", "iteration": "#bbbbbb", "weight_init": "#999999",
}


def attr_str(obj, name, default=""):
    v = obj.attrs.get(name, default)
    return v.decode() if isinstance(v, bytes) else str(v)


def label_of(f):
    a = f.attrs
    return "dp%d-tp%d-pp%d m%d%s" % (a.get("dp", 1), a.get("tp", 1), a.get("pp", 1),
                                     a.get("microbatches", 1),
                                     " overlap" if a.get("overlap", 0) else "")


def phase_names(dataset):
    """Enum value -> phase name, from the file's own enum type."""
    mapping = h5py.check_enum_dtype(dataset.dtype["phase"])
    return {v: k for k, v in mapping.items()} if mapping else {}


def read_events(f):
    """Per rank: list of (phase name, t_start, t_end, iteration) arrays."""
    out = []
    world = int(f.attrs["world_size"])
    for r in range(world):
        path = "timings/rank_%05d/events" % r
        if path not in f:
            out.append(None)
            continue
        d = f[path]
        ev = d[...]
        names = phase_names(d)
        out.append({"phase": np.array([names.get(int(p), "?") for p in ev["phase"]]),
                    "t_start": ev["t_start"], "t_end": ev["t_end"],
                    "iteration": ev["iteration"]})
    return out


def rank_labels(f):
    world = int(f.attrs["world_size"])
    if "mesh" not in f:
        return ["rank %d" % r for r in range(world)]
    m = f["mesh"][...]
    return ["rank %d  dp%d tp%d pp%d" % (row["rank"], row["dp_rank"], row["tp_rank"],
                                         row["pp_rank"]) for row in m]


# Telemetry series the timeline overlays (docs/schema.md "/telemetry"): field, axis label, scale.
TELEMETRY_SERIES = {
    "gpu_sm_util": ("GPU SM utilisation (%)", 1.0),
    "gpu_mem_util": ("GPU memory utilisation (%)", 1.0),
    "gpu_power_w": ("GPU power (W)", 1.0),
    "gpu_mem_used_bytes": ("GPU memory used (GiB)", 1.0 / 2**30),
    "cpu_util": ("process CPU (cores busy)", 1.0),
    "rss_bytes": ("RSS (MiB)", 1.0 / 2**20),
    "mem_bw_gbs": ("node memory bandwidth (GB/s)", 1.0),
}


def read_telemetry(f):
    """Per rank: the /telemetry/rank_NNNNN samples (a structured array), or None; None when the
    file has no /telemetry (record.telemetry: 0)."""
    if "telemetry" not in f:
        return None
    world = int(f.attrs["world_size"])
    g = f["telemetry"]
    return [g["rank_%05d" % r][...] if "rank_%05d" % r in g else None for r in range(world)]


def telemetry_field(samples, wanted):
    """The series to draw: `wanted`, or with "auto" the GPU SM utilisation when any rank has it
    (cuda with NVML), else the process CPU use. None when nothing finite is there."""
    order = [wanted] if wanted != "auto" else ["gpu_sm_util", "cpu_util"]
    for field in order:
        for s in samples:
            if s is not None and len(s) and field in s.dtype.names and \
                    np.isfinite(s[field]).any():
                return field
    return None


def overlay_telemetry(ax, samples, wanted):
    """Draws one telemetry field per rank on a second y axis over the timeline."""
    if samples is None or wanted == "none":
        return None
    field = telemetry_field(samples, wanted)
    if field is None:
        return None
    label, scale = TELEMETRY_SERIES.get(field, (field, 1.0))
    ax2 = ax.twinx()
    cmap = plt.get_cmap("tab10")
    for r, s in enumerate(samples):
        if s is None or not len(s):
            continue
        ax2.plot(s["t"], s[field] * scale, color=cmap(r % 10), linewidth=1.0, alpha=0.8,
                 marker=".", markersize=2, label="rank %d" % r)
    top = max((np.nanmax(s[field]) * scale for s in samples
               if s is not None and len(s) and np.isfinite(s[field]).any()), default=1.0)
    ax2.set_ylim(0, 1.25 * top if top > 0 else 1.0)  # headroom: the lines stay off the title
    ax2.set_ylabel(label + ", per rank", fontsize=9)
    ax2.legend(loc="upper right", fontsize=7, framealpha=0.8, title="telemetry",
               title_fontsize=7, ncol=min(4, len(samples)))
    legend = ax.get_legend()  # the phase legend moves clear of the second axis' labels
    if legend is not None:
        legend.set_bbox_to_anchor((1.07, 1.0))
    return field


def cmd_timeline(args):
    with open_run("timeline", args.run) as f:
        events = read_events(f)
        labels = rank_labels(f)
        title = "%s  (%s)" % (label_of(f), os.path.basename(args.run))
        complete = int(f.attrs.get("complete", 0))
        telemetry = read_telemetry(f)
    world = len(events)
    fig_h = max(2.5, 0.55 * world + 1.6)
    fig, ax = plt.subplots(figsize=(13, fig_h))
    seen = []
    t_max = 0.0
    t_gen = []  # where generation starts on each rank: model setup (weight_init) comes first
    for r, ev in enumerate(events):
        if ev is None or len(ev["phase"]) == 0:
            continue
        keep = np.ones(len(ev["phase"]), bool)
        if args.iteration is not None:
            keep = ev["iteration"] == args.iteration
        y = world - 1 - r  # rank 0 on top
        for name in np.unique(ev["phase"][keep]):
            if name == "weight_init" and not args.full:
                continue  # setup, off the zoomed axis (see below)
            sel = keep & (ev["phase"] == name)
            starts, ends = ev["t_start"][sel], ev["t_end"][sel]
            t_max = max(t_max, float(ends.max()))
            t_gen.append(float(starts.min()))
            if name in SPANS:
                band = (y + 0.36, 0.08)  # thin band on top: where steps begin and end
            elif name in COMM or name in WAIT:
                band = (y - 0.4, 0.3)    # lower lane: communication (overlaps compute)
            else:
                band = (y - 0.08, 0.42)  # main lane: compute
            ax.broken_barh(list(zip(starts, ends - starts)), band,
                           facecolors=PHASE_COLORS.get(name, "#333333"),
                           edgecolor="white" if name in SPANS else "none", linewidth=0.3)
            if name not in seen:
                seen.append(name)
    ax.set_yticks([world - 1 - r for r in range(world)])
    ax.set_yticklabels(labels, fontsize=9)
    ax.set_ylim(-0.6, world - 0.4)
    # Setup can take far longer than the generation it precedes; unless asked for, zoom on
    # the generation so its steps are not squeezed into a sliver at the right edge.
    t_min = 0.0 if args.full or not t_gen else min(t_gen)
    pad = 0.01 * (t_max - t_min) if t_max > t_min else 1.0
    ax.set_xlim(max(0.0, t_min - pad) if t_min > 0 else 0.0, t_max + pad)
    ax.set_xlabel("time since run start (s, rank 0 clock)")
    ax.set_title(title + ("" if complete else "  [INCOMPLETE]"))
    ax.grid(axis="x", alpha=0.3)
    order = [p for p in PHASE_COLORS if p in seen] + [p for p in seen if p not in PHASE_COLORS]
    handles = [plt.Rectangle((0, 0), 1, 1, color=PHASE_COLORS.get(p, "#333333")) for p in order]
    ax.legend(handles, order, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
              title="phase (top band: spans; middle: compute; bottom: comm)",
              title_fontsize=7, frameon=False)
    overlaid = overlay_telemetry(ax, telemetry, args.telemetry)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print("%s: timeline of %d ranks%s" % (args.out, world,
                                           ", telemetry %s" % overlaid if overlaid else ""))


def phase_means(path):
    """Mean over ranks of each phase's total seconds (measured iterations when marked)."""
    with open_run("phases", path) as f:
        events = read_events(f)
        label = label_of(f)
    totals = {}
    ranks = 0
    measured = any(ev is not None and (ev["iteration"] >= 0).any() for ev in events)
    for ev in events:
        if ev is None:
            continue
        ranks += 1
        keep = ev["iteration"] >= 0 if measured else np.ones(len(ev["phase"]), bool)
        for name in np.unique(ev["phase"][keep]):
            sel = keep & (ev["phase"] == name)
            totals[name] = totals.get(name, 0.0) + float((ev["t_end"][sel] -
                                                          ev["t_start"][sel]).sum())
    return label, {k: v / max(ranks, 1) for k, v in totals.items()}


def cmd_phases(args):
    runs = [phase_means(p) for p in args.runs]
    labels = [label for label, _ in runs]
    # identical strategies (repeats) are told apart by file name
    runs = [(label + "\n" + os.path.basename(path) if labels.count(label) > 1 else label, t)
            for (label, t), path in zip(runs, args.runs)]
    # The main bar stacks compute and the time blocked on communication, which do not overlap,
    # so it reads against the step wall time. Communication in flight (tp_allreduce, pp_send,
    # dp_gather) overlaps both (tp_wait is part of tp_allreduce), so it gets a thin bar beside.
    present = [p for p in PHASE_COLORS if p not in SPANS and any(p in t for _, t in runs)]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(runs) + 4), 5.5))
    x = np.arange(len(runs))
    for names, offset, width, hatch in (([p for p in present if p not in COMM], -0.08, 0.56, None),
                                        ([p for p in present if p in COMM], 0.3, 0.14, "//")):
        bottom = np.zeros(len(runs))
        for name in names:
            h = np.array([t.get(name, 0.0) for _, t in runs])
            ax.bar(x + offset, h, width, bottom=bottom, color=PHASE_COLORS[name], hatch=hatch,
                   edgecolor="white" if hatch else None, linewidth=0,
                   label=name + (" (in flight, thin bar)" if hatch else ""))
            bottom += h
    steps = [t.get("step", 0.0) for _, t in runs]
    if any(steps):
        ax.scatter(x - 0.08, steps, marker="_", s=900, color="black", zorder=3,
                   label="step wall time")
    ax.set_xticks(x)
    ax.set_xticklabels([label for label, _ in runs], rotation=20, ha="right", fontsize=9)
    ax.set_ylabel("seconds per rank (mean across ranks)")
    ax.set_title("time per phase by strategy")
    handles, names_shown = ax.get_legend_handles_labels()
    # top of the stack first, as the bars read
    ax.legend(handles[::-1], names_shown[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0),
              fontsize=8, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print("%s: %d runs" % (args.out, len(runs)))


def strategy_group(dp, tp, pp):
    parts = [n for n, v in (("dp", dp), ("tp", tp), ("pp", pp)) if v > 1]
    return "+".join(parts) if parts else "single"


def cmd_scaling(args):
    if not os.path.isdir(args.study):
        raise PlotError("scaling: %s is not a directory; scaling reads a study folder of run "
                        "files" % args.study)
    rows = []
    for path in sorted(glob.glob(os.path.join(args.study, "*.h5"))):
        try:
            with h5py.File(path, "r") as f:
                if attr_str(f, "format") != "tripar-run" or "metrics" not in f:
                    continue
                a = f.attrs
                tps = float(f["metrics"].attrs.get("tokens_per_s", np.nan))
                rows.append((int(a["world_size"]), int(a.get("dp", 1)), int(a.get("tp", 1)),
                             int(a.get("pp", 1)), tps))
        except OSError:
            print("skipping unreadable %s" % path, file=sys.stderr)
    if not rows:
        raise PlotError("scaling: no run files with /metrics in %s" % args.study)
    single = [r[4] for r in rows if r[0] == 1]
    groups = {}
    for world, dp, tp, pp, tps in rows:
        groups.setdefault(strategy_group(dp, tp, pp), []).append((world, tps))
    base = float(np.mean(single)) if single else None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    for name, pts in sorted(groups.items()):
        if name == "single":
            continue
        pts = sorted(pts + ([(1, base)] if base else []))
        w = np.array([p[0] for p in pts], float)
        t = np.array([p[1] for p in pts], float)
        ax1.plot(w, t, "o-", label=name)
        ref = base if base else t[0] / w[0]  # without a 1-rank run, the smallest run's per-rank
        ax2.plot(w, t / (w * ref), "o-", label=name)
    if base and len(groups) == 1:
        ax1.plot([1], [base], "ko", label="single rank")
    ax1.set_xlabel("ranks")
    ax1.set_ylabel("throughput (generated tokens/s)")
    ax1.set_title("throughput")
    ax2.axhline(1.0, color="gray", lw=0.8, ls="--")
    ax2.set_xlabel("ranks")
    ax2.set_ylabel("efficiency = tokens/s / (ranks x 1-rank tokens/s)")
    ax2.set_title("scaling efficiency")
    worlds = sorted({r[0] for r in rows} | ({1} if base else set()))
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(worlds)
        ax.set_xticklabels([str(w) for w in worlds])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9)
    fig.suptitle("scaling: %s" % os.path.abspath(args.study), fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print("%s: %d runs in %d groups" % (args.out, len(rows), len(groups)))


def roofline_table(path):
    """The per-phase roofline rows of `tripar report --roofline --json` (docs/cli.md): read from
    a JSON file it wrote, or made now from a run file by the tripar in $TRIPAR_BIN or on PATH
    (the FLOP and byte counts live in C, src/metrics/phase_cost.c, and are not redone here)."""
    import json
    import shutil
    import subprocess
    import tempfile
    what = "tripar report --roofline --json"
    if not h5py.is_hdf5(input_file("roofline", path)):
        doc = load_json("roofline", path, "rooflines", what)
        if not doc["rooflines"]:
            raise PlotError("roofline: %s holds no roofline" % path)
        return doc["rooflines"][0]
    open_run("roofline", path).close()
    tripar = os.environ.get("TRIPAR_BIN") or shutil.which("tripar")
    if not tripar:
        raise PlotError("roofline: %s is a run file and no tripar was found to price it "
                        "(set TRIPAR_BIN, or pass the JSON of `%s`)" % (path, what))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "roofline.json")
        done = subprocess.run([tripar, "report", "--roofline", path, "--json", out],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            raise PlotError("roofline: %s" % (lines[0] if lines else what + " failed"))
        with open(out) as f:
            return json.load(f)["rooflines"][0]


def cmd_roofline(args):
    t = roofline_table(args.run)
    rows = [r for r in t["phases"]
            if r["gflops"] is not None and r["bytes"] and r["flops"] and r["seconds"]]
    if not rows:
        raise PlotError("roofline: %s has no priced phases" % args.run)
    fig, ax = plt.subplots(figsize=(10, 6.5))
    intensity = [r["flops"] / r["bytes"] for r in rows]
    lo, hi = min(intensity) / 4, max(intensity) * 4
    if t.get("has_ceilings"):
        peak, bw = t["peak_gflops"], t["peak_gbs"]
        lo, hi = min(lo, peak / bw / 8), max(hi, peak / bw * 8)
        x = np.logspace(np.log10(lo), np.log10(hi), 200)
        ax.plot(x, np.minimum(peak, bw * x), color="black", lw=1.5,
                label="ceilings: %.1f GFLOP/s (%s), %.1f GB/s (%s)" %
                (peak, t.get("gflops_probe") or "sgemm", bw, t.get("gbs_probe") or "stream"))
        ax.axvline(peak / bw, color="grey", ls=":", lw=1)
    for r, i in zip(rows, intensity):
        marker = "o" if r["period"] == "prefill" else "s"
        ax.scatter([i], [r["gflops"]], s=60, marker=marker,
                   color=PHASE_COLORS.get(r["phase"], "#333333"), edgecolor="black", zorder=3)
        ax.annotate("%s %s" % (r["period"], r["phase"]), (i, r["gflops"]), fontsize=7,
                    xytext=(4, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte, analytic)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title("%s: rank %d (the slowest), weights %s, KV %s (o prefill, s decode)" %
                 (os.path.basename(t["file"]), t["rank"], t["weight_dtype"], t["kv_cache"]),
                 fontsize=9)
    if t.get("has_ceilings"):
        ax.legend(loc="lower right", fontsize=8)
    else:
        ax.text(0.02, 0.97, "no ceilings in the file (run with bench.roofline: true)",
                transform=ax.transAxes, va="top", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print("%s: %d phases of rank %d" % (args.out, len(rows), t["rank"]))


def pareto_front(points):
    """Indices of the points (latency, throughput) that no other point beats on both: lower or
    equal latency and higher or equal throughput, one of them strictly. Sorted by latency."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front, best = [], -1.0
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return front


def plan_label(s):
    return "b%d dp%d-tp%d-pp%d m%d%s" % (s["batch"], s["dp"], s["tp"], s["pp"], s["microbatches"],
                                         " ovl" if s["overlap"] else "")


def cmd_plan(args):
    """Predicted output tokens/s against end-to-end latency for every strategy of one or more
    `tripar plan --format json` documents of the same model and cluster (docs/planner.md), with
    the Pareto front of those that fit: the strategies no other fitting one beats on both
    axes. At one batch size the two axes move together (tokens/s = batch x new tokens / E2E),
    so give plans of several batch sizes (`tripar plan --batch B` each) to see the trade-off."""
    docs = []
    for path in args.plans:
        doc = load_json("plan", path, "strategies", "tripar plan --format json")
        if not isinstance(doc["strategies"], list) or "batch" not in doc:
            raise PlotError("plan: %s is JSON but not the output of tripar plan --format json "
                            "(no batch, or strategies is not a list)" % path)
        docs.append(doc)
    rows = []
    for doc in docs:
        for s in doc["strategies"]:
            rows.append(dict(s, batch=doc["batch"]))
    fits = [s for s in rows if s["fits"]]
    if not fits:
        raise PlotError("plan: %s has no strategy that fits" % ", ".join(args.plans))
    front = [fits[i] for i in pareto_front([(s["e2e_s"], s["tokens_per_s"]) for s in fits])]
    fig, ax = plt.subplots(figsize=(10, 6.5))
    batches = sorted({s["batch"] for s in fits})
    cmap = plt.get_cmap("viridis")
    for k, b in enumerate(batches):
        pts = [s for s in fits if s["batch"] == b]
        ok = [s for s in pts if s.get("meets_slo", True)]
        miss = [s for s in pts if not s.get("meets_slo", True)]
        color = cmap(k / max(len(batches) - 1, 1))
        ax.scatter([s["e2e_s"] * 1e3 for s in ok], [s["tokens_per_s"] for s in ok], s=14,
                   color=color, alpha=0.6, label="batch %d (%d fit)" % (b, len(pts)))
        if miss:
            ax.scatter([s["e2e_s"] * 1e3 for s in miss], [s["tokens_per_s"] for s in miss],
                       s=14, facecolors="none", edgecolors=color, alpha=0.6)
    ax.plot([s["e2e_s"] * 1e3 for s in front], [s["tokens_per_s"] for s in front], "-o",
            color="#d62728", ms=5, label="Pareto front (%d)" % len(front))
    for s in front[:14]:
        ax.annotate(plan_label(s), (s["e2e_s"] * 1e3, s["tokens_per_s"]), fontsize=7,
                    xytext=(4, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted end-to-end latency (ms)")
    ax.set_ylabel("predicted output tokens/s")
    d = docs[0]
    title = "%s on %s: %d GPUs, prompt %d, %d new tokens; %d strategies, %d fit" % (
        d["model"], d.get("cluster") or d["cluster_file"], d["gpus"], d["prompt"],
        d["new_tokens"], len(rows), len(fits))
    # the hollow markers mean something only when a plan was given an SLO to miss
    if any(doc.get("ttft_slo_s") or doc.get("tpot_slo_s") for doc in docs):
        title += " (hollow: misses the SLO)"
    if len(batches) == 1:  # tokens/s = batch x new tokens / E2E: one ordering, one best point
        title += ("\none batch size (%d): throughput falls as latency rises, so the front is "
                  "the fastest strategy alone; plan several --batch values for a trade-off"
                  % batches[0])
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    if args.front:
        with open(args.front, "w") as f:
            f.write("batch,strategy,order,e2e_s,tokens_per_s\n")
            for s in front:
                f.write("%d,%s,%s,%.9g,%.9g\n" % (s["batch"], plan_label(s), s["order"],
                                                  s["e2e_s"], s["tokens_per_s"]))
    print("%s: %d strategies, %d fit, %d on the Pareto front" % (args.out, len(rows), len(fits),
                                                                len(front)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("timeline", help="Gantt chart of phases per rank")
    t.add_argument("run")
    t.add_argument("-o", "--out", required=True)
    t.add_argument("--iteration", type=int, default=None, help="only this iteration's events")
    t.add_argument("--full", action="store_true",
                   help="start the axis at 0 to show model setup (weight_init) too")
    t.add_argument("--telemetry", default="auto",
                   choices=["auto", "none"] + sorted(TELEMETRY_SERIES),
                   help="the /telemetry field overlaid on a second axis (auto: GPU SM "
                        "utilisation with NVML, else process CPU use; none: no overlay)")
    t.set_defaults(fn=cmd_timeline)
    ph = sub.add_parser("phases", help="stacked phase bars per run")
    ph.add_argument("runs", nargs="+")
    ph.add_argument("-o", "--out", required=True)
    ph.set_defaults(fn=cmd_phases)
    s = sub.add_parser("scaling", help="throughput and efficiency vs ranks")
    s.add_argument("study")
    s.add_argument("-o", "--out", required=True)
    s.set_defaults(fn=cmd_scaling)
    rf = sub.add_parser("roofline", help="per-phase roofline of a run's slowest rank")
    rf.add_argument("run", help="a run file, or the JSON of tripar report --roofline --json")
    rf.add_argument("-o", "--out", required=True)
    rf.set_defaults(fn=cmd_roofline)
    pl = sub.add_parser("plan", help="predicted throughput against latency, with the Pareto front")
    pl.add_argument("plans", nargs="+", help="JSON of tripar plan --format json, one per batch")
    pl.add_argument("-o", "--out", required=True)
    pl.add_argument("--front", help="also write the front's strategies to this CSV")
    pl.set_defaults(fn=cmd_plan)
    args = p.parse_args(argv)
    try:
        args.fn(args)
    except PlotError as e:
        print("plot.py: %s" % e, file=sys.stderr)
        sys.exit(2)
    except OSError as e:  # an output that cannot be written, an HDF5 file h5py cannot read
        where = " %s:" % e.filename if getattr(e, "filename", None) else ""
        print("plot.py: %s:%s %s" % (args.cmd, where, e.strerror or str(e).splitlines()[0]),
              file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
