#!/usr/bin/env python3
"""tripar's GGUF reader against gguf-py, the reference Python package of llama.cpp.

Usage: gguf_check.py GGUF_DUMP WORKDIR. Makes a venv in WORKDIR, installs the `gguf` package
(exit 77, skipped, only when it cannot be downloaded), and there writes synthetic GGUF files
with gguf-py's GGUFWriter: every metadata value type, scalar and array, and one tensor of every
type tripar reads (real quantization where gguf.quants can quantize, random blocks with finite
f16 scales otherwise). GGUF_DUMP (tests/io/gguf_dump.c) reads each file; its metadata must
match what was written and its fp32 must equal gguf.quants.dequantize bit for bit. GGUF v3 and
v2 are both checked: gguf-py writes only v3, so the v2 file is written by the same writer with
its module's GGUF_VERSION set to 2 (v2 and v3 lay out little-endian files identically)."""
import json
import os
import subprocess
import sys

SKIP = 77
# what pip prints when it cannot reach the index (and only then is the test skipped)
NETWORK_MARKS = ("NewConnectionError", "Max retries exceeded", "ConnectionError", "ProxyError",
                 "Temporary failure in name resolution", "Network is unreachable", "timed out")


def venv_make(work):
    venv = os.path.join(work, "venv")
    py = os.path.join(venv, "bin", "python")
    probe = [py, "-c", "import gguf, numpy"]
    if os.path.exists(py) and subprocess.run(probe, capture_output=True).returncode == 0:
        return py
    r = subprocess.run(["/usr/bin/python3", "-m", "venv", "--clear", venv], capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit("gguf_check: cannot make a venv (Debian: apt-get install python3-venv):\n" +
                 r.stdout + r.stderr)
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--retries", "2", "--timeout", "30",
                        "gguf"], capture_output=True, text=True)
    if r.returncode != 0:
        text = r.stdout + r.stderr
        if any(m in text for m in NETWORK_MARKS):
            print(text)
            print("skipped: the gguf package cannot be downloaded")
            sys.exit(SKIP)
        sys.exit("gguf_check: pip install gguf failed:\n" + text)
    return py


# ---- inside the venv -------------------------------------------------------------------------

def scalar_kvs(VT):
    """(key, value, type, sub_type) covering every value type, scalar and array."""
    return [
        ("test.u8", 250, VT.UINT8, None), ("test.i8", -120, VT.INT8, None),
        ("test.u16", 65000, VT.UINT16, None), ("test.i16", -32000, VT.INT16, None),
        ("test.u32", 4000000000, VT.UINT32, None), ("test.i32", -2000000000, VT.INT32, None),
        ("test.u64", 18000000000000000000, VT.UINT64, None),
        ("test.i64", -9000000000000000000, VT.INT64, None),
        ("test.f32", 0.1, VT.FLOAT32, None), ("test.f64", 0.1, VT.FLOAT64, None),
        ("test.bool_t", True, VT.BOOL, None), ("test.bool_f", False, VT.BOOL, None),
        ("test.str", "h\u00e9llo \"w\u00f6rld\"\n\u4e16\u754c", VT.STRING, None),
        ("test.arr_u8", [0, 1, 255], VT.ARRAY, VT.UINT8),
        ("test.arr_i8", [-128, 0, 127], VT.ARRAY, VT.INT8),
        ("test.arr_u16", [0, 65535], VT.ARRAY, VT.UINT16),
        ("test.arr_i16", [-32768, 32767], VT.ARRAY, VT.INT16),
        ("test.arr_u32", [0, 4294967295], VT.ARRAY, VT.UINT32),
        ("test.arr_i32", [-2147483648, 2147483647], VT.ARRAY, VT.INT32),
        ("test.arr_u64", [0, 18446744073709551615], VT.ARRAY, VT.UINT64),
        ("test.arr_i64", [-9223372036854775808, 9223372036854775807], VT.ARRAY, VT.INT64),
        ("test.arr_f32", [1.5, -2.25, 3.0e-8], VT.ARRAY, VT.FLOAT32),
        ("test.arr_f64", [1.0 / 3.0, -1e300], VT.ARRAY, VT.FLOAT64),
        ("test.arr_bool", [True, False, True], VT.ARRAY, VT.BOOL),
        ("test.arr_str", ["a", "", "b c", "\u00fc"], VT.ARRAY, VT.STRING),
    ]


def random_blocks(np, rng, qtype, n_blocks):
    """Random block bytes whose f16 scale fields hold finite values (subnormals included)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as Q
    scale_at = {Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0],
                Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}
    size = GGML_QUANT_SIZES[qtype][1]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for at in scale_at[qtype]:
        bits = rng.integers(0, 1 << 16, size=n_blocks, dtype=np.uint16)
        bits = np.where((bits >> 10) & 0x1F == 0x1F, bits & 0x83FF, bits).astype("<u2")
        raw[:, at:at + 2] = bits.view(np.uint8).reshape(n_blocks, 2)
    return raw


def tensors_add(np, gguf, w, rng):
    Q = gguf.GGMLQuantizationType
    for qtype in (Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1):
        x = rng.standard_normal((3, 512)).astype(np.float32)
        x[0, :7] = [0.0, -0.0, 1e-30, -7.5, 65504.0, 3.0e-5, 1.0]
        q = gguf.quants.quantize(x, qtype)
        w.add_tensor("q." + qtype.name, q, raw_dtype=None if q.dtype != np.uint8 else qtype)
    for qtype in (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K,
                  Q.Q6_K):
        block = gguf.constants.GGML_QUANT_SIZES[qtype][0]
        rows, n_blocks = 4, 1024 // block
        raw = random_blocks(np, rng, qtype, rows * n_blocks).reshape(rows, -1)
        w.add_tensor("r." + qtype.name, raw, raw_dtype=qtype)
    # a 3-d tensor, so dims beyond two are read in ggml order
    w.add_tensor("q.3d", rng.standard_normal((2, 3, 32)).astype(np.float32))


def gguf_write(np, gguf, path, version, alignment):
    import gguf.gguf_writer as gw
    gw.GGUF_VERSION = version
    rng = np.random.default_rng(1234 + version)
    w = gguf.GGUFWriter(path, "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    for key, value, vtype, sub in scalar_kvs(gguf.GGUFValueType):
        w.add_key_value(key, value, vtype, sub_type=sub)
    tensors_add(np, gguf, w, rng)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def meta_check(np, gguf, meta, version, alignment):
    errs = []
    if meta["version"] != version:
        errs.append(f"version {meta['version']}, wrote {version}")
    if meta["alignment"] != (alignment or 32):
        errs.append(f"alignment {meta['alignment']}, wrote {alignment or 32}")
    VT = gguf.GGUFValueType
    for key, value, vtype, sub in scalar_kvs(VT):
        got = meta["kv"].get(key)
        etype = sub if vtype == VT.ARRAY else vtype
        if got is None:
            errs.append(f"{key}: missing")
            continue
        if got["type"] != etype.name.lower() or got["array"] != (vtype == VT.ARRAY):
            errs.append(f"{key}: type {got['type']} array {got['array']}, wrote {vtype.name}")
        want = value if vtype == VT.ARRAY else [value]
        have = got["value"] if vtype == VT.ARRAY else [got["value"]]
        if etype == VT.FLOAT32:
            ok = np.array_equal(np.array(want, np.float32).view(np.uint32),
                                np.array(have, np.float32).view(np.uint32))
        else:
            ok = want == have
        if not ok:
            errs.append(f"{key}: {have!r}, wrote {want!r}")
    if meta["kv"].get("general.architecture", {}).get("value") != "llama":
        errs.append("general.architecture is not 'llama'")
    return errs


def tensors_check(np, gguf, path, meta, out):
    errs = []
    reader = gguf.GGUFReader(path)
    if len(reader.tensors) != len(meta["tensors"]):
        return [f"{len(meta['tensors'])} tensors, gguf-py reads {len(reader.tensors)}"]
    for i, (t, m) in enumerate(zip(reader.tensors, meta["tensors"])):
        if t.name != m["name"] or t.tensor_type.name != m["type"]:
            errs.append(f"tensor {i}: {m['name']} {m['type']}, gguf-py: {t.name} "
                        f"{t.tensor_type.name}")
            continue
        if [int(d) for d in t.shape] != m["dims"]:
            errs.append(f"{t.name}: dims {m['dims']}, gguf-py {list(t.shape)}")
        if t.data_offset != reader.data_offset + m["offset"]:
            errs.append(f"{t.name}: data at {meta['data_start']} + {m['offset']}, gguf-py "
                        f"{t.data_offset}")
        want = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type),
                                    dtype=np.float32).ravel()
        have = np.fromfile(os.path.join(out, f"{i}.f32"), dtype="<f4")
        if have.shape != want.shape:
            errs.append(f"{t.name}: {have.size} values, gguf-py {want.size}")
        elif not np.array_equal(have.view(np.uint32), want.view(np.uint32)):
            bad = np.flatnonzero(have.view(np.uint32) != want.view(np.uint32))
            j = bad[0]
            errs.append(f"{t.name} ({t.tensor_type.name}): {bad.size} of {want.size} values "
                        f"differ, first at {j}: {have[j]!r} vs gguf-py {want[j]!r}")
        else:
            print(f"  {t.name:10s} {t.tensor_type.name:5s} {want.size:6d} values bit-identical")
    return errs


def inner(dump, work):
    import numpy as np
    import gguf
    errs = []
    for version, alignment in ((3, None), (2, 64)):
        path = os.path.join(work, f"synthetic_v{version}.gguf")
        gguf_write(np, gguf, path, version, alignment)
        out = os.path.join(work, f"dump_v{version}")
        os.makedirs(out, exist_ok=True)
        r = subprocess.run([dump, path, out], capture_output=True, text=True)
        if r.returncode != 0:
            errs.append(f"v{version}: gguf_dump exit {r.returncode}: {r.stderr}")
            continue
        with open(os.path.join(out, "meta.json"), encoding="utf-8") as f:
            meta = json.load(f)
        print(f"GGUF v{version} (alignment {meta['alignment']}): {len(meta['kv'])} keys, "
              f"{len(meta['tensors'])} tensors")
        errs += [f"v{version}: {e}" for e in meta_check(np, gguf, meta, version, alignment)]
        errs += [f"v{version}: {e}" for e in tensors_check(np, gguf, path, meta, out)]
    for e in errs:
        print("FAIL", e)
    return 1 if errs else 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--inner":
        sys.exit(inner(sys.argv[2], sys.argv[3]))
    dump, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    py = venv_make(work)
    sys.exit(subprocess.run([py, os.path.abspath(__file__), "--inner", dump, work]).returncode)


if __name__ == "__main__":
    main()
