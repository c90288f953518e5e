#!/usr/bin/python3
"""Prints jobs/bench-cpu-peers.sh's tables and bars from the runs in its output folder, and
writes summary.csv and summary.json there.

One block per model (the GPT-2 124M shape, SmolLM2-135M), thread count (1, 2) and pair
(llama.cpp F32 / tripar fp32, BF16 / bf16, Q8_0 / q8_0 and int8w, Q4_0 / q4_0, Q4_K_M / q4_k):
the median over rounds of the prefill time of the prompt, its tokens/s and the decode time per
token, for llama.cpp and each tripar variant, then tripar's speed-up over llama.cpp (llama.cpp's
time / tripar's, > 1: tripar faster), the median of the per-round ratios, so each round's pair
shares that round's machine. Each tripar row's decode is set against its streaming bound: the
weight and KV-cache bytes one decode step reads (tripar's own count, `report --roofline`: the
decode period's weight_bytes + kv_bytes over its steps) at the read bandwidth that the fp32 run
of the same model, thread count and round measured (bench.roofline's stream_gbs). The GPT-2
variants' logits and tokens are compared with fp32's (`tripar report --baseline`).

usage: peers_table.py OUTDIR   (reads OUTDIR/meta.json, runs.tsv, roofline.json, accuracy.txt)
"""
import csv
import json
import math
import os
import statistics
import sys

import h5py

MODEL_TITLES = {"gpt2": "GPT-2 124M shape, random weights", "smollm2": "SmolLM2-135M"}
DECODE_X, PREFILL_X, BOUND_X = 1.25, 1.0, 1.15  # issue 27's bars
KV_BAR = ("16-bit KV at 4096 positions halves the attention's bytes and time (within 15%): "
          "measured by build/tests/bench_attention --kv 4096, not here (docs/performance.md, "
          "\"KV cache type\")")


def median(xs):
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return statistics.median(xs) if xs else math.nan


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
            out["sgemm"] = 0.5 * (float(r["sgemm_gflops_before"]) + float(r["sgemm_gflops_after"]))
            out["stream_gbs"] = float(r["stream_gbs"])
    return out


def read_costs(path):
    """Per run file (base name): the prefill's FLOPs and the weight and KV bytes of one decode
    step, from `tripar report --roofline --json` (the decode period's sums over its steps)."""
    costs = {}
    if not os.path.exists(path):
        return costs
    for t in json.load(open(path))["rooflines"]:
        per = {"prefill": {}, "decode": {}}
        for ph in t["phases"]:
            if ph["period"] in per:
                per[ph["period"]][ph["phase"]] = ph
        steps = per["decode"].get("step", {}).get("events") or 0
        dec = [ph for name, ph in per["decode"].items() if name != "step"]
        costs[os.path.basename(t["file"])] = {
            "prefill_flops": sum(ph["flops"] or 0 for n, ph in per["prefill"].items() if n != "step"),
            "weight_bytes": sum(ph["weight_bytes"] or 0 for ph in dec) / steps if steps else math.nan,
            "kv_bytes": sum(ph["kv_bytes"] or 0 for ph in dec) / steps if steps else math.nan,
            "weight_dtype": t.get("weight_dtype")}
    return costs


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


def load(out):
    """(data, machine): data[(model, threads, pair, engine, variant)][round] = measurements."""
    runs = list(csv.DictReader(open(os.path.join(out, "runs.tsv")), delimiter="\t"))
    costs = read_costs(os.path.join(out, "roofline.json"))
    data, machine = {}, {"load1": [], "busy": {}, "pressure": []}
    for r in runs:
        machine["load1"].append(float(r["load1"]))
        if r.get("cpu_pressure") not in (None, "", "nan"):
            machine["pressure"].append(float(r["cpu_pressure"]))
        # CPUs busy during the run, every process counted: a run alone keeps its threads busy
        if r.get("busy_cores"):
            machine["busy"].setdefault(int(r["threads"]), []).append(float(r["busy_cores"]))
        path = os.path.join(out, r["file"])
        key = (r["model"], int(r["threads"]), r["pair"], r["engine"], r["variant"])
        rnd = data.setdefault(key, {}).setdefault(int(r["round"]), {})
        if r["engine"] == "llama.cpp":
            rec, seconds = read_llama(path)
            if r["what"] == "pp":
                rnd["prefill_s"] = seconds
            else:
                rnd["decode_ms"] = seconds * 1e3 / rec["n_gen"]
            rnd["llama"] = {k: rec.get(k) for k in ("model_type", "model_size", "type_k", "type_v",
                                                    "flash_attn", "n_threads", "n_ubatch", "repack")}
        else:
            t = read_tripar(path)
            rnd.update(t)
            rnd["prefill_s"], rnd["decode_ms"] = t["ttft"], t["tpot"] * 1e3
            rnd.update(costs.get(r["file"], {}))
    return data, machine


def print_header(meta, machine):
    shape = meta["shape"]
    print(f"bench-cpu-peers: {meta['date']}, {meta['rounds']} round(s), prompt {shape['prompt']} "
          f"tokens, {shape['new_tokens']} new tokens, batch 1 (llama.cpp: {meta['llama_cpp']}; "
          f"{meta['tripar']})")
    if meta.get("llama_repack_off"):
        print(f"  llama.cpp ran {', '.join(meta['llama_repack_off'])}")
    for note in meta.get("skipped", []):
        print(f"  {note}")
    cpus, busy, loads, pressure = meta["cpus"], machine["busy"], machine["load1"], machine["pressure"]
    seen = "; ".join(f"{th}-thread runs median {statistics.median(b):.2f}" for th, b in sorted(busy.items()))
    print(f"  machine: {cpus} CPUs busy during the runs, every process counted (alone a run keeps "
          f"its threads busy; at most {cpus}): {seen or '-'}; load average (1 min) after each run: "
          f"median {statistics.median(loads):.2f}, max {max(loads):.2f} (alone: about the run's "
          f"threads; more means others waited for the CPUs too)")
    if pressure:
        print(f"  CPU pressure (share of each run's time some task waited for a CPU; alone: near 0): "
              f"median {statistics.median(pressure):.2f}, max {max(pressure):.2f}")
    print("  x = llama.cpp time / tripar time, the median of per-round ratios (> 1: tripar faster); "
          "bound = (weight + KV bytes of a decode step) / the fp32 run's read bandwidth, same "
          "model, threads and round; other columns: medians over rounds")


def tripar_row(base, per, lper, bw, acc):
    """A tripar variant's row (a dict) and its notes, against llama.cpp's rounds `lper` and the
    bandwidth of each round `bw`."""
    row = dict(base, prefill_s=median(v["prefill_s"] for v in per.values()),
               decode_ms=median(v["decode_ms"] for v in per.values()))
    row["prefill_tok_s"] = base["prompt"] / row["prefill_s"]
    row["prefill_speedup"] = median(lper[rd]["prefill_s"] / v["prefill_s"]
                                    for rd, v in per.items() if "prefill_s" in lper.get(rd, {}))
    row["decode_speedup"] = median(lper[rd]["decode_ms"] / v["decode_ms"]
                                   for rd, v in per.items() if "decode_ms" in lper.get(rd, {}))
    row["weight_mb"] = median(v.get("weight_bytes", math.nan) / 1e6 for v in per.values())
    row["kv_mb"] = median(v.get("kv_bytes", math.nan) / 1e6 for v in per.values())
    row["stream_gbs"] = median(bw.get(rd) for rd in per)
    # the bound of each round with that round's bandwidth, then the median ratio
    bounds = {rd: (v.get("weight_bytes", math.nan) + v.get("kv_bytes", math.nan)) / bw[rd] / 1e6
              for rd, v in per.items() if rd in bw}
    row["bound_ms"] = median(bounds.values())
    row["decode_vs_bound"] = median(per[rd]["decode_ms"] / b for rd, b in bounds.items())
    row["prefill_gflops"] = median(v.get("prefill_flops", math.nan) / v["prefill_s"] / 1e9
                                   for v in per.values())
    notes = [f"{fmt(row['weight_mb'], '.1f')} MB weights + {fmt(row['kv_mb'], '.1f')} MB KV at "
             f"{fmt(row['stream_gbs'], '.2f')} GB/s"]
    dtype = next(iter(per.values())).get("weight_dtype")
    if dtype:
        notes.append(f"weights {dtype}")
    if any("sgemm" in v for v in per.values()):
        row["sgemm_gflops"] = median(v.get("sgemm") for v in per.values())
        notes.append(f"prefill {fmt(row['prefill_gflops'], '.1f')} GFLOP/s vs sgemm "
                     f"{fmt(row['sgemm_gflops'], '.1f')}")
    if acc:
        row.update(acc)
        notes.append(f"vs fp32: tokens {acc['tok_agree']:.3f}, KL {acc['logit_kl']:.2e}")
    return row, notes


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    out = argv[1]
    meta = json.load(open(os.path.join(out, "meta.json")))
    data, machine = load(out)
    acc = read_accuracy(os.path.join(out, "accuracy.txt"))
    order = meta["variant_order"]
    prompt = meta["shape"]["prompt"]
    print_header(meta, machine)

    rows, goals = [], []
    for model in meta["models"]:
        for threads in meta["threads"]:
            # the read bandwidth of this model and thread count, per round: the fp32 run's
            bw = {rd: v["stream_gbs"] for rd, v in
                  data.get((model, threads, "f32", "tripar", "fp32"), {}).items() if "stream_gbs" in v}
            for pair, ltype in meta["pairs"]:
                lkey = (model, threads, pair, "llama.cpp", ltype)
                variants = sorted((k for k in data if k[:3] == (model, threads, pair) and k[3] == "tripar"),
                                  key=lambda k: order.index(k[4]) if k[4] in order else 99)
                title = f"{model} {ltype}, {threads} thread{'s' if threads > 1 else ''}"
                if lkey not in data and not variants:
                    why = next((s for s in meta.get("skipped", []) if model.lower() in s.lower()
                                and ltype in s), None)
                    if why:
                        print(f"\n== {title} ({MODEL_TITLES.get(model, model)}): {why}")
                        goals.append({"goal": f"{title}: every bar", "variant": "-",
                                      "value": math.nan, "status": "n/a"})
                    continue
                print(f"\n== {title} ({MODEL_TITLES.get(model, model)})")
                print(f"  {'engine':<10} {'variant':<18} {'prefill s':>9} {'tok/s':>7} {'decode ms':>9} "
                      f"{'prefill x':>9} {'decode x':>8} {'bound ms':>8} {'vs bound':>8}  notes")
                lper = data.get(lkey, {})
                base = {"model": model, "pair": pair, "threads": threads, "prompt": prompt}
                lrow = dict(base, engine="llama.cpp", variant=ltype,
                            prefill_s=median(v.get("prefill_s") for v in lper.values()),
                            decode_ms=median(v.get("decode_ms") for v in lper.values()))
                lrow["prefill_tok_s"] = prompt / lrow["prefill_s"] if lrow["prefill_s"] else math.nan
                info = next(iter(lper.values()), {}).get("llama", {})
                lnote = (f"{info.get('model_type')}, KV {info.get('type_k')}/{info.get('type_v')}, "
                         f"flash_attn {info.get('flash_attn')}, repack {info.get('repack')}") if info else ""
                print(f"  {'llama.cpp':<10} {ltype:<18} {fmt(lrow['prefill_s'], '9.3f')} "
                      f"{fmt(lrow['prefill_tok_s'], '7.1f')} {fmt(lrow['decode_ms'], '9.2f')} "
                      f"{'':>9} {'':>8} {'':>8} {'':>8}  {lnote}")
                rows.append(lrow)
                for key in variants:
                    var = key[4]
                    a = acc.get(f"acc-{var}.h5") if model == "gpt2" and threads == 1 else None
                    row, notes = tripar_row(dict(base, engine="tripar", variant=var), data[key], lper, bw, a)
                    print(f"  {'tripar':<10} {var:<18} {fmt(row['prefill_s'], '9.3f')} "
                          f"{fmt(row['prefill_tok_s'], '7.1f')} {fmt(row['decode_ms'], '9.2f')} "
                          f"{fmt(row['prefill_speedup'], '8.2f')}x {fmt(row['decode_speedup'], '7.2f')}x "
                          f"{fmt(row['bound_ms'], '8.2f')} {fmt(row['decode_vs_bound'], '7.2f')}x  "
                          + "; ".join(notes))
                    rows.append(row)
                    for text, value, ok in (
                            (f"decode >= {DECODE_X}x llama.cpp", row["decode_speedup"], lambda x: x >= DECODE_X),
                            (f"prefill >= {PREFILL_X}x llama.cpp", row["prefill_speedup"], lambda x: x >= PREFILL_X),
                            (f"decode <= {BOUND_X}x the weights + KV streaming bound", row["decode_vs_bound"],
                             lambda x: x <= BOUND_X)):
                        status = "-" if math.isnan(value) else ("PASS" if ok(value) else "MISS")
                        goals.append({"goal": f"{title}: {text}", "variant": var, "value": value,
                                      "status": status})

    print("\n== bars (issue 27; medians of per-round ratios; a benchmark: a MISS does not fail the run)")
    for g in goals:
        if g["status"] == "n/a":
            print(f"  n/a   {g['goal']}: not run")
        else:
            print(f"  {g['status']:<4}  {g['goal']} [{g['variant']}]: {fmt(g['value'], '.2f')}x")
    counts = {s: sum(g["status"] == s for g in goals) for s in ("PASS", "MISS", "-", "n/a")}
    print(f"  {counts['PASS']} PASS, {counts['MISS']} MISS, {counts['-']} without a figure, "
          f"{counts['n/a']} not run")
    print(f"  and the third bar, {KV_BAR}")

    fields = ["model", "pair", "engine", "variant", "threads", "prefill_s", "prefill_tok_s",
              "decode_ms", "prefill_speedup", "decode_speedup", "prefill_gflops", "sgemm_gflops",
              "weight_mb", "kv_mb", "stream_gbs", "bound_ms", "decode_vs_bound", "tok_agree",
              "logit_kl", "logit_maxrel"]
    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow(row)
    per_round = {"/".join(map(str, k)): per for k, per in data.items()}
    loads, busy, pressure = machine["load1"], machine["busy"], machine["pressure"]
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "goals": goals, "per_round": per_round,
                   "load1": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
                   "busy_cores": {str(th): {"median": median(b), "max": max(b)} for th, b in busy.items()},
                   "cpu_pressure": {"median": median(pressure), "max": max(pressure, default=math.nan)}},
                  f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
