#!/usr/bin/env bash
# The cluster fixtures' setup: brings up STATE with N nodes and keeps `up`'s reason for a skip
# in STATE/log/up.err, where each test's cluster_require finds it.
#   up.sh STATE N [cluster.sh up options]
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
state=$1
mkdir -p "$state/log"
"$here/cluster.sh" up "$@" 2> >(tee "$state/log/up.err" >&2)
