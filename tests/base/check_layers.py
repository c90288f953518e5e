#!/usr/bin/env python3
"""The house plan as a test (docs/design.md, "House plan").

Every quoted #include names its layer as the first path component ("base/check.h",
"kernels/backend.h", "parallel/mesh.h", "engine/engine.h"), and a file may include only its own
layer and the layers this table puts below it. The engine reaches MPI only through the comm
interface, so no `MPI_` may appear anywhere under src/engine/.

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
    "engine": {"base", "kernels", "parallel", "job", "model", "metrics"},
    "io": {"base", "kernels", "parallel", "job", "model", "metrics"},
    "analysis": {"base", "kernels", "parallel", "job", "model", "metrics", "engine", "io"},
    "cli": {"base", "kernels", "parallel", "job", "model", "metrics", "engine", "io", "analysis"},
}
SOURCE_SUFFIXES = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


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
        if layer == "engine":
            for line, content in enumerate(text.split("\n"), 1):
                if "MPI_" in content:
                        found.append(f"{rel}:{line}: MPI_ in the engine: reach MPI through "
                                 f"comm_ops (parallel/comm.h)")
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
        expected = ["src/base/bad.c:1", "kernels/cpu/bad.c:1", "src/engine/bad.c:1",
                    "src/io/bad.c:1", "src/stray.c"]
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
