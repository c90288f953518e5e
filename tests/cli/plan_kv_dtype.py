#!/usr/bin/python3
"""The KV cache's type in `tripar plan` (docs/planner.md): Llama 2 7B at batch 384, prompt 128,
128 new tokens on one 80 GB A100 fits with fp16 weights, whose auto KV cache is fp16 (48 GiB,
as TensorRT-LLM ran it), and fits nowhere with an fp32 cache (96 GiB).

  plan_kv_dtype.py TRIPAR CLUSTER.yaml"""
import json
import subprocess
import sys

tripar, cluster = sys.argv[1], sys.argv[2]
args = [tripar, "plan", "--preset", "llama2-7b", "--cluster", cluster, "--gpus", "1", "--batch",
        "384", "--prompt", "128", "--new-tokens", "128", "--precision", "fp16"]
GiB = 1 << 30

out = subprocess.run(args + ["--format", "json"], capture_output=True, text=True)
assert out.returncode == 0, out.stderr
plan = json.loads(out.stdout)
assert plan["kv_dtype"] == "fp16", plan["kv_dtype"]
best = plan["strategies"][0]
assert best["fits"] and (best["dp"], best["tp"], best["pp"]) == (1, 1, 1), best
# 32 layers x 384 sequences x 256 positions x 4096 (32 kv heads x 128) x 2 (k, v) x 2 bytes
assert best["kv_bytes"] == 32 * 384 * 256 * 4096 * 2 * 2 == 48 * GiB, best["kv_bytes"]

text = subprocess.run(args, capture_output=True, text=True)
assert text.returncode == 0 and "\nkv cache: fp16 (model.kv_dtype auto for fp16 weights" in text.stdout, text

for kv, gib in (("int8", None), ("bf16", 48)):
    out = subprocess.run(args + ["--kv-dtype", kv, "--format", "json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    best = json.loads(out.stdout)["strategies"][0]
    if gib:
        assert best["kv_bytes"] == gib * GiB, (kv, best["kv_bytes"])
    else:  # int8: 128 values and one fp32 scale per row
        assert best["kv_bytes"] == 32 * 384 * 256 * 32 * 2 * (128 + 4), (kv, best["kv_bytes"])

fp32 = subprocess.run(args + ["--kv-dtype", "fp32"], capture_output=True, text=True)
assert fp32.returncode == 2, fp32
assert "fits nowhere" in fp32.stderr and "KV cache 96.0" in fp32.stderr, fp32.stderr
print("ok: fp16 KV fits in 48 GiB, fp32 KV needs 96 GiB")
