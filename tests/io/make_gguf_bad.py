#!/usr/bin/env python3
"""Writes small broken GGUF files into OUTDIR, one per refusal that tests/io/gguf.cmake checks
(and good.gguf, the file they are all broken from). Plain struct: no gguf package needed."""
import os
import struct
import sys


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def kv_string(key, value, type_id=8, length=None):
    v = value.encode()
    n = len(v) if length is None else length
    return gstr(key) + struct.pack("<I", type_id) + struct.pack("<Q", n) + v


def build(version=3, magic=b"GGUF", n_kv=None, kvs=None, dims=(32, 2), ttype=8, offset=0,
          cut=None):
    """One Q8_0 tensor 'w.q8' (dims[0] x dims[1]) after the metadata entries kvs."""
    if kvs is None:
        kvs = [kv_string("general.architecture", "llama"), kv_string("general.name", "bad")]
    head = magic + struct.pack("<IQQ", version, 1, len(kvs) if n_kv is None else n_kv)
    head += b"".join(kvs)
    head += gstr("w.q8") + struct.pack("<I", len(dims))
    head += b"".join(struct.pack("<Q", d) for d in dims)
    head += struct.pack("<IQ", ttype, offset)
    head += b"\0" * (-len(head) % 32)
    data = b""
    for blk in range(2):
        data += struct.pack("<e", 0.5 + blk) + bytes(range(blk, blk + 32))
    out = head + data
    return out[:cut] if cut is not None else out


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    good_len = len(build())
    arch = kv_string("general.architecture", "llama")
    cases = {
        "good": build(),
        "truncated": build(cut=good_len - 38),
        "offset_out_of_range": build(offset=4096),
        "unknown_type": build(ttype=99),
        "bad_magic": build(magic=b"GGUX"),
        "huge_string": build(kvs=[arch, kv_string("general.name", "bad", length=1 << 60)]),
        "version1": build(version=1),
        "misaligned": build(offset=8),
        "bad_alignment": build(kvs=[arch, gstr("general.alignment") + struct.pack("<II", 4, 24)]),
        "huge_count": build(n_kv=10**12),
        "unknown_value_type": build(kvs=[arch, kv_string("general.name", "bad", type_id=13)]),
        "nested_array": build(kvs=[arch, gstr("general.tags") + struct.pack("<IIQ", 9, 9, 1) +
                                   struct.pack("<IQ", 4, 1) + struct.pack("<I", 7)]),
        "bad_row": build(dims=(40, 2)),
        "dims_overflow": build(dims=(32, 1 << 62)),
        # 200000 keys, the last one repeating the first: found in well under a second
        "many_keys_repeat": build(kvs=[gstr("k%06d" % (i % 200000)) + struct.pack("<IB", 0, 1)
                                       for i in range(200001)]),
    }
    for name, data in cases.items():
        with open(os.path.join(out, name + ".gguf"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
