#!/usr/bin/python3
"""Counts GPT-2 BPE tokens of text files, and optionally writes their ids, with the standard
library alone: how data/README.md measures the prompt sets.

usage: tools/count_tokens.py --vocab VOCAB.json --merges MERGES.txt [--write-ids] FILE...

VOCAB.json and MERGES.txt are GPT-2's (encoder.json and vocab.bpe in OpenAI's naming); the
project does not ship them, so this tool is for maintainers, never for runs or CI. It prints
one row per file: tokens, UTF-8 bytes and whitespace-separated words. --write-ids writes
FILE's ids beside it as STEM.tokens, one line, for `input.tokens_file`.

The pre-tokenizer is GPT-2's pattern with \\p{L} written [^\\W\\d_] and \\p{N} written \\d
(Python's re has no \\p classes). The two are the same on ASCII text, which is why the tool
refuses a file that is not ASCII rather than give a count that may be off."""
import argparse
import json
import os
import re
import sys

PATTERN = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    """GPT-2's map of each byte to a printable character (openai/gpt-2 encoder.py)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


class Bpe:
    def __init__(self, vocab_path, merges_path):
        with open(vocab_path, encoding="utf-8") as f:
            self.vocab = json.load(f)
        with open(merges_path, encoding="utf-8") as f:
            lines = [ln.rstrip("\n") for ln in f]
        if lines and lines[0].startswith("#version"):
            lines = lines[1:]
        self.ranks = {tuple(ln.split(" ")): i for i, ln in enumerate(lines) if ln}
        self.byte_map = bytes_to_unicode()
        self.cache = {}

    def bpe(self, piece):
        """Merges the lowest-ranked adjacent pair everywhere, until no pair has a rank."""
        if piece in self.cache:
            return self.cache[piece]
        word = list(piece)
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        self.cache[piece] = word
        return word

    def encode(self, text):
        ids = []
        for piece in PATTERN.findall(text):
            symbols = "".join(self.byte_map[b] for b in piece.encode("utf-8"))
            ids.extend(self.vocab[s] for s in self.bpe(symbols))
        return ids


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", required=True, help="GPT-2 vocab.json (encoder.json)")
    ap.add_argument("--merges", required=True, help="GPT-2 merges.txt (vocab.bpe)")
    ap.add_argument("--write-ids", action="store_true", help="write STEM.tokens beside each file")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    bpe = Bpe(a.vocab, a.merges)
    print(f"{'tokens':>7} {'bytes':>7} {'words':>6}  file")
    for path in a.files:
        with open(path, "rb") as f:
            raw = f.read()
        if any(b > 127 for b in raw):
            sys.exit(f"{path}: not ASCII; this tool's pattern is exact on ASCII text only")
        text = raw.decode("ascii")
        ids = bpe.encode(text)
        print(f"{len(ids):>7} {len(raw):>7} {len(text.split()):>6}  {path}")
        if a.write_ids:
            out = os.path.splitext(path)[0] + ".tokens"
            with open(out, "w") as f:
                f.write(" ".join(str(i) for i in ids) + "\n")


if __name__ == "__main__":
    main()
