#!/usr/bin/env bash
# An emulated multi-node cluster on one machine: N nodes, each a network namespace plus its own
# UTS namespace (hostname nodeK), joined by veth pairs to a bridge in a "head" namespace of its
# own; links shaped by tbf (rate) and by our NFQUEUE delay line (latency). docs/cluster.md.
#   cluster.sh up STATE N [--slots S] [--rate RATE] [--delay US]
#   cluster.sh exec STATE K CMD...        (K = 0: the head namespace, where the bridge lives)
#   cluster.sh link STATE [--rate RATE|off] [--delay US]
#   cluster.sh down STATE
# Exit 77 (CTest's skip) when not root or when namespaces or tools are missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SKIP=77
# The address plan: one /24 that exists only inside the cluster's namespaces (each cluster has
# its own head namespace, so two clusters may use the same addresses without meeting).
SUBNET_PREFIX=10.250.0
SUBNET=$SUBNET_PREFIX.0/24
HEAD_ADDR=$SUBNET_PREFIX.254
IFACE=eth0 # each node's end of its veth pair, inside the node's namespace

die() { echo "cluster: $*" >&2; exit 1; }
skip() { echo "cluster: SKIP: $*" >&2; exit $SKIP; }
usage() {
    sed -n '5,8p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2
    exit 2
}

# Namespace names carry a hash of the state folder's path, so clusters brought up by parallel
# CTest runs (or by hand beside them) never collide.
state_open() {
    state=$1
    [ -d "$state" ] || die "no cluster state at $state (run: cluster.sh up $state N)"
    state=$(cd "$state" && pwd)
    if [ -s "$state/id" ]; then
        id=$(cat "$state/id")
    else
        id=$(printf '%s' "$state" | sha1sum | cut -c1-8)
    fi
    head_ns=tpc-$id-head
}
node_ns() { echo "tpc-$id-n$1"; }
holder_pid() { # K -> pid of the process that holds node K's (0: the head's) namespaces
    local name=node$1
    [ "$1" = 0 ] && name="head"
    awk -v n="$name" '$1 == n { print $3 }' "$state/nodes" "$state/head" 2>/dev/null | head -n1
}
record_pid() { echo "$1 $2" >>"$state/pids"; } # pid role

# Starts a long-lived process in the background, in a session of its own, holding no
# descriptor it inherited but stdin/out/err (sent to LOG): CTest waits for every holder of its
# output pipes, so a daemon keeping one would hold the fixture's `up` test open to its timeout.
detach() { # log command...
    local log=$1
    shift
    (
        for fd in /proc/$BASHPID/fd/*; do
            fd=${fd##*/}
            [ "$fd" -le 2 ] || eval "exec $fd>&-" 2>/dev/null || true
        done
        exec setsid "$@" </dev/null >>"$log" 2>&1
    ) &
}

# A process whose namespaces are the holder's: the holder is `sleep infinity` inside a fresh
# UTS namespace entered from the named network namespace; nsenter and unshare exec, so $! is it.
start_holder() { # netns hostname -> prints pid
    local ns=$1 name=$2 pid
    detach /dev/null nsenter --net="/run/netns/$ns" -- unshare --uts -- /bin/sh -c \
        "echo $name >/proc/sys/kernel/hostname && exec sleep infinity"
    pid=$!
    for _ in $(seq 1 100); do
        if [ "$(nsenter -t "$pid" --uts cat /proc/sys/kernel/hostname 2>/dev/null)" = "$name" ] &&
            [ "$(readlink "/proc/$pid/ns/uts")" != "$(readlink /proc/self/ns/uts)" ]; then
            echo "$pid"
            return 0
        fi
        sleep 0.05
    done
    return 1
}

in_ns() { ip netns exec "$1" "${@:2}"; } # network-only commands (ip, tc, iptables)

# Rate strings as tc spells them (100gbit, 25Gbit, 500mbit, 1000kbit, 64000bit) -> bits/s.
rate_bits() {
    local r=${1,,} n unit
    n=${r%%[a-z]*}
    unit=${r#"$n"}
    [[ $n =~ ^[0-9]+$ ]] || die "bad rate '$1' (e.g. 100gbit, 25gbit, 1gbit, 500mbit, off)"
    case $unit in
    gbit) echo $((n * 1000000000)) ;;
    mbit) echo $((n * 1000000)) ;;
    kbit) echo $((n * 1000)) ;;
    bit | "") echo "$n" ;;
    *) die "bad rate unit in '$1' (gbit, mbit, kbit or bit)" ;;
    esac
}

delayline_bin() {
    if [ -n "${TRIPAR_DELAYLINE:-}" ]; then
        [ -x "$TRIPAR_DELAYLINE" ] ||
            skip "--delay needs the delay line; TRIPAR_DELAYLINE=$TRIPAR_DELAYLINE is not built (libnetfilter-queue-dev missing?)"
        echo "$TRIPAR_DELAYLINE"
        return
    fi
    # By hand, without a build tree: compile it once into the state folder.
    if [ ! -x "$state/delayline" ]; then
        local flags
        flags=$(pkg-config --cflags --libs libnetfilter_queue 2>/dev/null) ||
            skip "--delay needs libnetfilter-queue-dev (apt-get install libnetfilter-queue-dev)"
        # shellcheck disable=SC2086
        cc -O2 -Wall -Wextra -Werror -o "$state/delayline" "$here/delayline.c" $flags ||
            die "could not build $here/delayline.c"
    fi
    echo "$state/delayline"
}

# Ends the delay line of node K (if any) and removes its queue rule, then starts a new one when
# the delay is non-zero. The rule is added after the delay line has bound the queue; with
# --queue-bypass a packet passes unqueued whenever no program listens.
shape_delay() { # K delay_us
    local k=$1 us=$2 ns pidfile pid
    ns=$(node_ns "$k")
    pidfile=$state/delayline.$k.pid
    in_ns "$ns" iptables -t mangle -F POSTROUTING
    if [ -s "$pidfile" ]; then
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        rm -f "$pidfile"
        # Forget it, so that `down` never signals a later process that reuses the number.
        awk -v p="$pid" '$1 != p' "$state/pids" >"$state/pids.new" && mv "$state/pids.new" "$state/pids"
    fi
    [ "$us" -gt 0 ] || return 0
    local bin ready=$state/delayline.$k.ready
    bin=$(delayline_bin)
    rm -f "$ready"
    detach "$state/log/delayline.$k.log" \
        nsenter --net="/run/netns/$ns" -- "$bin" --queue 0 --delay-us "$us" --ready "$ready"
    pid=$!
    echo "$pid" >"$pidfile"
    record_pid "$pid" "delayline.node$k"
    for _ in $(seq 1 100); do [ -e "$ready" ] && break; sleep 0.05; done
    [ -e "$ready" ] || die "delay line of node$k did not start: $(tail -n 5 "$state/log/delayline.$k.log")"
    in_ns "$ns" iptables -t mangle -A POSTROUTING -o "$IFACE" -j NFQUEUE --queue-num 0 --queue-bypass
}

# tbf on each node's egress. Its burst is 200 us of traffic (at least 64 KiB, so that one GSO
# super-packet passes whole) and its queue holds 100 ms, so TCP sees a rate, not losses.
shape_rate() { # K rate
    local k=$1 rate=$2 ns bits burst
    ns=$(node_ns "$k")
    in_ns "$ns" tc qdisc del dev "$IFACE" root 2>/dev/null || true
    [ "$rate" != off ] || return 0
    bits=$(rate_bits "$rate")
    burst=$((bits / 8 / 5000))
    [ "$burst" -ge 65536 ] || burst=65536
    in_ns "$ns" tc qdisc add dev "$IFACE" root tbf rate "$bits"bit burst "$burst" latency 100ms
}

cmd_link() {
    state_open "$1"
    shift
    local rate delay
    read -r rate delay <"$state/link"
    while [ $# -gt 0 ]; do
        case $1 in
        --rate) rate=${2:?--rate needs a value}; shift 2 ;;
        --delay) delay=${2:?--delay needs microseconds}; shift 2 ;;
        *) usage ;;
        esac
    done
    [[ $delay =~ ^[0-9]+$ ]] || die "--delay takes whole microseconds, not '$delay'"
    [ "$rate" = off ] || rate_bits "$rate" >/dev/null
    local n k
    n=$(wc -l <"$state/nodes")
    for k in $(seq 1 "$n"); do
        shape_rate "$k" "$rate"
        shape_delay "$k" "$delay"
    done
    echo "$rate $delay" >"$state/link"
}

# The mpirun wrapper and its rsh agent, written per cluster so they need no environment.
write_launchers() {
    cat >"$state/rsh" <<EOF
#!/bin/bash
# Open MPI's rsh agent for this cluster: "rsh [options] HOST COMMAND..." runs COMMAND, as ssh
# would (one string for the remote shell), inside HOST's network and UTS namespaces.
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\${1:?rsh: no host}; shift
pid=\$(awk -v h="\$host" '\$1 == h { print \$3 }' "$state/nodes")
[ -n "\$pid" ] || { echo "rsh: \$host is not a node of $state" >&2; exit 255; }
exec nsenter -t "\$pid" --net --uts -- /bin/sh -c "\$*"
EOF
    cat >"$state/mpirun" <<EOF
#!/bin/bash
# mpirun across the emulated nodes of $state: started inside node1 (the host's own namespace
# has no route to $SUBNET), other nodes reached through the rsh agent. Ordinary mpirun
# arguments follow; ranks fill node1's slots first unless the caller maps them itself.
state=$state
args=(--hostfile "\$state/hostfile" --mca plm_rsh_agent "\$state/rsh" --mca plm_rsh_no_tree_spawn 1
      --mca btl tcp,self,vader --mca btl_tcp_if_include $SUBNET --mca oob_tcp_if_include $SUBNET)
map=1 bind=1 btl=1
for a in "\$@"; do
    case \$a in
    --map-by|-map-by|--bynode|-bynode|--byslot|-byslot|--npernode|-npernode|--pernode|-pernode|--rankfile|-rf) map=0 ;;
    --bind-to|-bind-to) bind=0 ;;
    btl) btl=0 ;;
    esac
done
[ \$btl = 1 ] || args=(--hostfile "\$state/hostfile" --mca plm_rsh_agent "\$state/rsh" --mca plm_rsh_no_tree_spawn 1
      --mca btl_tcp_if_include $SUBNET --mca oob_tcp_if_include $SUBNET)
[ \$map = 0 ] || args+=(--map-by slot)
# Every node shares the machine's cores: binding would pin node1's and node2's rank 0 together.
[ \$bind = 0 ] || args+=(--bind-to none)
for v in OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_mpi_yield_when_idle \\
         OPENBLAS_NUM_THREADS PATH LD_LIBRARY_PATH ASAN_OPTIONS UBSAN_OPTIONS \$(compgen -e | grep '^TRIPAR_'); do
    [ -z "\${!v+x}" ] || args+=(-x "\$v")
done
pid=\$(awk '\$1 == "node1" { print \$3 }' "\$state/nodes")
exec nsenter -t "\$pid" --net --uts -- mpirun "\${args[@]}" "\$@"
EOF
    chmod +x "$state/rsh" "$state/mpirun"
}

# A failed `up` (a die, a failing command under set -e) leaves nothing behind.
up_exit() {
    if [ "$up_done" != 1 ]; then
        [ "$1" = $SKIP ] || echo "cluster: up failed; tearing down what was built" >&2
        "${BASH_SOURCE[0]}" down "$state" >/dev/null 2>&1 || true
    fi
}

cmd_up() {
    local n slots=2 rate=off delay=0
    [ $# -ge 2 ] || usage
    local dir=$1
    n=$2
    shift 2
    while [ $# -gt 0 ]; do
        case $1 in
        --slots) slots=${2:?--slots needs a number}; shift 2 ;;
        --rate) rate=${2:?--rate needs a value}; shift 2 ;;
        --delay) delay=${2:?--delay needs microseconds}; shift 2 ;;
        *) usage ;;
        esac
    done
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] && [ "$n" -le 8 ] || die "N must be 2 to 8, not '$n'"
    [[ $slots =~ ^[0-9]+$ ]] && [ "$slots" -ge 1 ] || die "--slots must be a positive number"
    [ "$(id -u)" = 0 ] || skip "the emulated cluster needs root (network namespaces)"
    local tool
    for tool in ip nsenter unshare setsid tc iptables ping mpirun sha1sum; do
        command -v "$tool" >/dev/null || skip "$tool not found (tools/setup.sh installs it)"
    done
    # A stale cluster from an interrupted run holds namespaces of the same names: end it first.
    if [ -e "$dir/id" ]; then "${BASH_SOURCE[0]}" down "$dir" || true; fi
    mkdir -p "$dir/log"
    state_open "$dir"
    echo "$id" >"$state/id"
    : >"$state/pids"
    : >"$state/nodes"
    : >"$state/head"
    echo "off 0" >"$state/link"
    up_done=0
    trap 'up_exit $?' EXIT
    # Probe first: a container without CAP_SYS_ADMIN or netns support is a skip, not a failure.
    if ! ip netns add "$head_ns" 2>"$state/log/probe.err"; then
        skip "cannot create network namespaces: $(cat "$state/log/probe.err" 2>/dev/null)"
    fi
    in_ns "$head_ns" ip link set lo up
    in_ns "$head_ns" ip link add br0 type bridge
    in_ns "$head_ns" ip addr add "$HEAD_ADDR/24" dev br0
    in_ns "$head_ns" ip link set br0 up
    local pid
    pid=$(start_holder "$head_ns" head) || die "the head namespace's holder did not start"
    record_pid "$pid" holder.head
    echo "head $HEAD_ADDR $pid $head_ns" >"$state/head"
    local k ns addr
    for k in $(seq 1 "$n"); do
        ns=$(node_ns "$k")
        addr=$SUBNET_PREFIX.$k
        ip netns add "$ns"
        # Both ends are made inside our namespaces; the host's namespace never sees them.
        in_ns "$head_ns" ip link add "v$k" type veth peer name "$IFACE" netns "$ns"
        in_ns "$head_ns" ip link set "v$k" master br0 up
        in_ns "$ns" ip link set lo up
        in_ns "$ns" ip addr add "$addr/24" dev "$IFACE"
        in_ns "$ns" ip link set "$IFACE" up
        pid=$(start_holder "$ns" "node$k") || die "node$k's holder did not start"
        record_pid "$pid" "holder.node$k"
        echo "node$k $addr $pid $ns" >>"$state/nodes"
    done
    : >"$state/hostfile"
    for k in $(seq 1 "$n"); do echo "node$k slots=$slots" >>"$state/hostfile"; done
    write_launchers
    cat >"$state/env.sh" <<EOF
# Source this to use the emulated cluster at $state.
export CLUSTER_STATE=$state
export CLUSTER_NODES=$n
export CLUSTER_SLOTS=$slots
export CLUSTER_SUBNET=$SUBNET
export CLUSTER_IFACE=$IFACE
export CLUSTER_HEAD_ADDR=$HEAD_ADDR
export CLUSTER_HEAD_NETNS=$head_ns
export CLUSTER_HEAD_PID=$(awk '{ print $3 }' "$state/head")
export CLUSTER_HOSTFILE=$state/hostfile
export CLUSTER_MPIRUN=$state/mpirun
export CLUSTER_SH=$here/cluster.sh
EOF
    # Every node must reach every other before anyone launches across them.
    # (ping -w: keep trying for up to 5 s while the veth ends come up.)
    for k in $(seq 2 "$n"); do
        in_ns "$(node_ns 1)" ping -c 1 -w 5 -i 0.2 "$SUBNET_PREFIX.$k" >/dev/null 2>&1 ||
            die "node1 cannot reach node$k at $SUBNET_PREFIX.$k"
    done
    if [ "$rate" != off ] || [ "$delay" != 0 ]; then cmd_link "$state" --rate "$rate" --delay "$delay"; fi
    up_done=1
    echo "cluster: $n nodes up at $state (node1..node$n on $SUBNET, head $HEAD_ADDR; link rate $rate, delay ${delay} us)"
}

cmd_exec() {
    [ $# -ge 3 ] || usage
    state_open "$1"
    local k=$2 pid
    shift 2
    pid=$(holder_pid "$k")
    [ -n "$pid" ] || die "no node $k in $state"
    exec nsenter -t "$pid" --net --uts -- "$@"
}

# Ends what `up` started: the PIDs it recorded, then any process still inside the cluster's own
# network namespaces (a rank or daemon started through exec or mpirun: nothing else can be
# there), then the namespaces themselves. Safe to repeat and after a half-done `up`. Every
# process `up` and `link` start lives in one of those namespaces, so a recorded PID is signalled
# only while it is still there: a number the kernel has since given to another process is not.
cmd_down() {
    [ -d "$1" ] || return 0
    state_open "$1"
    local ns inode inodes="" list
    list=$(ip netns list 2>/dev/null | awk -v p="tpc-$id-" 'index($1, p) == 1 { print $1 }')
    for ns in $list; do
        inode=$(stat -L -c %i "/run/netns/$ns" 2>/dev/null) && inodes="$inodes net:[$inode]"
    done
    local pids="" pid p link
    for p in /proc/[0-9]*; do
        link=$(readlink "$p/ns/net" 2>/dev/null) || continue
        case " $inodes " in *" $link "*) pids="$pids ${p#/proc/}" ;; esac
    done
    for pid in $pids; do
        if ! awk -v p="$pid" '$1 == p { found = 1 } END { exit !found }' "$state/pids" 2>/dev/null; then
            echo "cluster: down: ending $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80)) left in the cluster" >&2
        fi
    done
    for pid in $pids; do kill "$pid" 2>/dev/null || true; done
    local alive
    for _ in $(seq 1 40); do
        alive=""
        for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive="$alive $pid"; done
        [ -n "$alive" ] || break
        sleep 0.05
    done
    for pid in $alive; do kill -9 "$pid" 2>/dev/null || true; done
    for ns in $list; do ip netns del "$ns" 2>/dev/null || true; done
    rm -f "$state/pids" "$state/id" "$state"/delayline.*.pid "$state"/delayline.*.ready
    echo "cluster: down ($state)"
}

case ${1:-} in
up) shift; cmd_up "$@" ;;
exec) shift; cmd_exec "$@" ;;
link) shift; [ $# -ge 1 ] || usage; cmd_link "$@" ;;
down) shift; [ $# -eq 1 ] || usage; cmd_down "$1" ;;
*) usage ;;
esac
