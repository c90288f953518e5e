#!/usr/bin/env bash
# By hand (not a test): what the shaped links really give, for docs/cluster.md. For each
# requested delay, the median one-way time of an 8-byte MPI ping-pong between node1 and node2
# (3 runs of 200 round trips) and what the delay added; for each rate, one stream's MB/s.
#   measure_link.sh STATE PINGPONG   (on a cluster that is up; restores an unshaped link)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
state=$1 pingpong=$2
cluster_require "$state"
[ -x "$pingpong" ] || { echo "measure_link: $pingpong is not an executable"; exit 2; }
trap '"$CLUSTER_SH" link "$state" --rate off --delay 0' EXIT
measure() { # rate delay_us -> "oneway_us MBps"
    "$CLUSTER_SH" link "$state" --rate "$1" --delay "$2"
    run_limited 300 "$CLUSTER_MPIRUN" -n 2 --map-by node "$pingpong" 200 "${3:-0}" |
        awk '$1 == "oneway" && $2 == "inter" { o = $3 } $1 == "bandwidth" { b = $3 } END { print o, b }'
}
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
base=$(median "$(measure off 0 | cut -d' ' -f1)" "$(measure off 0 | cut -d' ' -f1)" "$(measure off 0 | cut -d' ' -f1)")
echo "unshaped one way: $base us"
printf '%10s %12s %10s %14s\n' "delay_us" "oneway_us" "added_us" "added-delay_us"
for d in 1 2 5 10 50 100 1000 2000; do
    o=$(median "$(measure off "$d" | cut -d' ' -f1)" "$(measure off "$d" | cut -d' ' -f1)" "$(measure off "$d" | cut -d' ' -f1)")
    awk -v d="$d" -v o="$o" -v b="$base" 'BEGIN { printf "%10d %12.1f %10.1f %14.1f\n", d, o, o - b, o - b - d }'
done
printf '%10s %10s %12s\n' "rate" "delay_us" "stream_MB/s"
for cfg in "off 0" "100mbit 0" "1gbit 0" "10gbit 0" "25gbit 0" "off 50" "10gbit 50" "1gbit 1000"; do
    set -- $cfg
    printf '%10s %10s %12s\n' "$1" "$2" "$(measure "$1" "$2" 16000000 | cut -d' ' -f2)"
done
