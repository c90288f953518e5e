#!/usr/bin/python3
"""Checks a real run file against docs/schema.md.

  check_schema.py SCHEMA.md RUN.h5 [--partial]

The layout is kept here as data (SCHEMA below). Two checks tie it to the document: every item
listed here must be named in docs/schema.md, and every row of the document's attribute and
field tables must be listed here, so neither can change without the other. Then every item
must exist in the run file with the documented type and shape, and the values that the
document pins down (format, version, complete, enum values, mesh coordinates...) must hold."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_lib as L  # noqa: E402
from e2e_lib import expect, h5py, np  # noqa: E402

# kinds: "str" fixed-length string scalar, "int" int64 scalar, "f64" float64 scalar,
# "str[]" fixed-length string array, "f64[world]" / "i64[world]" arrays of world_size.
ROOT_ATTRS = {
    "format": "str", "format_version": "int", "tripar_version": "str", "job": "str",
    "created": "str", "world_size": "int", "dp": "int", "tp": "int", "pp": "int", "ep": "int",
    "microbatches": "int", "order": "str", "overlap": "int", "mpi_settings": "str",
    "backend": "str",
    "precision": "str", "hosts": "str[]", "complete": "int",
}
MESH_FIELDS = {
    "rank": "i4", "host": "S64", "local_rank": "i4", "node": "i4", "device": "i4",
    "pci_bus_id": "S32", "kernels": "S32", "dp_rank": "i4", "pp_rank": "i4", "tp_rank": "i4",
    "clock_offset": "f8", "clock_uncertainty": "f8",
}
TIMINGS_ATTRS = {"level": "str", "clock_offset": "f64[world]",
                 "clock_uncertainty": "f64[world]", "dropped": "i64[world]"}
EVENT_FIELDS = {"step": "i4", "microbatch": "i4", "layer": "i4", "phase": "enum",
                "iteration": "i4", "t_start": "f8", "t_end": "f8"}
METRICS_DATASETS = {"latency": "iterations", "ttft": "iterations", "tpot": "iterations",
                    "peak_memory_bytes": "world"}
METRICS_ATTRS = dict(
    {"iterations": "int", "prefill_seconds": "f64", "decode_seconds": "f64",
     "cold_start_seconds": "f64", "prompt_tokens": "int", "generated_tokens": "int",
     "requests": "int", "tokens_per_s": "f64", "requests_per_s": "f64",
     "peak_memory_bytes_max": "f64"},
    **{"%s_%s" % (s, q): "f64" for s in ("latency", "ttft", "tpot")
       for q in ("mean", "p50", "p90", "p99")})
PHASE_ENUM = {name: i for i, name in enumerate(L.PHASES)}


def documented_names(doc):
    """Every identifier the document names in backticks or in a table's first column, with
    `a_x|y|z` shorthands expanded to a_x, a_y, a_z."""
    names = set()
    for chunk in re.findall(r"`([^`]+)`", doc):
        names.update(expand(chunk))
    for line in doc.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            first = line.split("|")[1]
            for part in first.split(","):
                names.update(expand(part.strip()))
    names.update(re.findall(r"\b[a-z_][a-z0-9_]*\b", doc))  # plain words in prose
    return names


def expand(text):
    out = set()
    m = re.fullmatch(r"([a-z_]+)_([a-z0-9]+(?:\|[a-z0-9]+)+)", text.strip())
    if m:
        return {"%s_%s" % (m.group(1), q) for q in m.group(2).split("|")}
    for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text):
        out.add(w)
    return out


def table_rows(doc, heading):
    """First-column names of the first table after the line starting with heading."""
    lines = doc.splitlines()
    try:
        i = next(k for k, line in enumerate(lines) if line.startswith(heading))
    except StopIteration:
        L.fail("docs/schema.md has no section %r" % heading)
        return set()
    rows, in_table = set(), False
    for line in lines[i + 1:]:
        if line.startswith("|"):
            in_table = True
            if line.startswith("|---"):
                continue
            first = line.split("|")[1].strip()
            if first in ("name", "field"):
                continue
            rows.update(p.strip() for p in first.split(","))
        elif in_table:
            break
    return rows


def check_doc(doc):
    names = documented_names(doc)
    for group, items in (("root attribute", ROOT_ATTRS), ("/mesh field", MESH_FIELDS),
                         ("/timings attribute", TIMINGS_ATTRS), ("event field", EVENT_FIELDS),
                         ("/metrics dataset", METRICS_DATASETS),
                         ("/metrics attribute", METRICS_ATTRS), ("phase", PHASE_ENUM)):
        for name in items:
            expect(name in names, "docs/schema.md does not mention %s %s" % (group, name))
    for m in re.finditer(r"([a-z_]+)=(\d+)", doc[doc.find("Phase enum"):]):
        if m.group(1) in PHASE_ENUM:
            expect(PHASE_ENUM[m.group(1)] == int(m.group(2)),
                   "docs/schema.md gives %s=%s, the checker %d" % (
                       m.group(1), m.group(2), PHASE_ENUM[m.group(1)]))
    for heading, items in (("## Root attributes", ROOT_ATTRS), ("## /mesh", MESH_FIELDS),
                           ("## /timings", TIMINGS_ATTRS)):
        for row in table_rows(doc, heading):
            expect(row in items, "docs/schema.md %s lists %s, which check_schema.py does not "
                   "check" % (heading, row))
    events_at = doc.find("`/timings/rank_NNNNN/events`")
    for row in table_rows(doc[events_at:], "`/timings/rank_NNNNN/events`"):
        expect(row in EVENT_FIELDS, "docs/schema.md events table lists %s, unchecked" % row)


def is_fixed_string(tid):
    return tid.get_class() == h5py.h5t.STRING and not tid.is_variable_str()


def check_attr(obj, where, name, kind, world):
    if not expect(name in obj.attrs, "%s: attribute %s missing" % (where, name)):
        return None
    aid = h5py.h5a.open(obj.id, name.encode())
    tid, shape = aid.get_type(), aid.shape
    value = obj.attrs[name]
    if kind == "str":
        expect(is_fixed_string(tid) and shape == (), "%s.%s: want a fixed-length string "
               "scalar" % (where, name))
    elif kind == "str[]":
        expect(is_fixed_string(tid) and len(shape) == 1 and tid.get_size() == 64,
               "%s.%s: want a 1-D array of 64-byte strings" % (where, name))
    elif kind == "int":
        expect(tid.get_class() == h5py.h5t.INTEGER and tid.get_size() == 8 and shape == (),
               "%s.%s: want an int64 scalar" % (where, name))
    elif kind == "f64":
        expect(tid.get_class() == h5py.h5t.FLOAT and tid.get_size() == 8 and shape == (),
               "%s.%s: want a float64 scalar" % (where, name))
    elif kind in ("f64[world]", "i64[world]"):
        cls = h5py.h5t.FLOAT if kind.startswith("f") else h5py.h5t.INTEGER
        expect(tid.get_class() == cls and tid.get_size() == 8 and shape == (world,),
               "%s.%s: want %s, got class %d size %d shape %s" % (
                   where, name, kind.replace("world", str(world)), tid.get_class(),
                   tid.get_size(), shape))
    return value


def check_compound(where, dtype, fields):
    expect(list(dtype.names) == list(fields), "%s: fields %s, documented %s" % (
        where, list(dtype.names), list(fields)))
    for name, kind in fields.items():
        if name not in dtype.names:
            continue
        got = dtype[name]
        if kind == "enum":
            mapping = h5py.check_enum_dtype(got)
            expect(mapping == PHASE_ENUM, "%s.%s: enum %s, documented %s" % (
                where, name, mapping, PHASE_ENUM))
            expect(got.itemsize == 4, "%s.%s: enum base must be int32" % (where, name))
        else:
            expect(got.str.lstrip("<|") == kind, "%s.%s: %s, documented %s" % (
                where, name, got.str, kind))


def check_file(path, partial):
    with h5py.File(path, "r") as f:
        world = int(f.attrs.get("world_size", 0))
        a = {name: check_attr(f, "/", name, kind, world) for name, kind in ROOT_ATTRS.items()}
        expect(L.text(a["format"]) == "tripar-run", "format = %r" % a["format"])
        expect(a["format_version"] == 1, "format_version = %r" % a["format_version"])
        expect(a["complete"] == (0 if partial else 1), "complete = %r" % a["complete"])
        expect(world == a["dp"] * a["tp"] * a["pp"], "world_size != dp * tp * pp")
        expect(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", L.text(a["created"])) is not None,
               "created %r is not ISO-8601 UTC" % a["created"])
        expect(L.text(a["backend"]) in ("cpu", "cuda"), "backend %r" % a["backend"])
        expect(L.text(a["precision"]) in ("fp32", "int8w", "bf16", "fp16"),
               "precision %r" % a["precision"])
        expect(L.text(a["order"]) == "auto" or
               sorted(L.text(a["order"]).split("-")) == ["dp", "pp", "tp"], "order %r" % a["order"])
        expect(a["overlap"] in (0, 1), "overlap %r" % a["overlap"])
        # every setting names who set it (tests/parallel/check_mpi_tuning.py checks the values)
        expect(re.search(r"coll_libnbc_iallreduce_algorithm(=-?\d+)? \((tripar, MPI_T|user|"
                         r"default|not exposed)\)", L.text(a["mpi_settings"])) is not None,
               "mpi_settings %r" % a["mpi_settings"])
        job = L.yaml.safe_load(L.text(a["job"]))
        expect(job["parallel"]["tp"] == a["tp"] and job["parallel"]["pp"] == a["pp"] and
               job["parallel"]["microbatches"] == a["microbatches"] and
               job["parallel"]["ep"] == a["ep"] and a["tp"] % a["ep"] == 0,
               "job text and mesh attributes disagree")

        if expect("mesh" in f, "/mesh missing"):
            d = f["mesh"]
            expect(d.shape == (world,), "/mesh shape %s, want (%d,)" % (d.shape, world))
            check_compound("/mesh", d.dtype, MESH_FIELDS)
            m = d[...]
            expect(list(m["rank"]) == list(range(world)), "/mesh rank column %s" % m["rank"])
            coords = {(int(x["dp_rank"]), int(x["tp_rank"]), int(x["pp_rank"])) for x in m}
            expect(len(coords) == world and
                   all(0 <= c[0] < a["dp"] and 0 <= c[1] < a["tp"] and 0 <= c[2] < a["pp"]
                       for c in coords), "/mesh coordinates are not a dp x tp x pp grid")
            hosts = [L.text(h) for h in a["hosts"]]
            expect(sorted(set(L.text(x["host"]) for x in m)) == sorted(hosts),
                   "/mesh hosts differ from the hosts attribute %s" % hosts)
            expect(bool((m["device"] == -1).all()) if L.text(a["backend"]) == "cpu" else True,
                   "cpu run with a device ordinal")

        if expect("output/tokens" in f, "/output/tokens missing"):
            t = f["output/tokens"]
            rows = job["input"]["synthetic"]["batch"] if "synthetic" in job["input"] \
                else len(job["input"]["tokens"])
            plen = job["input"]["synthetic"]["length"] if "synthetic" in job["input"] \
                else len(job["input"]["tokens"][0])
            expect(t.dtype == np.int32 and t.shape == (rows, plen + job["generate"]["new_tokens"]),
                   "/output/tokens %s %s" % (t.dtype, t.shape))
            if not partial:
                vocab = job["model"]["synthetic"]["vocab"]
                tok = t[...]
                expect(bool(((tok >= 0) & (tok < vocab)).all()), "token ids outside the vocab")

        if "activations" in f:
            embd, vocab = job["model"]["synthetic"]["embd"], job["model"]["synthetic"]["vocab"]
            for name, d in f["activations"].items():
                width = vocab if name == "logits" else embd
                expect(d.dtype == np.float32 and d.ndim == 3 and d.shape[2] == width,
                       "/activations/%s %s %s" % (name, d.dtype, d.shape))

        if expect("timings" in f, "/timings missing"):
            g = f["timings"]
            for name, kind in TIMINGS_ATTRS.items():
                check_attr(g, "/timings", name, kind, world)
            for r in range(world):
                p = "rank_%05d/events" % r
                if not expect(p in g, "/timings/%s missing" % p):
                    continue
                d = g[p]
                check_compound("/timings/" + p, d.dtype, EVENT_FIELDS)
                expect(d.chunks == (1024,) and d.maxshape == (None,),
                       "/timings/%s: chunks %s maxshape %s, documented (1024,) and unlimited" % (
                           p, d.chunks, d.maxshape))

        if expect("metrics" in f, "/metrics missing"):
            g = f["metrics"]
            n_it = check_attr(g, "/metrics", "iterations", "int", world)
            for name, kind in METRICS_ATTRS.items():
                check_attr(g, "/metrics", name, kind, world)
            for name, dim in METRICS_DATASETS.items():
                if expect(name in g, "/metrics/%s missing" % name):
                    want = (world,) if dim == "world" else (int(n_it or 0),)
                    expect(g[name].dtype == np.float64 and g[name].shape == want,
                           "/metrics/%s %s %s, want float64 %s" % (
                               name, g[name].dtype, g[name].shape, want))
            if not partial and n_it:
                lat = g["latency"][...]
                expect(abs(float(g.attrs["latency_mean"]) - float(lat.mean())) <= 1e-12 +
                       1e-9 * float(lat.mean()), "latency_mean is not the mean of latency")
                expect(int(g.attrs["iterations"]) == job["bench"]["iterations"],
                       "/metrics iterations != bench.iterations")


def check_undocumented(doc, path):
    """The other direction: every attribute and dataset the writer puts in a real file is named
    somewhere in docs/schema.md (a writer change without a schema change fails here)."""
    names = documented_names(doc)
    with h5py.File(path, "r") as f:
        for where, obj in (("/", f), ("/timings", f.get("timings")), ("/metrics", f.get("metrics"))):
            if obj is None:
                continue
            for name in obj.attrs:
                expect(name in names, "%s attribute %s is not in docs/schema.md" % (where, name))
        for name in f.get("metrics", {}):
            expect(name in names, "/metrics/%s is not in docs/schema.md" % name)
        for name in f:
            expect(name in names, "/%s is not in docs/schema.md" % name)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.exit("usage: check_schema.py SCHEMA.md RUN.h5 [--partial]")
    with open(args[0]) as fh:
        doc = fh.read()
    check_doc(doc)
    check_undocumented(doc, args[1])
    check_file(args[1], "--partial" in sys.argv)
    L.finish("check_schema %s" % os.path.basename(args[1]))


if __name__ == "__main__":
    main()
