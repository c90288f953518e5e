#!/usr/bin/env python3
"""The house plan as a test (docs/design.md, "House plan").

Every quoted #include names its layer as the first path component ("base/check.h",
"kernels/backend.h", "parallel/mesh.h", "engine/engine.h"), and a file may include only its own
layer and the layers this table puts below it. Three more rules:
  - the engine reaches MPI only through the comm interface, so no `MPI_` may appear anywhere
    under src/engine/;
  - the engine computes and writes no files: it opens none (no fopen, open, H5Fcreate, ...);
  - a raw MPI call (`MPI_Xxx(` or `PMPI_Xxx(`) appears only where MPI_ALLOWED says: parallel/
    (the comm backends and the named agreements of parallel/agree.h), set-up and teardown, the
    PMPI guard, the clock alignment and commbench. Types and constants (MPI_Comm, MPI_INT) and
    the MPI_CHECK macro are not calls and may appear anywhere but the engine.

  check_layers.py ROOT          check the tree at ROOT; exit 1 listing every violation
  check_layers.py --self-test   plant one violation of each kind in a scratch tree and check
                                that each is reported (so the checker cannot pass vacuously)
"""
import os
import re
import sys
import tempfile

# layer -> the layers it may include (besides itself). kernels/ and parallel/ are top-level
# folders; the rest live under src/.
BELOW = {
    "base": set(),
    "kernels": {"base"},
    "parallel": {"base", "kernels"},
    "job": {"base"},
    "model": {"base", "kernels", "parallel", "job"},
    "metrics": {"base", "kernels", "parallel", "job", "model"},
    # The engine never takes the job: it gets an engine_config (docs/design.md).
    "engine": {"base", "kernels", "parallel", "model", "metrics"},
    "io": {"base", "kernels", "parallel", "job", "model", "metrics"},
    "analysis": {"base", "kernels", "parallel", "job", "model", "metrics", "engine", "io"},
    "cli": {"base", "kernels", "parallel", "job", "model", "metrics", "engine", "io", "analysis"},
}
SOURCE_SUFFIXES = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# Where a raw MPI call may stand, each with its reason: a path prefix relative to the root.
MPI_ALLOWED = {
    "parallel/": "the comm backends, the mesh and the named agreements (parallel/agree.h)",
    "src/base/check.c": "MPI_Abort on a failed check",
    "src/base/check.h": "MPI_CHECK's error string",
    "src/cli/main.c": "MPI_Init and MPI_Finalize",
    "src/io/mpiio_guard.c": "the PMPI guard on the run file's MPI-IO writes",
    "src/metrics/timing.c": "the clock alignment's ping-pong",
    "src/cli/commbench": "commbench, whose subject is the communicator itself",
}
MPI_CALL = re.compile(r"\bP?MPI_[A-Z][a-z0-9_]*\s*\(")
# Opening a file by any of the ways C, POSIX, HDF5 and the loader offer; a member call
# (ops->open) is not one.
FILE_OPEN = re.compile(r"(?<![\w.>])(fopen|freopen|fdopen|open|openat|creat|mkstemp|opendir|"
                       r"H5Fcreate|H5Fopen|dlopen)\s*\(")


def strip_comments(text):
    """The text with /* */ and // comments blanked (newlines kept, so line numbers hold)."""
    return re.sub(r"/\*.*?\*/|//[^\n]*",
                  lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def layer_files(root):
    """(layer, path) for every source file of every layer."""
    for layer in BELOW:
        top = os.path.join(root, layer) if layer in ("kernels", "parallel") else \
            os.path.join(root, "src", layer)
        for dirpath, _, names in os.walk(top):
            for name in sorted(names):
                if name.endswith(SOURCE_SUFFIXES):
                    yield layer, os.path.join(dirpath, name)


def stray_src_files(root):
    """Source files directly in src/ or in a src/ folder that is no layer."""
    src = os.path.join(root, "src")
    for dirpath, _, names in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        if rel == "." or rel.split(os.sep)[0] not in BELOW:
            for name in names:
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.join(dirpath, name)


def violations(root):
    found = []
    for path in stray_src_files(root):
        found.append(f"{os.path.relpath(path, root)}: not inside a layer folder of src/")
    for layer, path in layer_files(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            target = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            head = target.split("/")[0]
            if "/" not in target or target.startswith(".."):
                found.append(f"{rel}:{line}: #include \"{target}\" does not name its layer "
                             f"(write it as LAYER/... from the layer roots)")
            elif head not in BELOW:
                found.append(f"{rel}:{line}: #include \"{target}\": '{head}' is no layer")
            elif head != layer and head not in BELOW[layer]:
                allowed = ", ".join(sorted(BELOW[layer])) or "nothing"
                found.append(f"{rel}:{line}: {layer}/ includes \"{target}\" from {head}/, a "
                             f"layer above it ({layer}/ may include: {allowed})")
        code = strip_comments(text)
        for line, content in enumerate(code.split("\n"), 1):
            if layer == "engine" and "MPI_" in content:
                found.append(f"{rel}:{line}: MPI_ in the engine: reach MPI through "
                             f"comm_ops (parallel/comm.h)")
            elif MPI_CALL.search(content) and \
                    not any(rel.startswith(prefix) for prefix in MPI_ALLOWED):
                call = MPI_CALL.search(content).group(0).rstrip("( ")
                found.append(f"{rel}:{line}: raw {call} outside the places MPI is allowed: "
                             f"route it through parallel/ (parallel/agree.h for agreements "
                             f"between ranks)")
            if layer == "engine" and FILE_OPEN.search(content):
                call = FILE_OPEN.search(content).group(1)
                found.append(f"{rel}:{line}: {call}() in the engine: the engine opens no file; "
                             f"its caller reads and writes them (src/io/, src/cli/)")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def put(rel, text):
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        put("src/base/check.h", "#pragma once\n")
        put("src/model/model.h", '#include "base/check.h"\n')
        clean = violations(root)
        if clean:
            print("self-test: a clean tree was reported:", clean)
            return 1
        put("src/base/bad.c", '#include "model/model.h"\n')            # upward include
        put("kernels/cpu/bad.c", '#include "engine/engine.h"\n')       # kernels reach into src
        put("src/engine/bad.c", "int f(void) { return MPI_Barrier(0); }\n")  # MPI in the engine
        put("src/io/bad.c", '#include "runfile.h"\n')                  # bare include
        put("src/stray.c", "int x;\n")                                 # outside any layer
        put("src/engine/job_use.c", '#include "job/job.h"\n')         # the engine takes the job
        put("src/engine/writes.c", "void f(void) {\n  FILE *x = fopen(\"a\", \"w\");\n}\n")
        put("src/io/raw.c", "void f(void) {\n\n  MPI_Bcast(&x, 1, MPI_INT, 0, c);\n}\n")
        # not violations: a type, the check macro, a member call, a call in a comment, and a
        # raw call where it is allowed
        put("src/io/fine.c", "/* MPI_Bcast(x) */ void f(MPI_Comm c) { MPI_CHECK(g(c)); "
            "b->ops->open(1); }\n")
        put("parallel/agree.c", "void f(void) { MPI_Allreduce(0, 0, 1, MPI_INT, MPI_MAX, c); }\n")
        put("src/metrics/timing.c", "void f(void) { MPI_Send(0, 0, MPI_INT, 1, 0, c); }\n")
        expected = ["src/base/bad.c:1", "kernels/cpu/bad.c:1", "src/engine/bad.c:1",
                    "src/io/bad.c:1", "src/stray.c", "src/engine/job_use.c:1",
                    "src/engine/writes.c:2", "src/io/raw.c:3"]
        found = violations(root)
        missing = [e for e in expected if not any(v.startswith(e) for v in found)]
        if missing or len(found) != len(expected):
            print("self-test: expected one report each for", expected, "got", found)
            return 1
    print(f"self-test: all {len(expected)} planted violations reported")
    return 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1]
    found = violations(root)
    for v in found:
        print(v)
    n = sum(1 for _ in layer_files(root))
    print(f"check_layers: {n} files, {len(found)} violation(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
