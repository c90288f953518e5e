#!/usr/bin/env python3
"""No circle of calls among the files of one folder (docs/design.md, "House plan").

The layering test (check_layers.py) keeps includes pointing down between folders; inside a
folder of src/, kernels/ or parallel/, files may call each other, but never in a circle: when a.c calls b.c, nothing that b.c
calls (directly or through other files of the folder) may call back into a.c. A circle means
two concerns were cut apart in the wrong place, and neither file can be read alone.

The call graph comes from the compiled objects, so nothing is missed to macros or static
inline wrappers: a file calls another when its object's undefined symbols (nm's U) include one
the other defines (T, D, B, R). Only objects whose source still exists count, so an incremental
build's leftovers from a moved file are ignored.

  check_calls.py BUILD_DIR SOURCE_DIR   check the objects of src/, kernels/ and parallel/; exit 1
                                        naming every circle and one call on each of its edges
  check_calls.py --self-test            build a planted circle (and a clean chain) with cc and
                                        check that only the circle is reported
"""
import collections
import os
import subprocess
import sys
import tempfile

LIBRARIES = ("tripar_core.dir", "tripar_cli.dir")
DEFINED = set("TDBR")
FOLDERS = ("src", "kernels", "parallel")  # the layers; tests and tools are not


def objects(build, source):
    """{source path relative to SOURCE_DIR: object path} for the layers' objects of the build."""
    found = {}
    for lib in LIBRARIES:
        top = os.path.join(build, "CMakeFiles", lib)
        for dirpath, _, names in os.walk(top):
            for name in names:
                if not name.endswith(".o"):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), top)[:-len(".o")]
                if rel.split(os.sep)[0] in FOLDERS and os.path.exists(os.path.join(source, rel)):
                    found[rel] = os.path.join(dirpath, name)
    return found


def symbols(obj):
    """(defined, undefined) external symbol names of one object file."""
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in DEFINED:
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
    return defined, undefined


def call_graph(objs):
    """{file: {callee file of the same folder: one symbol it calls there}}."""
    owner, wanted = {}, {}
    for rel, obj in objs.items():
        defined, undefined = symbols(obj)
        for s in defined:
            owner[s] = rel
        wanted[rel] = undefined
    graph = collections.defaultdict(dict)
    for rel, undefined in wanted.items():
        for s in sorted(undefined):
            callee = owner.get(s)
            if callee and callee != rel and os.path.dirname(callee) == os.path.dirname(rel):
                graph[rel].setdefault(callee, s)
    return graph


def circles(graph, nodes):
    """The strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def report(build, source):
    objs = objects(build, source)
    if not objs:
        print(f"check_calls: no src/ objects under {build}/CMakeFiles: build first")
        return 2
    graph = call_graph(objs)
    found = circles(graph, objs)
    for component in found:
        members = set(component)
        edges = [f"{a} -> {b} ({graph[a][b]})" for a in component for b in sorted(graph[a])
                 if b in members]
        print(f"circle of calls among {', '.join(component)}:\n    " + "\n    ".join(edges))
    print(f"check_calls: {len(objs)} files, {len(found)} circle(s)")
    return 1 if found else 0


def self_test():
    with tempfile.TemporaryDirectory() as root:
        src, build = os.path.join(root, "src"), os.path.join(root, "build")
        files = {  # a.c <-> b.c is the circle; c.c -> d.c a chain; e.c in another folder
            "src/x/a.c": "int b1(void); int a1(void) { return b1(); } int a2(void) { return 2; }",
            "src/x/b.c": "int a2(void); int b1(void) { return a2(); }",
            "src/y/c.c": "int d1(void); int c1(void) { return d1(); }",
            "src/y/d.c": "int e1(void); int d1(void) { return e1(); }",
            "src/z/e.c": "int c1(void); int e1(void) { return 1; } int e2(void) { return c1(); }",
        }
        for rel, text in files.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text + "\n")
            obj = os.path.join(build, "CMakeFiles", LIBRARIES[0], rel + ".o")
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            subprocess.run(["cc", "-c", "-o", obj, path], check=True)
        # a leftover object whose source is gone must not count
        stale = os.path.join(build, "CMakeFiles", LIBRARIES[0], "src/y/gone.c.o")
        subprocess.run(["cp", os.path.join(build, "CMakeFiles", LIBRARIES[0], "src/x/b.c.o"),
                        stale], check=True)
        objs = objects(build, root)
        found = circles(call_graph(objs), objs)
        if found != [["src/x/a.c", "src/x/b.c"]]:
            print("self-test: expected the one planted circle src/x/a.c <-> src/x/b.c, got", found)
            return 1
    print("self-test: the planted circle was reported, the chain and the leftover were not")
    return 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    return report(sys.argv[1], sys.argv[2])


if __name__ == "__main__":
    sys.exit(main())
