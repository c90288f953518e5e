#!/usr/bin/env bash
# The delay line adds what it is asked for: an 8-byte MPI ping-pong between node1 and node2 is,
# one way, DELAY microseconds slower with --delay DELAY than without, to within 0.7x..2x of the
# delay plus the measured floor (the cost of one pass through NFQUEUE and the delay line, taken
# with --delay 1). Restores the link it found.
#   check_delay.sh STATE PINGPONG [DELAY_US]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
state=$1 pingpong=$2 delay=${3:-1000}
cluster_require "$state"
read -r rate0 delay0 <"$state/link"
trap '"$CLUSTER_SH" link "$state" --rate "$rate0" --delay "$delay0"' EXIT

oneway() { # delay_us -> median one-way microseconds between node1 and node2
    "$CLUSTER_SH" link "$state" --rate off --delay "$1"
    run_limited 120 "$CLUSTER_MPIRUN" -n 2 --map-by node "$pingpong" 100 >"$state/log/check_delay.$1" 2>&1 ||
        { cat "$state/log/check_delay.$1" >&2; echo "FAIL: pingpong with --delay $1" >&2; exit 1; }
    awk '$1 == "oneway" && $2 == "inter" { print $3 }' "$state/log/check_delay.$1"
}
base=$(oneway 0)
one=$(oneway 1)
slow=$(oneway "$delay")
/usr/bin/python3 - "$base" "$one" "$slow" "$delay" <<'PY'
import sys
base, one, slow, delay = map(float, sys.argv[1:])
floor = one - 1 - base
added = slow - base
print(f"one way: {base:.1f} us unshaped, {one:.1f} us with --delay 1 (floor {floor:+.1f} us), "
      f"{slow:.1f} us with --delay {delay:.0f} (adds {added:.1f} us, "
      f"{added - delay:+.1f} us over the delay)")
low, high = 0.7 * delay, 2 * delay + max(floor, 0)
if not low <= added <= high:
    sys.exit(f"FAIL: --delay {delay:.0f} added {added:.1f} us, outside {low:.0f}..{high:.0f} us")
print(f"ok: within {low:.0f}..{high:.0f} us")
PY
