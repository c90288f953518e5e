#!/usr/bin/python3
"""Prints jobs/bench-real.sh's tables from the runs in its output folder.

Speed: per engine, the median over rounds of the prefill time of the prompt (and its tokens/s)
and of the decode time per token, then tripar's speed-up over llama.cpp (llama.cpp's time /
tripar's, > 1: tripar faster), the median of the per-round ratios, so each round's pair shares
that round's machine. Perplexity: tripar's and llama-perplexity's, for the Q4_1 file and
llama.cpp's Q8_0 requantization of it, against the goals (1% and 0.5%), and llama.cpp's F32
file of the same weights, which runs without quantized activations.

usage: real_table.py OUTDIR   (reads OUTDIR/runs.tsv, meta.json and the files they name)
"""
import csv
import json
import os
import re
import statistics
import sys

import h5py


def llama_seconds(path):
    with open(path) as f:
        rec = json.load(f)[0]
    return rec["samples_ns"][0] / 1e9 if rec.get("samples_ns") else rec["avg_ns"] / 1e9


def llama_ppl(path):
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", open(path, errors="replace").read())
    if not m:
        sys.exit(f"real_table.py: {path} has no 'Final estimate' line")
    return float(m.group(1)), float(m.group(2))


def tripar_ppl(path):
    with h5py.File(path, "r") as f:
        a = f["output/nll"].attrs
        return float(a["perplexity"]), int(a["count"])


def main(out):
    meta = json.load(open(os.path.join(out, "meta.json")))
    prompt, new = meta["prompt"], meta["new_tokens"]
    per_round = {}  # round -> variant -> (prefill s, decode s per token)
    with open(os.path.join(out, "runs.tsv")) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["engine"] == "llama.cpp":
                base = os.path.join(out, row["file"])
                t = (llama_seconds(base + "-pp.json"), llama_seconds(base + "-tg.json") / new)
            else:
                with h5py.File(os.path.join(out, row["file"]), "r") as h:
                    m = h["metrics"].attrs
                    t = (float(m["ttft_p50"]), float(m["tpot_p50"]))
            per_round.setdefault(row["round"], {})[row["variant"]] = t
    variants = ["Q4_1"] + [v for v in ("fp32", "bf16", "int8w", "q4_1")
                           if any(v in r for r in per_round.values())]
    repack = "" if meta["repack"] else ", --repack 0 (weight repacking crashes: the AMX path)"
    print(f"SmolLM2-135M-Instruct, 1 thread pinned, prompt {prompt}, {new} new tokens, "
          f"{meta['rounds']} round(s), {meta['cpu']}")
    print(f"llama.cpp: {meta['llama_cpp']} on the Q4_1 GGUF{repack}; tripar: {meta['tripar']} on "
          f"its import (OPENBLAS_CORETYPE={meta['openblas_coretype'] or 'unset'})\n")
    print(f"{'engine':22s} {'prefill s':>10s} {'prefill tok/s':>14s} {'decode ms/tok':>14s} "
          f"{'speed-up prefill':>17s} {'speed-up decode':>16s}")
    for v in variants:
        rows = [r[v] for r in per_round.values() if v in r]
        pre = statistics.median(x[0] for x in rows)
        dec = statistics.median(x[1] for x in rows)
        name = "llama.cpp Q4_1" if v == "Q4_1" else f"tripar {v}"
        if v == "Q4_1":
            ups = ("", "")
        else:
            pairs = [(r["Q4_1"], r[v]) for r in per_round.values() if v in r and "Q4_1" in r]
            ups = tuple(f"{statistics.median(l[i] / t[i] for l, t in pairs):.2f}x" for i in (0, 1))
        print(f"{name:22s} {pre:10.3f} {prompt / pre:14.1f} {dec * 1e3:14.2f} {ups[0]:>17s} {ups[1]:>16s}")

    print(f"\nPerplexity of the shipped text, windows of {meta['window']} tokens (the second half of "
          "each scored, llama-perplexity's rule)")
    print(f"{'file':6s} {'llama.cpp':>16s} {'tripar as':>10s} {'tripar':>9s} {'tokens':>7s} {'difference':>11s} "
          f"{'goal':>6s}  {'llama.cpp F32 twin':>18s} {'tripar - twin':>14s}")
    notes = []
    rows = (("Q4_1", "q41", "fp32", 1.0), ("Q4_1", "q41-keep", "q4_1", 1.0),
            ("Q8_0", "q80", "fp32", 0.5), ("Q8_0", "q80-int8w-g32", "int8w g32", 0.5),
            ("Q8_0", "q80-keep", "q8_0", 0.5))
    for t, name, how, goal in rows:
        lp, err = llama_ppl(os.path.join(out, f"ppl-llama.cpp-{t}.log"))
        twin, _ = llama_ppl(os.path.join(out, f"ppl-llama.cpp-{t}-as-F32.log"))
        tp, count = tripar_ppl(os.path.join(out, f"ppl-tripar-{name}.h5"))
        diff = 100 * (tp - lp) / lp
        verdict = "PASS" if abs(diff) <= goal else "MISS"
        print(f"{t:6s} {lp:9.4f} ±{err:<6.4f} {how:>10s} {tp:9.4f} {count:7d} {diff:+10.3f}% {goal:4.1f}% {verdict}"
              f"  {twin:18.4f} {100 * (tp - twin) / twin:+13.4f}%")
        gap = tp - lp
        if gap and how == "fp32":
            notes.append(f"{t}: of tripar - llama.cpp = {gap:+.4f}, llama.cpp's quantized activations "
                         f"(its {t} run against its F32 twin) account for {twin - lp:+.4f} "
                         f"({100 * (twin - lp) / gap:.1f}%); {tp - twin:+.4f} remains between "
                         "tripar and llama.cpp computing in F32.")
    print("The F32 twin is llama-quantize's F32 copy of the same file: the same weights, "
          "dequantized, which llama.cpp multiplies without quantizing the activations. tripar "
          "int8w g32 (quantize_head) holds the Q8_0 blocks exactly and quantizes activations "
          "per 32, as llama.cpp's Q8_0 does; q4_1 and q8_0 are the GGUF's blocks as stored "
          "(import-gguf --precision keep), computed with activations in int8 blocks of 32.")
    for n in notes:
        print(n)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: real_table.py OUTDIR")
    main(sys.argv[1])
