#!/usr/bin/env python3
"""Writes the byte-level BPE tokenizers that tests/io/test_tokenizer_json.c and
tests/io/tokenizer_cli.sh read, into OUTDIR:

  llama3-strings/tokenizer.json  Llama 3's layout: a Split step with Llama 3's regex, then
                                 ByteLevel without its own regex; ignore_merges; merges as "a b"
  llama3-pairs/tokenizer.json    the same with merges as ["a", "b"] pairs (newer files)
  gpt2-style/tokenizer.json      GPT-2's layout: ByteLevel with its regex, and <|endoftext|>
  gpt2-style/vocab.json, merges.txt   the same vocabulary and merges as GPT-2's two files
  qwen2-nfc/tokenizer.json       Qwen2's layout: the NFC normalizer, Qwen2's regex (single
                                 digits), a normalized added token "[Å]"
  llama2-style/tokenizer.json    Llama 2's layout (SentencePiece BPE as transformers'
                                 LlamaConverter writes it): a vocab of characters, byte fallback,
                                 Prepend/Replace normalizers, no pre-tokenizer, the Replace,
                                 ByteFallback, Fuse, Strip decoder; its own small vocab (LLAMA2)
  llama2-unk/tokenizer.json      the same without byte fallback: unknown characters are <unk>,
                                 a run of them one <unk> (fuse_unk)
  unsupported/NAME.json          one thing changed each, that tripar must refuse

The vocabulary: the 256 byte symbols of GPT-2's bytes_to_unicode at id = byte value, the 16
merges of MERGES at ids 256.., "Ġxyz" (272, reachable by no merge), and added tokens from 273
on (Hugging Face gives an added token the next id after the vocab, whatever the file says, so
real files number them on from the vocab, and so do these).
Standard-library Python only; the C tests derive their expected ids by hand from MERGES."""
import copy
import json
import os
import sys

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")

# rank order; the merge of rank r makes id 256 + r. "Ġ á" joins a space to byte 0xE1, the first
# byte of U+180E (E1 A0 8E), for the pre-tokenizer test.
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("l", "l"), ("e", "ll"), ("h", "ell"),
          ("hell", "o"), ("Ġ", "w"), ("o", "r"), ("l", "d"), ("Ġw", "or"), ("Ġwor", "ld"),
          ("Ġ", "á"), ("1", "2"), ("12", "3"), ("Ġ", "Ġ")]


def bytes_to_unicode():
    """GPT-2's map (openai/gpt-2 encoder.py): printable Latin-1 bytes stand for themselves, the
    other 68 bytes for U+0100.. in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def vocab():
    sym = bytes_to_unicode()
    v = {sym[b]: b for b in range(256)}
    for r, (a, b) in enumerate(MERGES):
        v[a + b] = 256 + r
    v["Ġxyz"] = 272
    return v


def added(content, id_, special, strip=False):
    return {"id": id_, "content": content, "single_word": False, "lstrip": strip,
            "rstrip": strip, "normalized": False, "special": special}


def llama3(pairs):
    merges = [[a, b] for a, b in MERGES] if pairs else [f"{a} {b}" for a, b in MERGES]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added("<|begin_of_text|>", 273, True), added("<|eot_id|>", 274, True),
                         added("<mask>", 275, False, strip=True)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        # adds <|begin_of_text|> in Hugging Face's encode(add_special_tokens=True); tripar leaves
        # post-processors out, so a prompt writes its special tokens itself
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab(), "merges": merges},
    }


# Llama 2's layout: <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> 3..258, then these pieces from 259,
# and merges in this rank order (the C test derives its ids by hand from them)
LLAMA2_PIECES = ["\u2581", "a", "b", "c", "\u00e9", "ab", "\u2581a", "\u2581ab", "abc"]
LLAMA2_MERGES = [["a", "b"], ["\u2581", "a"], ["\u2581a", "b"], ["\u2581", "ab"], ["ab", "c"]]


def llama2_style(byte_fallback=True):
    v = {"<unk>": 0, "<s>": 1, "</s>": 2}
    v.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    v.update({p: 259 + i for i, p in enumerate(LLAMA2_PIECES)})
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added("<unk>", 0, True), added("<s>", 1, True), added("</s>", 2, True)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": byte_fallback, "ignore_merges": False,
                  "vocab": v, "merges": LLAMA2_MERGES},
    }


def gpt2_style():
    t = llama3(False)
    t["added_tokens"] = [added("<|endoftext|>", 273, True)]
    t["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True}
    t["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True}
    del t["model"]["ignore_merges"]  # GPT-2's own file predates the key
    return t


def qwen2_nfc():
    t = llama3(False)
    t["normalizer"] = {"type": "NFC"}
    t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = QWEN2_REGEX
    t["added_tokens"] = [added("<|endoftext|>", 273, True), added("<|im_start|>", 274, True),
                         added("<|im_end|>", 275, True),
                         dict(added("[\u00c5]", 276, False), normalized=True)]
    t["model"]["ignore_merges"] = False
    t["post_processor"] = None
    return t


def unsupported():
    """name -> a Llama-3-style file with one unsupported change."""
    base = llama3(False)
    out = {}

    def variant(name, change):
        t = copy.deepcopy(base)
        change(t)
        out[name] = t

    variant("unigram", lambda t: t.__setitem__(
        "model", {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["a", -1.0]]}))
    variant("wordpiece", lambda t: t["model"].__setitem__("type", "WordPiece"))
    variant("lowercase", lambda t: t.__setitem__("normalizer", {"type": "Lowercase"}))
    variant("metaspace", lambda t: t.__setitem__(
        "pre_tokenizer", {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"}))
    variant("removed", lambda t: t["pre_tokenizer"]["pretokenizers"][0].__setitem__(
        "behavior", "Removed"))
    variant("word_escape", lambda t: t["pre_tokenizer"]["pretokenizers"][0].__setitem__(
        "pattern", {"Regex": r"\w+|\s+"}))
    variant("byte_fallback", lambda t: t["model"].__setitem__("byte_fallback", True))
    variant("no_bytelevel", lambda t: t["pre_tokenizer"]["pretokenizers"].pop())
    variant("after_bytelevel", lambda t: t["pre_tokenizer"]["pretokenizers"].reverse())
    variant("decoder", lambda t: t.__setitem__("decoder", {"type": "Metaspace"}))
    variant("single_word", lambda t: t["added_tokens"][1].__setitem__("single_word", True))
    variant("merge_missing", lambda t: t["model"]["merges"].append("x q"))
    base = llama2_style()  # the steps of a character vocab
    variant("replace_regex", lambda t: t["normalizer"]["normalizers"][1].__setitem__(
        "pattern", {"Regex": " +"}))
    variant("strip_unfused", lambda t: t["decoder"]["decoders"].pop(2))
    variant("strip_stop", lambda t: t["decoder"]["decoders"][3].__setitem__("stop", 1))
    variant("chars_bytelevel_decoder", lambda t: t.__setitem__("decoder", {"type": "ByteLevel"}))
    variant("strip_not_last", lambda t: t["decoder"]["decoders"].append({"type": "Fuse"}))
    return out


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)


def main():
    out = sys.argv[1]
    write_json(f"{out}/llama3-strings/tokenizer.json", llama3(False))
    write_json(f"{out}/llama3-pairs/tokenizer.json", llama3(True))
    write_json(f"{out}/gpt2-style/tokenizer.json", gpt2_style())
    write_json(f"{out}/qwen2-nfc/tokenizer.json", qwen2_nfc())
    write_json(f"{out}/gpt2-style/vocab.json", vocab())
    with open(f"{out}/gpt2-style/merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in MERGES))
    write_json(f"{out}/llama2-style/tokenizer.json", llama2_style())
    write_json(f"{out}/llama2-unk/tokenizer.json", llama2_style(byte_fallback=False))
    for name, t in unsupported().items():
        write_json(f"{out}/unsupported/{name}.json", t)


if __name__ == "__main__":
    main()
