#!/bin/bash
# Starts a private single-node Slurm cluster (munged, slurmctld, slurmd, all as root) under STATE_DIR.
# Usage: start_cluster.sh STATE_DIR   then: source STATE_DIR/env.sh; ...; stop_cluster.sh STATE_DIR
# Exit 77 when the Slurm or munge binaries are missing (CTest skip), 1 when the cluster won't come up.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
state=${1:?usage: start_cluster.sh STATE_DIR}

for bin in munged slurmctld slurmd srun sbatch squeue scontrol sinfo; do
  if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ]; then
    echo "start_cluster: $bin not found; skipping" >&2
    exit 77
  fi
done
PATH=$PATH:/usr/sbin

# A stale cluster from an interrupted run would hold the ports and pid files: stop it first.
if [ -d "$state" ]; then
  "$here/stop_cluster.sh" "$state" || true
  rm -rf "$state"
fi
mkdir -p "$state"/{ctld,spool,log,munge,tmp}
state=$(cd "$state" && pwd)
chmod 755 "$state/munge"

# Unix socket paths are limited to 108 bytes; fall back to /tmp for deep build trees.
munge_dir=$state/munge
if [ ${#munge_dir} -gt 80 ]; then
  munge_dir=$(mktemp -d /tmp/tripar-munge.XXXXXX)
  echo "$munge_dir" >"$state/munge_tmpdir"
fi
munge_socket=$munge_dir/munge.socket.2

# Free TCP ports picked now so parallel clusters (or a system Slurm) never collide.
read -r ctld_port slurmd_port < <(/usr/bin/python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
PY
)

host=$(hostname -s)
mpi_default=none
if [ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so ] ||
   ls /usr/lib*/slurm*/mpi_pmix.so >/dev/null 2>&1; then
  mpi_default=pmix
fi

sed -e "s|@HOST@|$host|g" -e "s|@STATE@|$state|g" -e "s|@CTLD_PORT@|$ctld_port|g" \
    -e "s|@SLURMD_PORT@|$slurmd_port|g" -e "s|@MUNGE_SOCKET@|$munge_socket|g" \
    -e "s|@MPI_DEFAULT@|$mpi_default|g" "$here/slurm.conf.in" >"$state/slurm.conf"
cp "$here/cgroup.conf" "$state/cgroup.conf"
: >"$state/plugstack.conf"

# munge with its own key: the host's /etc/munge key and daemon are left alone.
dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$state/munge/munge.key"
munged --force --socket="$munge_socket" --key-file="$state/munge/munge.key" \
  --pid-file="$state/munged.pid" --log-file="$state/log/munged.log" \
  --seed-file="$state/munge/munged.seed" >"$state/log/munged.out" 2>&1 || {
  echo "start_cluster: munged failed:" >&2
  cat "$state/log/munged.out" "$state/log/munged.log" >&2 2>/dev/null || true
  exit 1
}

cat >"$state/env.sh" <<ENV
# Source this to talk to the test cluster.
export SLURM_CONF=$state/slurm.conf
export PATH=\$PATH:/usr/sbin
ENV
export SLURM_CONF=$state/slurm.conf

# Both daemons fork into the background and write their pid files (-i: ignore stale state).
fail() {
  echo "start_cluster: $*; logs:" >&2
  tail -n 30 "$state/log/slurmctld.log" "$state/log/slurmd.log" "$state/log/"*.out >&2 || true
  "$here/stop_cluster.sh" "$state" || true
  exit 1
}
slurmctld -i -f "$state/slurm.conf" >"$state/log/slurmctld.out" 2>&1 || fail "slurmctld failed"
slurmd -f "$state/slurm.conf" >"$state/log/slurmd.out" 2>&1 || fail "slurmd failed"

# Bounded wait for the node to be idle, i.e. slurmctld is up and slurmd registered.
for _ in $(seq 1 60); do
  node_state=$(sinfo -h -N -o '%T' 2>/dev/null | head -n1 || true)
  if [ "$node_state" = idle ]; then
    echo "start_cluster: node $host idle (ctld port $ctld_port, slurmd port $slurmd_port, mpi $mpi_default)"
    exit 0
  fi
  sleep 1
done
fail "node never became idle (state '${node_state:-}')"
