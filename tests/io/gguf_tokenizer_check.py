#!/usr/bin/python3
"""The tokenizer import-gguf builds from a GGUF file's metadata (tokenizer.ggml.model = gpt2)
against Hugging Face's `tokenizers`. In a venv made as tests/io/gguf_check.py makes it (exit 77,
skipped, only when the `gguf` package cannot be downloaded), a byte-level BPE is trained with
`tokenizers` on varied texts; for each tokenizer.ggml.pre tripar knows (default, gpt2,
llama-bpe, qwen2, smollm) a GGUF file with that vocabulary, merges, token types (control tokens
for the specials), bos/eos ids, add_bos_token and a chat template, and a tiny random llama, is
imported; the checkpoint's tokenizer (tests/io/tok_encode.c) must encode over 1000 texts to
the ids Hugging Face's tokenizer with the model's own pre-tokenizer gives, and decode them back;
the attributes must be kept. Without `tokenizers` (no wheel) only the round trips are checked.
Refusals: another tokenizer.ggml.pre or tokenizer.ggml.model (bert) exits 2 naming the value.

Usage: gguf_tokenizer_check.py TRIPAR TOK_ENCODE WORKDIR"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
            "{% endfor %}")


def texts():
    """Over a thousand varied texts: words, contractions in both cases, numbers of every length,
    punctuation runs, accents, CJK, emoji, tabs, CR/LF and space runs, special tokens."""
    import random
    rng = random.Random(7)
    words = ["the", "The", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Paris",
             "capital", "France", "naïve", "café", "Ünïcödé", "世界", "こんにちは", "🚀",
             "😀",
             "don't", "I'M", "we'LL", "they're", "it's", "You'VE", "1", "12", "123", "1234",
             "12345", "3.14159", "2024-12-06", "$100", "a+b=c", "x^2", "<tag>", "|pipe|", "~",
             "...", "!!!", "?!", "--", "(paren)", "[brack]", "{brace}", "@user", "#hash",
             "e-mail", "C++", "ﬁ", "Ω", "ß", "İstanbul", "\u180e", "\u00a0", "x\u0301",
             "\u0661\u0662\u066345678", "12\u066345", "\u06631234", "\u00b2\u00b3"]
    seps = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", ", ", ". ", "", "\u3000"]
    out = ["", " ", "hello world", "Hello World!", "  leading spaces", "trailing spaces   ",
           "\n\nnewlines\n\n", "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
           "<|im_start|>assistant\n", "a<|endoftext|>b", "1234567890", "don't DON'T Don'T"]
    for _ in range(1100):
        n = rng.randint(1, 14)
        out.append("".join(rng.choice(words) + rng.choice(seps) for _ in range(n)))
    return out


def hf_pre(pre):
    """The Hugging Face pre-tokenizer a model of that family ships in its tokenizer.json."""
    from tokenizers import pre_tokenizers as P, Regex
    split = lambda r: P.Split(Regex(r), behavior="isolated", invert=False)  # noqa: E731
    bl = P.ByteLevel(add_prefix_space=False, use_regex=False)
    return {"gpt2": P.ByteLevel(add_prefix_space=False, use_regex=True),
            "llama-bpe": P.Sequence([split(LLAMA3), bl]),
            "qwen2": P.Sequence([split(QWEN2), bl]),
            "smollm": P.Sequence([P.Digits(individual_digits=True),
                                  P.ByteLevel(add_prefix_space=False, use_regex=True)]),
            # llama.cpp's default has no Hugging Face family: its own four splits
            "default": P.Sequence([split(r"[\p{P}\$\+<=>\^~\|]+"), split(GPT2),
                                   split(r"\p{N}+"), split(r"[0-9][0-9][0-9]"), bl])}[pre]


def gguf_tiny_llama(path, vocab, add_kvs):
    """Writes path: a tiny random llama (one layer, hidden 32, `vocab` rows), which import-gguf
    needs beside a tokenizer, and the metadata add_kvs(writer) adds (tokenizer.*)."""
    import numpy as np
    import gguf
    rng = np.random.default_rng(3)
    C = 32
    w = gguf.GGUFWriter(path, "llama")
    for k, v in (("block_count", 1), ("context_length", 64), ("embedding_length", C),
                 ("feed_forward_length", 64), ("attention.head_count", 4)):
        w.add_uint32(f"llama.{k}", v)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    add_kvs(w)
    shapes = {"token_embd.weight": (vocab, C), "output_norm.weight": (C,),
              "blk.0.attn_norm.weight": (C,), "blk.0.ffn_norm.weight": (C,),
              "blk.0.attn_q.weight": (C, C), "blk.0.attn_k.weight": (C, C),
              "blk.0.attn_v.weight": (C, C), "blk.0.attn_output.weight": (C, C),
              "blk.0.ffn_gate.weight": (64, C), "blk.0.ffn_up.weight": (64, C),
              "blk.0.ffn_down.weight": (C, 64)}
    for name, shape in shapes.items():
        w.add_tensor(name, rng.standard_normal(shape).astype(np.float32) * 0.1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def inner(work):
    """In the venv: train the BPE, write the GGUF files and the reference ids."""
    corpus = texts()
    with open(os.path.join(work, "texts.json"), "w") as f:
        json.dump(corpus, f)
    try:
        from tokenizers import Tokenizer, models, trainers, pre_tokenizers, decoders
        have_hf = True
    except ImportError:
        have_hf = False
    if have_hf:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(corpus * 3, trainers.BpeTrainer(
            vocab_size=700, special_tokens=SPECIALS, show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        model = json.loads(tok.to_str())["model"]
        vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
        tokens = [t for t, _ in vocab]
        merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    else:  # the fixed fixture vocabulary of tests/io/make_tokenizer_json.py
        from make_tokenizer_json import MERGES, bytes_to_unicode
        tokens = list(bytes_to_unicode().values()) + ["".join(m) for m in MERGES] + SPECIALS
        merges = [" ".join(m) for m in MERGES]
    types = [3 if t in SPECIALS else 1 for t in tokens]

    def tokenizer_kvs(pre):
        def add(w):
            w.add_string("tokenizer.ggml.model", "bert" if pre == "bert" else "gpt2")
            w.add_string("tokenizer.ggml.pre", pre)
            w.add_array("tokenizer.ggml.tokens", tokens)
            w.add_array("tokenizer.ggml.merges", merges)
            w.add_array("tokenizer.ggml.token_type", types)
            w.add_uint32("tokenizer.ggml.bos_token_id", tokens.index("<|im_start|>"))
            w.add_uint32("tokenizer.ggml.eos_token_id", tokens.index("<|im_end|>"))
            w.add_bool("tokenizer.ggml.add_bos_token", False)
            w.add_string("tokenizer.chat_template", TEMPLATE)
        return add
    for pre in ("default", "gpt2", "llama-bpe", "qwen2", "smollm", "falcon", "bert"):
        gguf_tiny_llama(os.path.join(work, f"{pre}.gguf"), len(tokens), tokenizer_kvs(pre))
        if have_hf and pre not in ("falcon", "bert"):
            ref = Tokenizer(models.BPE(vocab=dict(model["vocab"]),
                                       merges=[tuple(m.split(" ", 1)) for m in merges],
                                       ignore_merges=pre == "llama-bpe"))
            ref.add_special_tokens(SPECIALS)
            ref.pre_tokenizer = hf_pre(pre)
            ids = [ref.encode(t, add_special_tokens=False).ids for t in corpus]
            with open(os.path.join(work, f"ref-{pre}.json"), "w") as f:
                json.dump(ids, f)


def sh(args, want_rc=0, pattern=None):
    r = subprocess.run(args, capture_output=True, text=True)
    out = r.stdout + r.stderr
    if r.returncode != want_rc or (pattern and not re.search(pattern, out)):
        sys.exit(f"FAIL: {' '.join(args)}: exit {r.returncode} (want {want_rc}"
                 f"{', matching ' + repr(pattern) if pattern else ''}):\n{out[-4000:]}")
    return r.stdout


def refused(tripar, work, name, pattern):
    """import-gguf of WORK/NAME.gguf exits 2 with pattern and writes no checkpoint."""
    never = os.path.join(work, "never.h5")
    sh([tripar, "import-gguf", os.path.join(work, name + ".gguf"), "--out", never], 2, pattern)
    assert not os.path.exists(never), f"{name}: a refused import left {never}"


MODEL_REFUSED = (r"tokenizer\.ggml\.model' = \"{}\" is not supported; tripar reads \"gpt2\" "
                 r"\(byte-level BPE\) and \"llama\" \(SentencePiece BPE\)")


def main(inner_fn, outer_fn, usage):
    """SCRIPT --inner WORK (in the venv) or SCRIPT TRIPAR TOK_ENCODE WORK."""
    if len(sys.argv) == 3 and sys.argv[1] == "--inner":
        inner_fn(sys.argv[2])
    elif len(sys.argv) == 4:
        outer_fn(*(os.path.abspath(a) for a in sys.argv[1:]))
    else:
        sys.exit("usage: " + usage)


def outer(tripar, tok_encode, work):
    from gguf_check import venv_make
    os.makedirs(work, exist_ok=True)
    py = venv_make(work)
    probe = [py, "-c", "import tokenizers"]
    if subprocess.run(probe, capture_output=True).returncode != 0:
        r = subprocess.run([py, "-m", "pip", "install", "-q", "--retries", "2", "--timeout",
                            "30", "tokenizers"], capture_output=True, text=True)
        if r.returncode != 0:
            print("note: tokenizers is not installable; checking round trips only\n" +
                  r.stdout[-500:] + r.stderr[-500:])
    if subprocess.run([py, os.path.abspath(__file__), "--inner", work]).returncode != 0:
        sys.exit("FAIL: writing the GGUF files")
    corpus = json.load(open(os.path.join(work, "texts.json")))
    import h5py
    for pre in ("default", "gpt2", "llama-bpe", "qwen2", "smollm"):
        ckpt = os.path.join(work, f"{pre}.h5")
        sh([tripar, "import-gguf", os.path.join(work, f"{pre}.gguf"), "--out", ckpt],
           pattern="tokenizer: yes")
        got = json.loads(sh([tok_encode, ckpt, os.path.join(work, "texts.json")]))
        for text, g in zip(corpus, got):
            assert g["text"] == text, f"{pre}: round trip of {text!r} gave {g['text']!r}"
        ref_path = os.path.join(work, f"ref-{pre}.json")
        compared = "round trips only"
        if os.path.exists(ref_path):
            ref = json.load(open(ref_path))
            for text, g, r in zip(corpus, got, ref):
                assert g["ids"] == r, f"{pre}: {text!r}: tripar {g['ids']} vs tokenizers {r}"
            compared = "ids equal to Hugging Face tokenizers"
        with h5py.File(ckpt, "r") as f:
            a = f["tokenizer"].attrs
            tok = json.loads(f["tokenizer/json"][()])
            ids = {t: i for t, i in tok["model"]["vocab"].items()}
            assert a["bos_token_id"] == ids["<|im_start|>"] and \
                a["eos_token_id"] == ids["<|im_end|>"], dict(a)
            assert a["add_bos_token"] == 0, dict(a)
            tmpl = a["chat_template"]
            assert (tmpl.decode() if isinstance(tmpl, bytes) else tmpl) == TEMPLATE
        print(f"{pre}: {len(corpus)} texts, {compared}; attributes kept")
    refused(tripar, work, "falcon", r"tokenizer\.ggml\.pre' = \"falcon\" is not supported")
    refused(tripar, work, "bert", MODEL_REFUSED.format("bert"))
    print("gguf_tokenizer_check: all passed")


if __name__ == "__main__":
    main(inner, outer, "gguf_tokenizer_check.py TRIPAR TOK_ENCODE WORKDIR")
