#!/usr/bin/python3
"""Flips one bit of a checkpoint tensor's stored bytes in place, found through h5py's chunk
index (the file's own map of where each chunk lies), and prints what it flipped. Flipping the
same bit again restores the file.

Usage: ckpt_flip.py CKPT TENSOR [--chunk last|first|N] [--bit B]
  --chunk  which chunk of /weights/TENSOR (default: the last; a contiguous dataset has one)
  --bit    which bit of the chunk's bytes, from its start (default: the middle one; the last 32
           bits of a Fletcher32 chunk are its checksum)"""
import argparse

import h5py


def chunk_span(path, tensor, chunk="last"):
    """(byte offset, size, words) of one stored chunk of /weights/TENSOR."""
    with h5py.File(path, "r") as f:
        d = f["weights"][tensor]
        if d.chunks is None:
            return d.id.get_offset(), d.id.get_storage_size(), "contiguous"
        n = d.id.get_num_chunks()
        k = {"last": n - 1, "first": 0}.get(chunk)
        k = int(chunk) if k is None else k
        info = d.id.get_chunk_info(k)
        return info.byte_offset, info.size, f"chunk {k} of {n} at {tuple(info.chunk_offset)}"


def flip(path, tensor, chunk="last", bit=None):
    offset, size, where = chunk_span(path, tensor, chunk)
    bit = size * 8 // 2 if bit is None else bit % (size * 8)
    with open(path, "r+b") as f:
        f.seek(offset + bit // 8)
        byte = f.read(1)[0]
        f.seek(offset + bit // 8)
        f.write(bytes([byte ^ (1 << (bit % 8))]))
    return f"bit {bit} of /weights/{tensor} ({where}, {size} bytes at {offset})"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt")
    ap.add_argument("tensor")
    ap.add_argument("--chunk", default="last")
    ap.add_argument("--bit", type=int)
    a = ap.parse_args()
    print("flipped " + flip(a.ckpt, a.tensor, a.chunk, a.bit))


if __name__ == "__main__":
    main()
