#!/usr/bin/python3
"""Checks the /metrics of run files against numpy: the percentiles, per-rank rates and warm
start in the attributes must follow from the stored per-iteration series (and, with
--arrival, the /metrics/arrival summaries from the per-request series). Usage:
check_metrics.py [--arrival] RUN.h5..."""
import sys

import h5py
import numpy as np


def close(a, b, what):
    if not np.isclose(a, b, rtol=1e-9, atol=1e-12):
        sys.exit(f"{what}: file says {a!r}, numpy says {b!r}")


def check(path, arrival):
    with h5py.File(path, "r") as f:
        if int(f.attrs["complete"]) != 1:
            sys.exit(f"{path}: complete != 1")
        m = f["metrics"]
        a = m.attrs
        world = int(f.attrs["world_size"])
        lat, ttft = m["latency"][:], m["ttft"][:]
        if len(lat) != int(a["iterations"]) or len(lat) == 0:
            sys.exit(f"{path}: {len(lat)} latencies for {a['iterations']} iterations")
        for name in ("latency", "ttft", "tpot"):
            series = m[name][:]
            for q in (50, 90, 99):
                close(a[f"{name}_p{q}"], np.percentile(series, q), f"{path} {name}_p{q}")
            close(a[f"{name}_mean"], series.mean(), f"{path} {name}_mean")
        gen, req = float(a["generated_tokens"]), float(a["requests"])
        close(a["tokens_per_s"], gen / lat.mean(), f"{path} tokens_per_s")
        for q in (50, 90, 99):
            close(a[f"tokens_per_s_p{q}"], gen / np.percentile(lat, q), f"{path} tokens_per_s_p{q}")
            close(a[f"requests_per_s_p{q}"], req / np.percentile(lat, q), f"{path} requests_per_s_p{q}")
        close(a["tokens_per_s_per_rank"], a["tokens_per_s"] / world, f"{path} per rank")
        close(a["tokens_per_s_per_replica"], a["tokens_per_s"] / int(f.attrs["dp"]), f"{path} per replica")
        close(a["warm_start_seconds"], np.percentile(ttft, 50), f"{path} warm start")
        if not a["cold_start_seconds"] > a["warm_start_seconds"]:
            sys.exit(f"{path}: cold start {a['cold_start_seconds']} not above warm start")
        if m["peak_memory_bytes"].shape != (world,) or m["peak_memory_bytes"][:].min() <= 0:
            sys.exit(f"{path}: peak_memory_bytes not one positive value per rank")
        if arrival:
            g = m["arrival"]
            ga = g.attrs
            lat = g["latency"][:]
            if len(g["arrival"]) != int(ga["arrived"]) or len(lat) != int(ga["served"]):
                sys.exit(f"{path}: arrival series lengths disagree with arrived/served")
            if int(ga["served"]) + int(ga["unserved"]) != int(ga["arrived"]) or int(ga["served"]) == 0:
                sys.exit(f"{path}: served + unserved != arrived, or nothing served")
            if g["batch_size"][:].sum() != int(ga["served"]) or g["batch_size"][:].max() > len(f["output/tokens"]):
                sys.exit(f"{path}: batch sizes do not add up to the served requests")
            arr = g["arrival"][:]
            if np.any(np.diff(arr) < 0) or arr.max() >= ga["duration"]:
                sys.exit(f"{path}: arrivals not ascending within the duration")
            for name in ("latency", "queue_delay", "ttft"):
                s = g[name][:]
                if s.min() < 0:
                    sys.exit(f"{path}: negative {name}")
                for q in (50, 90, 99):
                    close(ga[f"{name}_p{q}"], np.percentile(s, q), f"{path} arrival {name}_p{q}")
            if np.any(g["queue_delay"][:] > g["ttft"][:]) or np.any(g["ttft"][:] > lat):
                sys.exit(f"{path}: queue delay > TTFT or TTFT > latency for some request")
            close(ga["achieved_requests_per_s"], ga["served"] / ga["wall_seconds"], f"{path} achieved rate")


def main():
    args = sys.argv[1:]
    arrival = "--arrival" in args
    files = [a for a in args if a != "--arrival"]
    if not files:
        sys.exit(__doc__)
    for path in files:
        check(path, arrival)
        print(f"{path}: metrics consistent")


if __name__ == "__main__":
    main()
