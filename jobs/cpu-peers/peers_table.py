#!/usr/bin/python3
"""Prints jobs/bench-cpu-peers.sh's tables and goals from the runs in its output folder, and
writes summary.csv and summary.json there.

Per pair of configurations (llama.cpp F32 / tripar fp32, F16 / bf16, Q8_0 / int8w, and F32 /
fp32 on 2 threads): the median over rounds of the prefill time of the prompt, its tokens/s and
the decode time per token, for llama.cpp and each tripar variant, then tripar's speed-up over
llama.cpp (llama.cpp's time / tripar's, > 1: tripar faster), the median of the per-round
ratios, so each round's pair shares that round's machine. fp32 decode is set against the time
to stream its weights once at the read bandwidth its run measured, bf16 prefill against the
sgemm rate the fp32 run of the same round measured, and the bf16 and int8w runs' logits and
tokens against fp32's (`tripar report --baseline`).

usage: peers_table.py OUTDIR   (reads OUTDIR/runs.tsv, the files it names, OUTDIR/accuracy.txt)
"""
import csv
import json
import math
import os
import re
import statistics
import sys

import h5py

PAIRS = [  # key, llama.cpp type, tripar precision, threads, title
    ("f32", "F32", "fp32", 1, "llama.cpp F32 vs tripar fp32, 1 thread"),
    ("f16", "F16", "bf16", 1, "llama.cpp F16 vs tripar bf16, 1 thread"),
    ("q8_0", "Q8_0", "int8w", 1, "llama.cpp Q8_0 vs tripar int8w, 1 thread"),
    ("f32-t2", "F32", "fp32", 2, "llama.cpp F32 vs tripar fp32, 2 threads"),
]


def median(xs):
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return statistics.median(xs) if xs else math.nan


def prefill_flops(shape):
    """The prefill's FLOPs as tripar's roofline counts them (src/metrics/roofline.c): the four
    products per layer, QK^T and PV over the causal half, and the LM head of the last row."""
    C, L, V, T, M = shape["embd"], shape["layers"], shape["vocab"], shape["prompt"], 4 * shape["embd"]
    products = L * 2.0 * T * (C * 3 * C + C * C + C * M + M * C)
    attention = L * 2.0 * 2.0 * T * T / 2.0 * C
    return products + attention + 2.0 * C * V


def read_llama(path):
    with open(path) as f:
        rec = json.load(f)[0]
    seconds = rec["samples_ns"][0] / 1e9 if rec.get("samples_ns") else rec["avg_ns"] / 1e9
    return rec, seconds


def read_tripar(path):
    with h5py.File(path, "r") as f:
        m = f["metrics"].attrs
        out = {"ttft": float(m["ttft_p50"]), "tpot": float(m["tpot_p50"])}
        if "roofline" in f["metrics"]:
            r = f["metrics/roofline"].attrs
            out["sgemm_before"] = float(r["sgemm_gflops_before"])
            out["sgemm_after"] = float(r["sgemm_gflops_after"])
            out["stream_gbs"] = float(r["stream_gbs"])
            out["stream_gbs_one"] = float(r.get("stream_gbs_one_thread", r["stream_gbs"]))
    log = path[:-3] + ".log"
    if os.path.exists(log):  # the run's own count of the bytes a decode step streams
        mt = re.search(r"to stream ([0-9.]+) MB of weights", open(log, errors="replace").read())
        if mt:
            out["weight_bytes"] = float(mt.group(1)) * 1e6
    return out


def read_accuracy(path):
    """`tripar report --baseline` prints one row per run under a header naming tok_agree,
    logit_maxrel and logit_KL; the file name is everything before the last six fields."""
    acc = {}
    if not os.path.exists(path):
        return acc
    rows = False
    for line in open(path):
        fields = line.split()
        if fields[:2] == ["file", "tok_agree"]:
            rows = True
            continue
        if rows and len(fields) >= 7:
            name = os.path.basename(" ".join(fields[:-6]))
            try:
                acc[name] = {"tok_agree": float(fields[-6]), "logit_maxrel": float(fields[-5]),
                             "logit_kl": float(fields[-4])}
            except ValueError:
                rows = False
    return acc


def fmt(x, spec):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    out = argv[1]
    meta = json.load(open(os.path.join(out, "meta.json")))
    shape = meta["shape"]
    flops = prefill_flops(shape)
    runs = list(csv.DictReader(open(os.path.join(out, "runs.tsv")), delimiter="\t"))
    acc = read_accuracy(os.path.join(out, "accuracy.txt"))

    # per (pair, engine, variant): per-round measurements
    data, loads, busy, pressure = {}, [], {}, []
    for r in runs:
        loads.append(float(r["load1"]))
        if r.get("cpu_pressure") not in (None, "", "nan"):
            pressure.append(float(r["cpu_pressure"]))
        # CPUs busy during the run, every process counted: a run alone keeps its threads busy
        if r.get("busy_cores"):
            busy.setdefault(int(r["threads"]), []).append(float(r["busy_cores"]))
        path = os.path.join(out, r["file"])
        key = (r["pair"], r["engine"], r["variant"])
        rnd = data.setdefault(key, {}).setdefault(int(r["round"]), {})
        if r["engine"] == "llama.cpp":
            rec, seconds = read_llama(path)
            if r["what"] == "pp":
                rnd["prefill_s"] = seconds
            else:
                rnd["decode_ms"] = seconds * 1e3 / rec["n_gen"]
            rnd["llama"] = {k: rec.get(k) for k in ("model_type", "type_k", "type_v", "flash_attn",
                                                    "n_threads", "n_batch", "n_ubatch", "repack",
                                                    "build_commit", "cpu_info")}
        else:
            t = read_tripar(path)
            rnd.update(t)
            rnd["prefill_s"], rnd["decode_ms"] = t["ttft"], t["tpot"] * 1e3

    rows, goals = [], []
    T = shape["prompt"]
    print(f"bench-cpu-peers: {meta['date']}, {meta['rounds']} round(s), prompt {T} tokens, "
          f"{shape['new_tokens']} new tokens, batch 1 (llama.cpp: {meta['llama_cpp']}; "
          f"{meta['tripar']})")
    if meta.get("llama_repack_off"):
        print(f"  llama.cpp ran {', '.join(meta['llama_repack_off'])}")
    cpus = meta["cpus"]
    seen = "; ".join(f"{th}-thread runs median {statistics.median(b):.2f}" for th, b in sorted(busy.items()))
    print(f"  machine: {cpus} CPUs busy during the runs, every process counted (alone a run keeps "
          f"its threads busy; at most {cpus}): {seen or '-'}; load average (1 min) after each run: "
          f"median {statistics.median(loads):.2f}, max {max(loads):.2f} (alone: about the run's "
          f"threads; more means others waited for the CPUs too)")
    if pressure:
        print(f"  CPU pressure (share of each run's time some task waited for a CPU; alone: near 0): "
              f"median {statistics.median(pressure):.2f}, max {max(pressure):.2f}")
    print("  speed-up = llama.cpp time / tripar time, the median of per-round ratios (> 1: tripar "
          "faster); other columns: medians over rounds")
    fp32_sgemm = {}  # round -> the fp32 run's sgemm rate (mean of before and after, as tripar)
    for (pair, eng, var), per in data.items():
        if pair == "f32" and eng == "tripar" and var == "fp32":
            for rd, v in per.items():
                if "sgemm_before" in v:
                    fp32_sgemm[rd] = 0.5 * (v["sgemm_before"] + v["sgemm_after"])

    for pair, ltype, prec, threads, title in PAIRS:
        lkey = (pair, "llama.cpp", ltype)
        variants = [k for k in data if k[0] == pair and k[1] == "tripar"]
        if lkey not in data and not variants:
            continue
        print(f"\n== {pair}: {title}")
        print(f"  {'engine':<10} {'variant':<22} {'prefill s':>9} {'tok/s':>7} {'decode ms':>9} "
              f"{'prefill x':>9} {'decode x':>8}  notes")
        lper = data.get(lkey, {})
        lrow = {"pair": pair, "engine": "llama.cpp", "variant": ltype, "threads": threads,
                "prefill_s": median(v.get("prefill_s") for v in lper.values()),
                "decode_ms": median(v.get("decode_ms") for v in lper.values())}
        lrow["prefill_tok_s"] = T / lrow["prefill_s"] if lrow["prefill_s"] else math.nan
        info = next(iter(lper.values()), {}).get("llama", {})
        lnote = (f"KV {info.get('type_k')}/{info.get('type_v')}, flash_attn "
                 f"{info.get('flash_attn')}, ubatch {info.get('n_ubatch')}") if info else ""
        print(f"  {'llama.cpp':<10} {ltype:<22} {fmt(lrow['prefill_s'], '9.3f')} "
              f"{fmt(lrow['prefill_tok_s'], '7.1f')} {fmt(lrow['decode_ms'], '9.2f')} "
              f"{'':>9} {'':>8}  {lnote}")
        rows.append(lrow)
        for key in sorted(variants, key=lambda k: meta["variant_order"].index(k[2])
                          if k[2] in meta["variant_order"] else 99):
            var, per = key[2], data[key]
            row = {"pair": pair, "engine": "tripar", "variant": var, "threads": threads,
                   "prefill_s": median(v["prefill_s"] for v in per.values()),
                   "decode_ms": median(v["decode_ms"] for v in per.values())}
            row["prefill_tok_s"] = T / row["prefill_s"]
            row["prefill_speedup"] = median(lper[rd]["prefill_s"] / v["prefill_s"]
                                            for rd, v in per.items() if rd in lper)
            row["decode_speedup"] = median(lper[rd]["decode_ms"] / v["decode_ms"]
                                           for rd, v in per.items() if rd in lper)
            notes = []
            gf = [flops / v["prefill_s"] / 1e9 for v in per.values()]
            row["prefill_gflops"] = median(gf)
            if any("stream_gbs" in v for v in per.values()):
                wb = median(v.get("weight_bytes") for v in per.values())
                bw1 = median(v.get("stream_gbs_one") for v in per.values())
                bw = median(v.get("stream_gbs") for v in per.values())
                row.update(weight_bytes=wb, stream_gbs=bw, stream_gbs_one_thread=bw1)
                # bound per round with that round's bandwidth, then the median ratio
                row["decode_vs_bound"] = median(v["decode_ms"] / (v["weight_bytes"] / v["stream_gbs"] / 1e6)
                                                for v in per.values() if "weight_bytes" in v)
                row["bound_ms"] = wb / bw / 1e6
                if threads == 1:
                    notes.append(f"stream bound {fmt(row['bound_ms'], '.2f')} ms ({wb / 1e6:.1f} MB "
                                 f"at {bw:.2f} GB/s): {fmt(row['decode_vs_bound'], '.2f')}x")
                else:
                    row["bound_one_ms"] = wb / bw1 / 1e6
                    row["decode_vs_bound_one"] = median(
                        v["decode_ms"] / (v["weight_bytes"] / v["stream_gbs_one"] / 1e6)
                        for v in per.values() if "weight_bytes" in v)
                    notes.append(f"bound 1 thread {row['bound_one_ms']:.2f} ms ({bw1:.2f} GB/s): "
                                 f"{fmt(row['decode_vs_bound_one'], '.2f')}x; {threads} threads "
                                 f"{row['bound_ms']:.2f} ms ({bw:.2f} GB/s, {bw / bw1:.2f}x one): "
                                 f"{fmt(row['decode_vs_bound'], '.2f')}x")
                    lrow["decode_vs_bound_one"] = median(
                        lper[rd]["decode_ms"] / (v["weight_bytes"] / v["stream_gbs_one"] / 1e6)
                        for rd, v in per.items() if rd in lper and "weight_bytes" in v)
                    lrow["decode_vs_bound"] = median(
                        lper[rd]["decode_ms"] / (v["weight_bytes"] / v["stream_gbs"] / 1e6)
                        for rd, v in per.items() if rd in lper and "weight_bytes" in v)
                    notes.append(f"llama.cpp against the same bounds: "
                                 f"{fmt(lrow['decode_vs_bound_one'], '.2f')}x, "
                                 f"{fmt(lrow['decode_vs_bound'], '.2f')}x")
            if "sgemm_before" in next(iter(per.values())):
                sg = median(0.5 * (v["sgemm_before"] + v["sgemm_after"]) for v in per.values())
                row["sgemm_gflops"] = sg
                notes.append(f"prefill {row['prefill_gflops']:.1f} GFLOP/s vs sgemm {sg:.1f} "
                             f"({100 * row['prefill_gflops'] / sg:.0f}%)")
            if prec == "bf16" and threads == 1:
                row["prefill_vs_fp32_sgemm"] = median(flops / v["prefill_s"] / 1e9 / fp32_sgemm[rd]
                                                      for rd, v in per.items() if rd in fp32_sgemm)
                notes.append(f"prefill {row['prefill_gflops']:.1f} GFLOP/s = "
                             f"{fmt(row['prefill_vs_fp32_sgemm'], '.2f')}x fp32 sgemm "
                             f"({fmt(median(fp32_sgemm.values()), '.1f')})")
            a = acc.get(f"acc-{var}.h5")
            if a and threads == 1:
                row.update(a)
                notes.append(f"vs fp32: tokens {a['tok_agree']:.3f}, KL {a['logit_kl']:.2e}, "
                             f"max-rel {a['logit_maxrel']:.2e}")
            print(f"  {'tripar':<10} {var:<22} {fmt(row['prefill_s'], '9.3f')} "
                  f"{fmt(row['prefill_tok_s'], '7.1f')} {fmt(row['decode_ms'], '9.2f')} "
                  f"{fmt(row['prefill_speedup'], '8.2f')}x {fmt(row['decode_speedup'], '7.2f')}x  "
                  + "; ".join(notes))
            rows.append(row)

            def goal(text, value, ok):
                status = "-" if value is None or math.isnan(value) else ("PASS" if ok(value) else "MISS")
                goals.append({"goal": text, "variant": var, "value": value, "status": status})

            if threads == 1 and prec == "fp32":
                goal("fp32 decode >= 1.25x faster than llama.cpp F32", row["decode_speedup"],
                     lambda x: x >= 1.25)
                goal("fp32 decode <= 1.15x the weight-streaming bound", row.get("decode_vs_bound", math.nan),
                     lambda x: x <= 1.15)
                goal("fp32 prefill >= 1.25x faster than llama.cpp F32", row["prefill_speedup"],
                     lambda x: x >= 1.25)
            if threads == 1 and prec == "bf16":
                goal("bf16 decode >= llama.cpp F16 (speed-up >= 1)", row["decode_speedup"],
                     lambda x: x >= 1.0)
                goal("bf16 prefill >= 1.5x the fp32 sgemm rate", row.get("prefill_vs_fp32_sgemm", math.nan),
                     lambda x: x >= 1.5)
            if threads == 1 and prec == "int8w":
                goal("int8w decode >= llama.cpp Q8_0 (speed-up >= 1)", row["decode_speedup"],
                     lambda x: x >= 1.0)

    print("\n== goals (medians of per-round ratios; a benchmark: a MISS does not fail the run)")
    for g in goals:
        print(f"  {g['status']:<4}  {g['goal']} [{g['variant']}]: {fmt(g['value'], '.2f')}x")

    fields = ["pair", "engine", "variant", "threads", "prefill_s", "prefill_tok_s", "decode_ms",
              "prefill_speedup", "decode_speedup", "prefill_gflops", "sgemm_gflops",
              "prefill_vs_fp32_sgemm", "weight_bytes", "stream_gbs", "stream_gbs_one_thread",
              "bound_ms", "decode_vs_bound", "bound_one_ms", "decode_vs_bound_one", "tok_agree",
              "logit_kl", "logit_maxrel"]
    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow(row)
    per_round = {f"{p}/{e}/{v}": per for (p, e, v), per in data.items()}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "goals": goals, "per_round": per_round,
                   "load1": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
                   "busy_cores": {str(th): {"median": median(b), "max": max(b)} for th, b in busy.items()},
                   "cpu_pressure": {"median": median(pressure), "max": max(pressure, default=math.nan)}},
                  f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
