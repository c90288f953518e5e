# Sourced by the peer benchmarks (jobs/bench-cpu-peers.sh, jobs/bench-real.sh): llama.cpp, the
# peer, built from the llama-cpp-python source distribution on PyPI (it vendors llama.cpp), and
# a venv with llama.cpp's own gguf-py, all in a cache folder outside the repository.
#   peer_cache                   sets PEER_CACHE: TRIPAR_PEERS_CACHE, by default
#                                ~/.cache/tripar/peers; exit 2 when it is inside the repository
#   peer_setup TARGET...         sets PEER_VENV (a venv with gguf and numpy) and PEER_BIN (the
#                                folder of the built llama.cpp tools), building what is missing
# The caller defines say and die. Every version is pinned; the sdist is checked by its sha256.

# llama-cpp-python 0.3.36 vendors llama.cpp at ggml-org/llama.cpp@0c1e57098 (its CHANGELOG;
# llama-bench reports "build 1, commit 0c1e570"). The gguf is the one that llama.cpp commit
# carries in gguf-py (0.19.0).
LCP_VERSION=0.3.36
LCP_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMA_CPP_COMMIT=0c1e57098
GGUF_VERSION=0.19.0
NUMPY_VERSION=2.4.6

peer_cache() {
    PEER_CACHE=$(realpath -m "${TRIPAR_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tripar/peers}")
    case $PEER_CACHE/ in "$(pwd -P)"/*) say "the cache $PEER_CACHE is inside the repository; set TRIPAR_PEERS_CACHE elsewhere"; exit 2 ;; esac
    mkdir -p "$PEER_CACHE"
}

peer_setup() {
    local cache=$PEER_CACHE

    PEER_VENV=$cache/venv-gguf-$GGUF_VERSION
    if [ ! -x "$PEER_VENV/bin/python" ] || ! "$PEER_VENV/bin/python" -c "import gguf" 2>/dev/null; then
        say "creating $PEER_VENV (gguf==$GGUF_VERSION, numpy==$NUMPY_VERSION)"
        rm -rf "$PEER_VENV"
        /usr/bin/python3 -m venv "$PEER_VENV" || die "cannot create a venv; apt-get install -y python3-venv"
        "$PEER_VENV/bin/pip" install -q "gguf==$GGUF_VERSION" "numpy==$NUMPY_VERSION" || die "pip install gguf failed"
    fi

    local sdist=$cache/sdist/llama_cpp_python-$LCP_VERSION.tar.gz
    if [ ! -f "$sdist" ]; then
        say "downloading the llama-cpp-python $LCP_VERSION source distribution from PyPI"
        # the sdist, never a wheel; its metadata is prepared with build tools from wheels (with
        # --no-binary :all: pip would build those from source too, which takes many minutes)
        "$PEER_VENV/bin/pip" download -q --no-binary llama-cpp-python --no-deps \
            "llama-cpp-python==$LCP_VERSION" -d "$cache/sdist" ||
            die "pip download llama-cpp-python==$LCP_VERSION failed"
    fi
    echo "$LCP_SHA256  $sdist" | sha256sum -c --status ||
        die "$sdist: its sha256 is not the pinned $LCP_SHA256 (delete it to download it again)"
    local src=$cache/src/llama_cpp_python-$LCP_VERSION
    if [ ! -d "$src" ]; then
        # unpacked beside and renamed, so that an interrupted unpack is never taken for a whole one
        rm -rf "$src.partial"
        mkdir -p "$src.partial"
        tar -xzf "$sdist" -C "$src.partial" || die "cannot unpack $sdist"
        mv "$src.partial/llama_cpp_python-$LCP_VERSION" "$src"
        rmdir "$src.partial"
    fi
    [ -f "$src/vendor/llama.cpp/CMakeLists.txt" ] || die "$src has no vendor/llama.cpp"

    local bdir=$cache/build/llama.cpp-$LCP_VERSION missing=() t
    PEER_BIN=$bdir/bin
    for t in "$@"; do [ -x "$PEER_BIN/$t" ] || missing+=("$t"); done
    [ ${#missing[@]} = 0 ] && return 0
    say "building ${missing[*]} from $src/vendor/llama.cpp into $bdir (several minutes on 2 cores; log: $bdir.log)"
    local start
    start=$(date +%s)
    mkdir -p "$cache/build"
    # CPU backend only, compiled for this CPU (GGML_NATIVE), static, no network (OpenSSL),
    # no tests, examples, server or app: the tools asked for and the libraries they link
    cmake -S "$src/vendor/llama.cpp" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
        -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_BLAS=OFF -DGGML_CCACHE=OFF \
        >>"$bdir.log" 2>&1 || { tail -20 "$bdir.log" >&2; die "configuring llama.cpp failed"; }
    cmake --build "$bdir" --target "${missing[@]}" -j"$(nproc)" 2>&1 | tee -a "$bdir.log" |
        awk '/^\[ *[0-9]+%\]/ { p = substr($0, 2, 3) + 0; if (p >= last + 10) { last = p;
             printf "peer_build: building llama.cpp %3d%%\n", p > "/dev/stderr" } }' ||
        { tail -20 "$bdir.log" >&2; die "building llama.cpp failed (log: $bdir.log)"; }
    for t in "${missing[@]}"; do [ -x "$PEER_BIN/$t" ] || die "the build made no $PEER_BIN/$t (log: $bdir.log)"; done
    say "${missing[*]} built in $(($(date +%s) - start)) s"
}

# llama.cpp built with -march=native on a CPU with AMX (Sapphire Rapids) routes quantised types
# to its AMX buffer type when weights are repacked (--repack 1, the default); on these VMs that
# path segfaults in ggml_backend_amx_mul_mat. peer_repack GGUF prints 1 when llama-bench runs
# the file with repacking, 0 when it needs --repack 0 (ggml's plain AVX-512/VNNI kernels), and
# dies when neither runs.
peer_repack() {
    local probe=("$PEER_BIN/llama-bench" -m "$1" -t 1 -r 1 -p 8 -n 0) log
    log=$(mktemp)
    if "${probe[@]}" >/dev/null 2>"$log"; then
        echo 1
    elif "${probe[@]}" --repack 0 >/dev/null 2>>"$log"; then
        echo 0
    else
        tail -20 "$log" >&2
        rm -f "$log"
        die "llama-bench fails on $1 with and without --repack"
    fi
    rm -f "$log"
}
