#!/usr/bin/python3
"""The SentencePiece tokenizer import-gguf builds from a GGUF file's metadata
(tokenizer.ggml.model = llama: Llama 2, TinyLlama, Mistral v0.1) against the `sentencepiece`
package itself. In a venv made as tests/io/gguf_check.py makes it, with `sentencepiece` added
(exit 77, skipped, only when a package cannot be downloaded), two small BPE models are trained
as Llama 2's was (model_type bpe, byte_fallback, identity normalisation, spaces kept, digits
split, a user-defined symbol), one with SentencePiece's dummy prefix and one without; each is
written by gguf-py into a GGUF file as llama.cpp's converter writes one (tokens, scores, token
types, bos/eos/unk ids, add_bos_token, add_space_prefix, a chat template) beside a tiny random
llama, and imported. The checkpoint's tokenizer (tests/io/tok_encode.c) must encode over 1000
varied texts (ASCII, accents, CJK, emoji, characters outside the vocab that fall back to bytes,
runs of spaces, newlines, tabs, digits, the user-defined symbol, "▁") to sentencepiece's ids,
and decode them to sentencepiece's text; control tokens in the text encode as themselves; the
attributes are kept. Where `tokenizers` installs, the stored tokenizer.json is also loaded
into Hugging Face's tokenizers and must give the same ids (texts without the user-defined
symbol, whose content Hugging Face normalises: see docs/tokenizer.md). Refusals: scores
missing, an unsupported tokenizer.ggml.model (t5).

Usage: gguf_spm_check.py TRIPAR TOK_ENCODE WORKDIR"""
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gguf_tokenizer_check import main  # noqa: E402
DATA = os.path.join(HERE, "..", "..", "data", "prompts", "generation-8192.txt")
TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}"
            "{{ '[INST] ' + m['content'] + ' [/INST]' }}{% else %}{{ m['content'] + eos_token }}"
            "{% endif %}{% endfor %}")
USER = "<tool>"  # a user-defined symbol: matched whole wherever it stands

WORDS = ["the", "The", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Paris",
         "capital", "France", "naïve", "café", "über", "Ünïcödé", "São", "Ελλάδα", "Москва",
         "世界", "你好", "こんにちは", "한국어", "🚀", "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷",
         "don't", "I'M", "it's", "1", "12", "123", "2024", "3.14159", "$100", "a+b=c",
         "(paren)", "[brack]", "{brace}", "@user", "#hash", "e-mail", "C++", "...", "!!!",
         "ﬁ", "Ω", "ß", "İstanbul", "x\u0301", "\u00a0", "\u3000", "€", "ñ", "Ж", "ǅ",
         "\U0001F9EA", "\U00010348", "\u0661\u0662", "\ufeff", "\x00", "\x7f", USER,
         "a" + USER + "b", "\u2581", "\u2581x", "tokenizer", "sentencepiece"]
COMMON = [w for w in WORDS if w.isascii() and w not in (USER, "\x00", "\x7f")] + \
    ["café", "naïve", "世界"]
SEPS = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", ", ", ". ", "", "\u3000"]


def texts():
    """Over a thousand varied texts, half of them of all the words above and half of the
    words the models learn (so their merges are tested apart from byte fallback), and the
    edges: empty, only spaces, leading, trailing and inner runs of spaces, lone newlines."""
    rng = random.Random(11)
    out = ["", " ", "  ", "\n", "a", " a", "a ", "  a  b  ", "hello world", "Hello World!",
           "1234567890", "\t\tx", "x\n\n", "What is the capital of France?", USER, " " + USER,
           USER + " ", "\u2581", "\u2581\u2581a"]
    for i in range(1100):
        n, pool, seps = rng.randint(1, 14), WORDS, SEPS
        if i % 2:  # no tab, newline or ideographic space either: those fall back to bytes
            pool, seps = COMMON, [" ", "  ", "   ", ", ", ". ", ""]
        out.append("".join(rng.choice(pool) + rng.choice(seps) for _ in range(n)))
    return out


def training_text():
    """English prose from data/ and lines of the words above (rare ones seldom, so that they
    stay outside the vocab and fall back to bytes)."""
    rng = random.Random(5)
    lines = [" ".join(rng.choice(COMMON) for _ in range(rng.randint(3, 15)))
             for _ in range(3000)]
    return open(DATA, encoding="utf-8").read() + "\n" + "\n".join(lines)


def inner(work):
    """In the venv: train the models, write the GGUF files and sentencepiece's ids and text."""
    import sentencepiece as spm
    from gguf_tokenizer_check import gguf_tiny_llama
    corpus = texts()
    with open(os.path.join(work, "texts.json"), "w", encoding="utf-8") as f:
        json.dump(corpus, f)
    train = os.path.join(work, "train.txt")
    with open(train, "w", encoding="utf-8") as f:
        f.write(training_text())
    for name, prefix in (("spm", True), ("spm-noprefix", False)):
        stem = os.path.join(work, name)
        spm.SentencePieceTrainer.train(
            input=train, model_prefix=stem, model_type="bpe", vocab_size=1000,
            byte_fallback=True, normalization_rule_name="identity",
            remove_extra_whitespaces=False, add_dummy_prefix=prefix, character_coverage=0.995,
            split_digits=True, allow_whitespace_only_pieces=True, user_defined_symbols=[USER],
            num_threads=1, minloglevel=2)
        sp = spm.SentencePieceProcessor(model_file=stem + ".model")
        n = sp.get_piece_size()

        def ggml_type(i):  # llama.cpp's token types, as its converter reads them
            return (2 if sp.is_unknown(i) else 3 if sp.is_control(i) else
                    6 if sp.is_byte(i) else 5 if sp.is_unused(i) else
                    4 if sp.id_to_piece(i) == USER else 1)
        tokens = [sp.id_to_piece(i) for i in range(n)]

        def add(w):
            w.add_string("tokenizer.ggml.model", "llama")
            w.add_array("tokenizer.ggml.tokens", tokens)
            w.add_array("tokenizer.ggml.scores", [sp.get_score(i) for i in range(n)])
            w.add_array("tokenizer.ggml.token_type", [ggml_type(i) for i in range(n)])
            w.add_uint32("tokenizer.ggml.bos_token_id", sp.bos_id())
            w.add_uint32("tokenizer.ggml.eos_token_id", sp.eos_id())
            w.add_uint32("tokenizer.ggml.unknown_token_id", sp.unk_id())
            w.add_bool("tokenizer.ggml.add_bos_token", True)
            if not prefix:
                w.add_bool("tokenizer.ggml.add_space_prefix", False)
            w.add_string("tokenizer.chat_template", TEMPLATE)
        gguf_tiny_llama(stem + ".gguf", n, add)
        ids = [sp.encode(t) for t in corpus]
        # control tokens in the text are themselves (Hugging Face's and llama.cpp's special
        # parsing); the text after one gets its own dummy prefix, as in both
        bos, eos = sp.bos_id(), sp.eos_id()
        specials = [["<s>Hello world", [bos] + sp.encode("Hello world")],
                    ["Hello</s>", sp.encode("Hello") + [eos]],
                    ["<s>[INST] Hi [/INST]", [bos] + sp.encode("[INST] Hi [/INST]")]]
        ref = {"ids": ids, "text": [sp.decode(i) for i in ids], "bos": bos, "eos": eos,
               "tokens": tokens, "byte_ids": [i for i in range(n) if sp.is_byte(i)],
               "specials": specials}
        with open(stem + ".ref.json", "w", encoding="utf-8") as f:
            json.dump(ref, f)
        if name == "spm":  # the refusals: no scores; a model tripar does not read
            def no_scores(w):
                w.add_string("tokenizer.ggml.model", "llama")
                w.add_array("tokenizer.ggml.tokens", tokens)
            gguf_tiny_llama(os.path.join(work, "no-scores.gguf"), n, no_scores)

            def t5(w):
                w.add_string("tokenizer.ggml.model", "t5")
                w.add_array("tokenizer.ggml.tokens", tokens)
            gguf_tiny_llama(os.path.join(work, "t5.gguf"), n, t5)


def hf_ids(work, ckpt, corpus):
    """Hugging Face's ids for the checkpoint's tokenizer.json, in the venv (None without
    tokenizers)."""
    import h5py
    with h5py.File(ckpt, "r") as f:
        text = f["tokenizer/json"][()]
    path = ckpt + ".tokenizer.json"
    with open(path, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())
    py = os.path.join(work, "venv", "bin", "python")
    code = ("import json, sys\nfrom tokenizers import Tokenizer\n"
            "t = Tokenizer.from_file(sys.argv[1])\ntexts = json.load(open(sys.argv[2]))\n"
            "print(json.dumps([t.encode(x, add_special_tokens=False).ids for x in texts]))\n")
    r = subprocess.run([py, "-c", code, path, os.path.join(work, "texts.json")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAIL: Hugging Face tokenizers cannot read the stored tokenizer.json:\n" +
                 r.stderr[-3000:])
    return json.loads(r.stdout)


def outer(tripar, tok_encode, work):
    from gguf_check import NETWORK_MARKS, SKIP, venv_make
    from gguf_tokenizer_check import MODEL_REFUSED, refused, sh
    import h5py
    os.makedirs(work, exist_ok=True)
    py = venv_make(work)
    if subprocess.run([py, "-c", "import sentencepiece"], capture_output=True).returncode:
        r = subprocess.run([py, "-m", "pip", "install", "-q", "--retries", "2", "--timeout",
                            "30", "sentencepiece"], capture_output=True, text=True)
        if r.returncode != 0:
            text = r.stdout + r.stderr
            if any(m in text for m in NETWORK_MARKS):
                print(text[-2000:] + "\nskipped: the sentencepiece package cannot be downloaded")
                sys.exit(SKIP)
            sys.exit("FAIL: pip install sentencepiece:\n" + text[-3000:])
    have_hf = subprocess.run([py, "-c", "import tokenizers"], capture_output=True).returncode == 0
    if not have_hf:
        r = subprocess.run([py, "-m", "pip", "install", "-q", "--retries", "2", "--timeout",
                            "30", "tokenizers"], capture_output=True, text=True)
        have_hf = r.returncode == 0
        if not have_hf:
            print("note: tokenizers is not installable; the stored tokenizer.json is checked "
                  "through tripar only")
    if subprocess.run([py, os.path.abspath(__file__), "--inner", work]).returncode != 0:
        sys.exit("FAIL: training the models and writing the GGUF files")
    corpus = json.load(open(os.path.join(work, "texts.json"), encoding="utf-8"))
    for name in ("spm", "spm-noprefix"):
        ref = json.load(open(os.path.join(work, name + ".ref.json"), encoding="utf-8"))
        ckpt = os.path.join(work, name + ".h5")
        sh([tripar, "import-gguf", os.path.join(work, name + ".gguf"), "--out", ckpt],
           pattern="tokenizer: yes")
        got = json.loads(sh([tok_encode, ckpt, os.path.join(work, "texts.json")]))
        fallback, byte_ids = 0, set(ref["byte_ids"])
        for text, g, ids, back in zip(corpus, got, ref["ids"], ref["text"]):
            assert g["ids"] == ids, (f"{name}: {text!r}: tripar {g['ids']} vs sentencepiece "
                                     f"{ids} ({[ref['tokens'][i] for i in ids]})")
            assert g["text"] == back, f"{name}: {text!r} decodes to {g['text']!r}, not {back!r}"
            if "\u2581" not in text:
                assert back == text, f"{name}: sentencepiece decodes {text!r} to {back!r}"
            fallback += any(i in byte_ids for i in ids)
        assert len(byte_ids) == 256 and fallback > 200, f"{name}: {fallback} fall back to bytes"
        with open(os.path.join(work, "specials.json"), "w", encoding="utf-8") as f:
            json.dump([t for t, _ in ref["specials"]], f)
        got = json.loads(sh([tok_encode, ckpt, os.path.join(work, "specials.json")]))
        for (text, want), g in zip(ref["specials"], got):
            assert g["ids"] == want, f"{name}: {text!r}: tripar {g['ids']}, expected {want}"
        with h5py.File(ckpt, "r") as f:
            a = f["tokenizer"].attrs
            assert a["bos_token_id"] == ref["bos"] and a["eos_token_id"] == ref["eos"], dict(a)
            assert a["add_bos_token"] == 1, dict(a)
            tmpl = a["chat_template"]
            assert (tmpl.decode() if isinstance(tmpl, bytes) else tmpl) == TEMPLATE
        compared = ""
        if have_hf:
            hf = hf_ids(work, ckpt, corpus)
            n = 0
            for text, h, ids in zip(corpus, hf, ref["ids"]):
                if USER in text:
                    continue
                assert h == ids, f"{name}: {text!r}: tokenizers {h} vs sentencepiece {ids}"
                n += 1
            compared = f"; Hugging Face's tokenizers reading the stored tokenizer.json: {n} equal"
        print(f"{name}: {len(corpus)} texts equal to sentencepiece, ids and decoded text "
              f"({fallback} with byte fallback){compared}; attributes kept")
    refused(tripar, work, "no-scores", r"tokenizer\.ggml\.scores")
    refused(tripar, work, "t5", MODEL_REFUSED.format("t5"))
    print("gguf_spm_check: all passed")


if __name__ == "__main__":
    main(inner, outer, "gguf_spm_check.py TRIPAR TOK_ENCODE WORKDIR")
