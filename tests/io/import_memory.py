#!/usr/bin/python3
"""import-hf streams one tensor at a time: importing a ~170 MB F32 Llama directory (largest
tensor 16 MB) must raise the peak resident memory of `tripar import-hf` over that of a tiny
import by less than 3 largest tensors plus 16 MB, not by the model's size (issue 12: an 8B
import must not need 32 GB). usage: import_memory.py TRIPAR WORKDIR"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_hf_llama import make  # noqa: E402

MB = 1 << 20


# A child starts with its parent's peak RSS (fork), and this script holds the generated model
# in numpy: the command is started from a fresh Python that imports nothing, whose own few MB
# are below any tripar's.
MEASURE = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def peak_rss(cmd):
    """Peak resident set size of cmd in bytes (ru_maxrss is in KiB on Linux)."""
    out = subprocess.run([sys.executable, "-S", "-c", MEASURE] + cmd, check=True,
                         capture_output=True, text=True, env={}).stdout.split()
    assert out[0] == "0", f"{cmd} failed with exit code {out[0]}"
    return int(out[1]) * 1024


def main():
    tripar, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    small, big = os.path.join(work, "small"), os.path.join(work, "big")
    make(small, "LlamaForCausalLM", "F32", 1, {}, 3, reference=False)
    over = {"hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2,
            "intermediate_size": 1536, "num_hidden_layers": 12, "vocab_size": 8192}
    make(big, "LlamaForCausalLM", "F32", 2, over, 4, reference=False)
    model = sum(os.path.getsize(os.path.join(big, f)) for f in os.listdir(big)
                if f.endswith(".safetensors"))
    largest = 8192 * 512 * 4
    base = peak_rss([tripar, "import-hf", small, "--out", os.path.join(work, "small.h5")])
    peak = peak_rss([tripar, "import-hf", big, "--out", os.path.join(work, "big.h5")])
    grew = peak - base
    print(f"model {model / MB:.0f} MB, largest tensor {largest / MB:.0f} MB; peak RSS "
          f"{base / MB:.0f} MB for a tiny import, {peak / MB:.0f} MB for this one "
          f"(+{grew / MB:.0f} MB)")
    assert grew < 3 * largest + 16 * MB, "import-hf holds more than a few tensors at once"
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
