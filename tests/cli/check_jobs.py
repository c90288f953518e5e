"""check_jobs.py JOBS_DIR: every job file under jobs/ parses and plans (`tripar run JOB
--dry-run` exits 0 and prints one YAML document with memory_per_rank), and the Llama variant
pair and benchmark keep the shapes docs/benchmarks.md and docs/performance.md describe."""
import glob
import os
import subprocess
import sys

import yaml

jobs_dir = sys.argv[1]
tripar = os.environ["TRIPAR_BIN"]
files = sorted(glob.glob(os.path.join(jobs_dir, "*.yaml")) +
               glob.glob(os.path.join(jobs_dir, "variants", "*.yaml")))
assert len(files) >= 8, files
# Jobs whose checkpoint a documented step makes: where it has not been made, the dry run must
# refuse with exit 2 naming the missing checkpoint (and nothing else); where it has, they plan
# like every other job.
MADE_BY_A_STEP = {"demo-smollm2.yaml": "out/smollm2.h5"}  # tools/setup.sh demo imports it
plans = {}
for path in files:
    p = subprocess.run([tripar, "run", path, "--dry-run"], capture_output=True, text=True)
    made = MADE_BY_A_STEP.get(os.path.relpath(path, jobs_dir))
    if made and p.returncode == 2 and "model.checkpoint: cannot read" in p.stderr:
        assert made in p.stderr and p.stderr.count("\n") == 1, (path, p.stderr)
        continue
    assert p.returncode == 0, "%s: exit %d\n%s" % (path, p.returncode, p.stderr)
    d = yaml.safe_load(p.stdout)
    assert d["memory_per_rank"], path
    plans[os.path.relpath(path, jobs_dir)] = d

# (arch, layers, heads, kv_heads, precision, kv_cache)
want = {
    "variants/standard.yaml": ("gpt2", 32, 16, None, "fp32", "contiguous"),
    "variants/flash.yaml": ("gpt2", 24, 8, None, "int8w", "paged"),
    "variants/llama-standard.yaml": ("llama", 32, 32, 8, "fp32", "contiguous"),
    "variants/llama-flash.yaml": ("llama", 24, 16, 4, "int8w", "paged"),
    "bench-llama.yaml": ("llama", 16, 32, 8, "fp32", "contiguous"),
}
for name, (arch, layers, heads, kv, precision, cache) in want.items():
    m = plans[name]["model"]
    s = m["synthetic"]
    got = (m["arch"], s["layers"], s["heads"], s.get("kv_heads"), m["precision"], m["kv_cache"])
    assert got == (arch, layers, heads, kv, precision, cache), (name, got)
# the Llama pair differs only in depth, head split, precision and cache: same width and input
a, b = plans["variants/llama-standard.yaml"], plans["variants/llama-flash.yaml"]
for key in ("embd", "mlp", "vocab", "ctx", "seed", "tie_embeddings", "rope_theta"):
    assert a["model"]["synthetic"][key] == b["model"]["synthetic"][key], key
assert a["input"] == b["input"] and a["generate"] == b["generate"]
print("%d job files plan" % len(files))
