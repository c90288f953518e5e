"""--dry-run's memory per rank for llama3-70b at tp = 8 against the hand count written out
here line by line and printed in docs/jobs.md; every preset plans on a few meshes.
usage: check_dry_run_presets.py TRIPAR SOURCE_DIR"""
import subprocess, sys, yaml

tripar, src = sys.argv[1], sys.argv[2]
MiB = 1 << 20


def dry_run(job, *sets):
    args = [tripar, "run", job, "--dry-run"]
    for s in sets:
        args += ["--set", s]
    out = subprocess.run(args, capture_output=True, text=True)
    assert out.returncode == 0, (args, out.stderr)
    return yaml.safe_load(out.stdout)


# Llama 3 70B: L 80, C 8192, 64 heads over 8 kv heads of 128, intermediate 28672, vocab 128256.
L, C, H, KV, hd, I, V, tp = 80, 8192, 64, 8, 128, 28672, 128256, 8
h, kv, i, v = H // tp, KV // tp, I // tp, V // tp          # 8 heads, 1 kv head, 3584, 16032
bf16, f32 = 2, 4
weights = (L * ((h + 2 * kv) * hd * C        # qkv_w (1280, 8192)
                + C * h * hd                 # proj_w (o_proj) (8192, 1024)
                + 2 * i * C                  # gate_up_w (7168, 8192)
                + C * i) * bf16              # down_w (8192, 3584)
           + 2 * L * C * f32                 # ln1_g, ln2_g
           + v * C * f32                     # wte, fp32 (the embedding is not a matrix)
           + v * C * bf16                    # head_w, untied
           + C * f32)                        # lnf_g
T, N, R = 1024, 1024, 1024                   # prompt, new tokens, rows of one prefill
# keys and values, the rank's kv head, bf16: model.kv_dtype auto follows the bf16 weights
kv_cache = 2 * L * 1 * (T + N) * kv * hd * bf16
a64 = lambda n: (n + 63) // 64 * 64
activations = sum(a64(n) for n in [
    2 * R * C * f32,          # stage_buf ping-pong
    R * C * f32,              # h
    R * (h + 2 * kv) * hd * f32,  # qkv
    R * h * hd * f32,         # att
    R * C * f32,              # o
    R * 2 * i * f32,          # f (gate|up)
    R * i * f32,              # act (swiglu)
    1 * C * f32,              # head_in (last position only)
    1 * v * f32,              # logits
    4, 4, R * 4, 4,           # max_val, max_idx, tok_dev, next_tok
    hd // 2 * f32])           # rope table
want = {"weights_mib": weights / MiB, "activations_mib": activations / MiB,
        "kv_cache_mib": kv_cache / MiB}
plan = dry_run(f"{src}/tests/cli/llama3_70b_tp8.yaml")["memory_per_rank"]
assert len(plan) == 8, plan
docs = open(f"{src}/docs/jobs.md").read()
for rank in plan:
    for key, mib in want.items():
        assert abs(rank[key] - mib) < 0.006, (key, rank[key], mib)
for key, mib in want.items():
    assert f"{mib:.2f}" in docs, f"docs/jobs.md lacks the hand count {key} = {mib:.2f}"
print("llama3-70b tp=8:", {k: f"{m:.2f}" for k, m in want.items()})

# One rank cannot hold it on an 80 GB GPU; tp x pp = 2 can.
one = dry_run(f"{src}/tests/cli/llama3_70b_tp8.yaml", "parallel.tp=1")["memory_per_rank"][0]
assert one["weights_mib"] * MiB > 80e9, one
two = dry_run(f"{src}/tests/cli/llama3_70b_tp8.yaml", "parallel.tp=1", "parallel.pp=2")
assert all(r["total_mib"] * MiB < 80e9 for r in two["memory_per_rank"]), two
# model.kv_dtype sets the cache's bytes: fp32 twice bf16's, int8 one byte a value plus an fp32
# scale per row of 128
for kv_dtype, per_value in (("fp32", f32), ("int8", (hd + 4) / hd)):
    d = dry_run(f"{src}/tests/cli/llama3_70b_tp8.yaml", f"model.kv_dtype={kv_dtype}")
    got = d["memory_per_rank"][0]["kv_cache_mib"]
    assert abs(got - kv_cache / bf16 * per_value / MiB) < 0.006, (kv_dtype, got)
    assert d["model"]["kv_dtype"] == kv_dtype, d["model"]

for preset, mesh in [("gpt2-124m", 2), ("gpt2-1.5b", 5), ("llama2-7b", 4), ("llama2-13b", 8),
                     ("llama3-8b", 8), ("llama3.1-405b", 16), ("mistral-7b", 2),
                     ("qwen2-7b", 4)]:
    d = dry_run(f"{src}/tests/cli/llama3_70b_tp8.yaml", f"model.synthetic.preset={preset}",
                f"parallel.tp={mesh}", "model.precision=bf16", "input.synthetic.length=64",
                "generate.new_tokens=8")
    assert d["model"]["synthetic"]["preset"] == preset and len(d["memory_per_rank"]) == mesh, d
    print(preset, "tp", mesh, d["memory_per_rank"][0])
