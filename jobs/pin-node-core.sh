#!/bin/bash
# pin-node-core.sh COMMAND...: runs COMMAND on core K-1 of the machine when started on emulated
# node K (tests/cluster/cluster.sh: the hostname is nodeK in the node's namespace), so each
# emulated node has a core of its own (jobs/validate-plan-nodes.sh).
node=$(hostname)
[[ $node =~ ^node[0-9]+$ ]] || { echo "pin-node-core: hostname '$node' is not nodeK" >&2; exit 2; }
exec taskset -c $((${node#node} - 1)) "$@"
