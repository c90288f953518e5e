#!/usr/bin/env bash
# The CUDA module's link contract (kernels/cuda_module.h), on every build with CUDA, no GPU:
#  - tripar does not load cudart, cuBLAS or NCCL itself (the point of the module);
#  - the module exports its two entry tables and nothing else;
#  - the core functions it calls are exactly TRIPAR_CUDA_MODULE_IMPORTS (CMakeLists.txt), the
#    list every executable links and exports, so that it opens in any of them;
#  - tripar exports each of them.
# Usage: cuda_module_imports.sh TRIPAR MODULE CORE_ARCHIVE IMPORT...
set -euo pipefail
tripar=$1 module=$2 core=$3
shift 3
listed=$(printf '%s\n' "$@" | sort -u)
fail=0

loads=$(readelf -d "$tripar" | grep NEEDED | grep -Eo 'lib(cudart|cublas|cublasLt|nccl)[^]]*' || true)
if [ -n "$loads" ]; then
    echo "FAIL: tripar itself needs $loads: only the module may"
    fail=1
fi

exported=$(nm -D --defined-only "$module" | awk '{print $3}' | sort -u)
if [ "$exported" != "$(printf 'tripar_cuda_backend\ntripar_nccl_comm')" ]; then
    echo "FAIL: the module exports: $(echo $exported) (want tripar_cuda_backend tripar_nccl_comm)"
    fail=1
fi

core_defined=$(nm --defined-only "$core" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDBR]$/ {print $3}' | sort -u)
imported=$(comm -12 <(nm -D --undefined-only "$module" | awk '{print $2}' | sort -u) \
                    <(echo "$core_defined"))
missing=$(comm -23 <(echo "$imported") <(echo "$listed"))
extra=$(comm -13 <(echo "$imported") <(echo "$listed"))
if [ -n "$missing" ]; then
    echo "FAIL: the module calls core functions TRIPAR_CUDA_MODULE_IMPORTS lacks: $(echo $missing)"
    fail=1
fi
if [ -n "$extra" ]; then
    echo "FAIL: TRIPAR_CUDA_MODULE_IMPORTS names what the module no longer calls: $(echo $extra)"
    fail=1
fi
unexported=$(comm -23 <(echo "$listed") <(nm -D --defined-only "$tripar" | awk '{print $3}' | sort -u))
if [ -n "$unexported" ]; then
    echo "FAIL: tripar does not export $(echo $unexported)"
    fail=1
fi
[ $fail = 0 ] || exit 1
echo "cuda module: tripar needs no CUDA library; the module exports its 2 tables and imports" \
     "$(echo "$imported" | wc -l) core functions, all linked and exported by tripar"
