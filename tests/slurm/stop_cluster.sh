#!/bin/bash
# Stops the test cluster started by start_cluster.sh STATE_DIR: cancels its jobs, stops each daemon
# by its pid file, then ends job processes left over under this cluster's slurmstepd (found by
# SLURM_CONF=STATE_DIR/slurm.conf in its environment). Every wait is bounded.
set -uo pipefail
state=${1:?usage: stop_cluster.sh STATE_DIR}
[ -d "$state" ] || exit 0
state=$(cd "$state" && pwd)
conf=$state/slurm.conf
PATH=$PATH:/usr/sbin

alive() { [[ "${1:-}" =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null; }

stop_pid() { # name pidfile
  local pidfile=$2 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile" 2>/dev/null || true)
  rm -f "$pidfile"
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    alive "$pid" || return 0
    sleep 0.2
  done
  echo "stop_cluster: $1 ($pid) ignored SIGTERM; killing" >&2
  kill -KILL "$pid" 2>/dev/null || true
}

# Jobs first, while slurmctld and slurmd can still end their steps cleanly (slurmstepd outlives
# slurmd otherwise). KillWait in slurm.conf bounds how long that takes.
if [ -f "$state/slurmctld.pid" ] && alive "$(cat "$state/slurmctld.pid")"; then
  jobs=$(SLURM_CONF=$conf squeue -h -o %A 2>/dev/null | tr '\n' ' ')
  if [ -n "${jobs// /}" ]; then
    # shellcheck disable=SC2086
    SLURM_CONF=$conf scancel $jobs 2>/dev/null || true
    for _ in $(seq 1 40); do
      [ -z "$(SLURM_CONF=$conf squeue -h -o %A 2>/dev/null)" ] && break
      sleep 1
    done
  fi
fi

# slurmd first so that it does not log lost-controller errors while going down.
stop_pid slurmd "$state/slurmd.pid"
stop_pid slurmctld "$state/slurmctld.pid"
stop_pid munged "$state/munged.pid"

# Leftovers: this cluster's slurmstepd processes (SLURM_CONF=STATE/slurm.conf in their environment,
# inherited from slurmd) and everything below them (batch scripts, srun, job tasks). Listed before
# any is signalled, since orphans lose their parent link.
leftovers() {
  /usr/bin/python3 -c '
import os, sys
want = ("SLURM_CONF=" + sys.argv[1]).encode()
parent, roots = {}, set()
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    try:
        stat = open("/proc/%s/stat" % d).read()
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        parent[int(d)] = int(stat[stat.rindex(")") + 2:].split()[1])
        if comm == "slurmstepd" and want in open("/proc/%s/environ" % d, "rb").read().split(b"\0"):
            roots.add(int(d))
    except (OSError, ValueError, IndexError):
        pass
def under_root(p):
    seen = set()
    while p > 1 and p not in seen:
        if p in roots:
            return True
        seen.add(p)
        p = parent.get(p, 0)
    return False
print(" ".join(str(p) for p in parent if under_root(p)))
' "$conf"
}
pids=$(leftovers)
if [ -n "$pids" ]; then
  echo "stop_cluster: ending leftover job processes: $pids" >&2
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  sleep 2
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
fi

if [ -f "$state/munge_tmpdir" ]; then
  rm -rf "$(cat "$state/munge_tmpdir")"
  rm -f "$state/munge_tmpdir"
fi
exit 0
