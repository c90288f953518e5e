#!/usr/bin/env bash
# The invariant across emulated nodes: every dp x tp x pp factorization of the cluster's ranks
# (placed by slot, node by node) computes what one rank on one node computes (tests/parallel/
# check_factorizations.sh: identical tokens, activations within 1e-5), and /mesh names each
# rank's node (check_mesh.py). By default the world is every slot of the cluster; --sizes
# gives world sizes of its own (each placed by slot from node1 on, so 3 ranks on nodes of 2 are
# 2 + 1: uneven nodes included).
#   check_factorizations.sh STATE WORKDIR JOB [--sizes "2 3 ..."] [-- EXTRA --set OPTIONS]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
state=$1 work=$2 job=$3
shift 3
cluster_require "$state"
rm -rf "$work"
sizes=$((CLUSTER_NODES * CLUSTER_SLOTS))
if [ "${1:-}" = --sizes ]; then
    sizes=${2:?--sizes needs a list of world sizes}
    shift 2
fi
# shellcheck disable=SC2086 # sizes is a list of numbers
MPIEXEC=$CLUSTER_MPIRUN "$here/../parallel/check_factorizations.sh" "$work" "$job" $sizes "$@"
/usr/bin/python3 "$here/check_mesh.py" "$work" "$CLUSTER_SLOTS"
