#!/usr/bin/env bash
# Packs what the GPU checks need onto a bare GPU machine: the tripar binary and the gpu-labelled
# test executables of a build, every non-system shared library they load, and a relocatable
# copy of Open MPI (plugins, mpirun/orted, help files). Run here; carry the result; run
# tests/gpu/device_check.sh there. See docs/cuda.md ("Running on a lent GPU machine").
#
#   tests/gpu/bundle_libs.sh [BUILD_DIR=build-cuda] [DEST=build-gpu]
#
# Output: DEST/bin (executables, mpirun, orted), DEST/libs (shared libraries), DEST/ompi (an
# Open MPI prefix for OPAL_PREFIX), DEST/gpu_tests.tsv (name, command, one per line) and
# DEST.tar.xz (the same, compressed: the carry limit counts bytes).
set -euo pipefail

BUILD=${1:-build-cuda}
DEST=${2:-build-gpu}
[[ -x $BUILD/tripar ]] || { echo "bundle_libs: $BUILD/tripar not found (build first)" >&2; exit 2; }
BUILD=$(cd "$BUILD" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/libs"
DEST=$(cd "$DEST" && pwd)

# The GPU machine brings its own C runtime and driver; cuBLAS/cuBLASLt/NCCL are too large to
# carry (~800 MB) and come from its CUDA toolkit or its Python nvidia-* wheels instead.
is_system_lib() {
    case $(basename "$1") in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libresolv.so* | \
        libutil.so* | libstdc++.so* | libgcc_s.so* | libcuda.so* | libnvidia* | libcublas.so* | \
        libcublasLt.so* | libnccl.so* | linux-vdso*) return 0 ;;
    esac
    return 1
}

copy_deps() { # copies every non-system library that $1 loads into DEST/libs
    ldd "$1" 2>/dev/null | awk '/=> \//{print $3}' | while read -r lib; do
        is_system_lib "$lib" && continue
        [[ -e $DEST/libs/$(basename "$lib") ]] || cp -L "$lib" "$DEST/libs/"
    done
}

# 1. executables: tripar and the commands of every gpu-labelled test
cp "$BUILD/tripar" "$DEST/bin/"
copy_deps "$BUILD/tripar"
# the CUDA backend and NCCL are a module the executables open from their own folder
[[ -f $BUILD/libtripar_cuda.so ]] || { echo "bundle_libs: $BUILD has no libtripar_cuda.so (a build without CUDA?)" >&2; exit 2; }
cp "$BUILD/libtripar_cuda.so" "$DEST/bin/"
copy_deps "$BUILD/libtripar_cuda.so"
# the NVTX cost benchmark, when the build has the cuda backend
if [[ -x $BUILD/tools/tripar_nvtx_cost ]]; then
    cp "$BUILD/tools/tripar_nvtx_cost" "$DEST/bin/"
    copy_deps "$BUILD/tools/tripar_nvtx_cost"
fi
: >"$DEST/gpu_tests.tsv"
if (cd "$BUILD" && ctest -N -L gpu --show-only=json-v1) >"$DEST/.ctest.json" 2>/dev/null; then
    /usr/bin/python3 - "$DEST/.ctest.json" "$BUILD" "$DEST" "$SRC" <<'PY' >"$DEST/.exes"
import json, os, sys
data = json.load(open(sys.argv[1]))
build, dest, src = sys.argv[2], sys.argv[3], sys.argv[4]
with open(os.path.join(dest, "gpu_tests.tsv"), "w") as out:
    for t in data.get("tests", []):
        cmd = t.get("command") or []
        if not cmd:
            continue
        words = []
        for w in cmd:
            base = os.path.basename(w)
            if base in ("mpiexec", "mpirun", "orterun"):
                words.append("mpirun")
            elif os.path.isabs(w) and w.startswith(build + "/") and os.path.isfile(w):
                print(w)  # an executable of the build: copied into bin/
                words.append("bin/" + base)
            elif os.path.isabs(w) and w.startswith(build + "/"):
                words.append("$TMPDIR/" + os.path.relpath(w, build))  # a work dir of a test
            elif os.path.isabs(w) and w.startswith(src + "/"):
                # a script of the source tree: the GPU machine has its own copy of the tree,
                # and device_check.sh exports TRIPAR_SOURCE_DIR (the manifest runs in bash -c)
                words.append("$TRIPAR_SOURCE_DIR/" + os.path.relpath(w, src))
            else:
                words.append(w)
        out.write(t["name"] + "\t" + " ".join(words) + "\n")
PY
    while read -r exe; do
        cp "$exe" "$DEST/bin/"
        copy_deps "$exe"
    done <"$DEST/.exes"
    rm -f "$DEST/.exes" "$DEST/.ctest.json"
fi

# 2. Open MPI, relocated with OPAL_PREFIX=DEST/ompi: it derives bindir, the plugin dir and
# the help files from the prefix; /etc/openmpi (mca params) is absolute and simply absent there.
ompi_path() { ompi_info --path "$1" --parsable 2>/dev/null | awk -F: '{print $NF}'; }
if command -v ompi_info >/dev/null; then
    prefix=$(ompi_path prefix)
    pkglibdir=$(ompi_path pkglibdir)
    pkgdatadir=$(ompi_path pkgdatadir)
    O=$DEST/ompi
    mkdir -p "$O/bin" "$O${pkglibdir#"$prefix"}" "$O${pkgdatadir#"$prefix"}"
    cp -L "$pkglibdir"/*.so "$O${pkglibdir#"$prefix"}/" 2>/dev/null || true
    cp -rL "$pkgdatadir"/. "$O${pkgdatadir#"$prefix"}/"
    for f in "$pkglibdir"/*.so; do copy_deps "$f"; done
    for b in orterun orted prted prterun mpirun mpiexec; do
        src=$(command -v "$b" || true)
        [[ -n $src ]] || continue
        cp -L "$src" "$O/bin/$b"
        copy_deps "$src"
    done
    ln -sf ../ompi/bin/mpirun "$DEST/bin/mpirun" 2>/dev/null || true
    # PMIx (external in Debian's Open MPI 4.1) has plugins of its own
    for d in /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix /usr/lib/x86_64-linux-gnu/pmix/lib/pmix; do
        [[ -d $d ]] || continue
        mkdir -p "$DEST/pmix"
        cp -L "$d"/*.so "$DEST/pmix/" 2>/dev/null || true
        for f in "$d"/*.so; do copy_deps "$f"; done
    done
fi

strip --strip-unneeded "$DEST"/libs/*.so* 2>/dev/null || true
du -sh "$DEST"
tar -C "$(dirname "$DEST")" -cJf "$DEST.tar.xz" "$(basename "$DEST")"
ls -la "$DEST.tar.xz"
