#!/usr/bin/python3
"""What /tokenizer's attributes ask of a run, end to end: an import-hf checkpoint with the
Llama-3-style fixture tokenizer (<|begin_of_text|> 273, "hello" 262, " the" 258, " world" 267,
<|eot_id|> 274) is given bos_token_id, eos_token_id, add_bos_token and a chat template with
h5py, as import-gguf writes them. Then:
- add_bos_token 1 puts bos first; 0, and no attribute at all, add nothing;
- input.chat renders the Llama 3 template (bos written once, by the template; the same text as
  Jinja renders when python3-jinja2 is there);
- generate.eos_id set to the first generated token ends the sequence there: generated 1, the
  eos kept in /output/tokens, /output/generated_text empty;
- refusals (exit 2, named): input.chat without a template (the checkpoint named), another
  template family (its first characters), stop_at_eos true without an eos id, an eos_id past
  the vocab.

Usage: text_meta_e2e.py WORKDIR TOKJSON_FIXTURES"""
import os
import shutil
import subprocess
import sys

import h5py

TRIPAR = os.environ["TRIPAR_BIN"]
SRC = os.environ["TRIPAR_SOURCE_DIR"]
MPI = [os.environ.get("MPIEXEC", "mpiexec"), "-n", "1", "--oversubscribe"]
TEXT = "hello the world"


def run(work, name, ckpt, sets=(), expect=0):
    job = os.path.join(work, name + ".yaml")
    with open(job, "w") as f:
        f.write(f"model: {{checkpoint: {ckpt}}}\nbackend: {{kind: cpu, threads: 1}}\n"
                f"input: {{text: \"{TEXT}\"}}\ngenerate: {{new_tokens: 4}}\n")
    out = os.path.join(work, name + "-run.h5")
    cmd = MPI + [TRIPAR, "run", job, "--out", out]
    for s in sets:
        cmd += ["--set", s]
    # a random model's text may be any bytes
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    assert r.returncode == expect, f"{name}: exit {r.returncode}, expected {expect}:\n" \
                                   f"{r.stdout}{r.stderr}"
    if expect:
        return r.stderr
    with h5py.File(out, "r") as f:
        return {"tokens": f["output/tokens"][0].tolist(), "text": f["output/text"][0],
                "generated": int(f["output/generated"][0]),
                "answer": f["output/generated_text"][0], "stdout": r.stdout}


def with_meta(src, dst, **attrs):
    shutil.copy(src, dst)
    with h5py.File(dst, "a") as f:
        for k, v in attrs.items():
            f["tokenizer"].attrs[k] = v
    return dst


def main(work, fix):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    hf = os.path.join(work, "hf")
    subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tests/io/make_hf_dir.py"), hf,
                    "--no-tokenizer", "--vocab", "300", "--ctx", "128"], check=True, capture_output=True)
    shutil.copy(os.path.join(fix, "llama3-pairs/tokenizer.json"), hf)
    plain = os.path.join(work, "plain.h5")
    subprocess.run([TRIPAR, "import-hf", hf, "--out", plain], check=True, capture_output=True)
    ids = [262, 258, 267]

    r = run(work, "plain", plain)
    assert r["tokens"][:3] == ids and len(r["tokens"]) == 7, r["tokens"]
    with open(os.path.join(SRC, "tests/data/chat/llama3.jinja")) as f:
        template = f.read()
    bos1 = with_meta(plain, os.path.join(work, "bos1.h5"), bos_token_id=273, eos_token_id=274,
                     add_bos_token=1, chat_template=template)
    bos0 = with_meta(plain, os.path.join(work, "bos0.h5"), bos_token_id=273, add_bos_token=0)
    r = run(work, "bos1", bos1, ["generate.stop_at_eos=false"])
    assert r["tokens"][:4] == [273] + ids and len(r["tokens"]) == 8, r["tokens"]
    r = run(work, "bos0", bos0)
    assert r["tokens"][:3] == ids and len(r["tokens"]) == 7, r["tokens"]
    print("bos: added for add_bos_token 1, not for 0 nor without the attribute")

    r = run(work, "chat", bos1, ["input.chat=true", "generate.stop_at_eos=false"])
    rendered = ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n" + TEXT +
                "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    try:
        import jinja2
        want = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(
            template).render(messages=[{"role": "user", "content": TEXT}],
                             add_generation_prompt=True, bos_token="<|begin_of_text|>")
        assert want == rendered, repr(want)
    except ImportError:
        pass
    prompt = r["tokens"][:len(r["tokens"]) - 4]
    assert prompt[0] == 273 and prompt.count(273) == 1 and prompt.count(274) == 1, prompt
    assert r["text"].startswith(rendered.encode()), r["text"]
    print("chat: the Llama 3 template rendered, bos once")

    first = r["tokens"][len(prompt)]
    r = run(work, "eos", bos1, ["input.chat=true", f"generate.eos_id={first}"])
    assert r["generated"] == 1 and r["tokens"][len(prompt)] == first, r
    assert r["tokens"][len(prompt) + 1:] == [-1, -1, -1] and r["answer"] == b"", r
    assert "(1 token, eos) \n" in r["stdout"], r["stdout"]
    print(f"eos: generate.eos_id {first} ends the sequence at its first token")

    err = run(work, "chat-none", plain, ["input.chat=true"], expect=2)
    assert "input.chat" in err and plain in err and "no chat template" in err, err
    gemma = with_meta(plain, os.path.join(work, "gemma.h5"), chat_template=(
        "{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\n' + "
        "message['content'] + '<end_of_turn>\n' }}{% endfor %}"))
    err = run(work, "chat-gemma", gemma, ["input.chat=true"], expect=2)
    assert "{% for message in messages %}{{ '<start_of_turn>" in err and "ChatML" in err, err
    err = run(work, "eos-none", plain, ["generate.stop_at_eos=true"], expect=2)
    assert "generate.stop_at_eos" in err and "no eos token id" in err, err
    err = run(work, "eos-big", plain, ["generate.eos_id=300"], expect=2)
    assert "generate.eos_id: 300 is not a token id" in err, err
    print("refusals: named")
    print("text_meta_e2e: passed")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: text_meta_e2e.py WORKDIR TOKJSON_FIXTURES")
    main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
