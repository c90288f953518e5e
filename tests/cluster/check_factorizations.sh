#!/usr/bin/env bash
# The invariant across emulated nodes: every dp x tp x pp factorization of the cluster's ranks
# (placed by slot, node by node) computes what one rank on one node computes (tests/parallel/
# check_factorizations.sh: identical tokens, activations within 1e-5), and /mesh names each
# rank's node (check_mesh.py).
#   check_factorizations.sh STATE WORKDIR JOB [-- EXTRA --set OPTIONS]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
state=$1 work=$2 job=$3
shift 3
cluster_require "$state"
rm -rf "$work"
world=$((CLUSTER_NODES * CLUSTER_SLOTS))
MPIEXEC=$CLUSTER_MPIRUN "$here/../parallel/check_factorizations.sh" "$work" "$job" "$world" "$@"
/usr/bin/python3 "$here/check_mesh.py" "$work" "$CLUSTER_SLOTS"
