#!/bin/bash
# A real multi-node Slurm on an emulated cluster that cluster.sh brought up: munged and slurmctld in
# the bridge's namespace, one slurmd per node namespace (NodeName from its hostname), each slurmd
# in a mount namespace of its own with a private TmpFS.
# Usage: slurm.sh up STATE [--cpus C]   (C CPUs advertised per node, default 4)
#        slurm.sh down STATE
#        slurm.sh node-up STATE K       restarts node K's slurmd (after a node-failure test)
#        STATE/slurm/login CMD...       runs CMD (srun, sbatch, squeue...) on the "login node",
#                                       the bridge's namespace, with SLURM_CONF set
# Exit 77 (a CTest skip) when not root or a tool is missing, 1 when Slurm does not come up.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PATH=$PATH:/usr/sbin:/sbin

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
action=$1
state=$2
shift 2
slurm_cpus=4
slurm_node=""
while [ $# -gt 0 ]; do
  case $1 in
    --cpus) slurm_cpus=${2:?--cpus takes a number}; shift 2 ;;
    [1-8]) slurm_node=$1; shift ;;
    *) usage ;;
  esac
done

# The reason for a skip or a failure of `up` is kept in STATE/slurm-up.err for the tests to show.
note() { [ ! -d "$state" ] || echo "$*" >>"$state/slurm-up.err"; echo "$*" >&2; }
skip() { note "SKIP: slurm.sh: $*"; exit 77; }
alive() { [[ "${1:-}" =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null; }

# The bridge's ("head") namespace: cluster.sh keeps a holder process in it, with a UTS namespace
# of its own named "head"; STATE/head reads "head ADDRESS HOLDER_PID NETNS".
head_field() { # field number
  awk -v f="$1" '$1 == "head" { print $f; exit }' "$state/head" 2>/dev/null || true
}
bridge_holder() {
  local pid
  pid=$(head_field 3)
  alive "$pid" || { echo "slurm.sh: no live head namespace holder in $state/head" >&2; return 1; }
  echo "$pid"
}

# Ends the daemons of the given pid files, all signalled at once (bounded: SIGTERM, 10 s, SIGKILL).
stop_pids() { # pidfile...
  local f pid pids=()
  for f in "$@"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    rm -f "$f"
    alive "$pid" && pids+=("$pid")
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 100); do
    local left=()
    for pid in "${pids[@]}"; do alive "$pid" && left+=("$pid"); done
    [ ${#left[@]} -gt 0 ] || return 0
    sleep 0.1
  done
  echo "slurm.sh: ${left[*]} ignored SIGTERM for 10 s; killing" >&2
  kill -KILL "${left[@]}" 2>/dev/null || true
}

# Job processes this Slurm started: every slurmstepd carrying our SLURM_CONF (inherited from our
# slurmd) and every process below one, plus any process whose own environment names our
# SLURM_CONF (tasks orphaned when their slurmstepd was killed). Listed before any is signalled.
job_leftovers() { # conf
  /usr/bin/python3 - "$1" <<'PY'
import os, sys
want = ("SLURM_CONF=" + sys.argv[1]).encode()
me = os.getpid()
parent, roots, marked = {}, set(), set()
for d in os.listdir("/proc"):
    if not d.isdigit() or int(d) in (me, os.getppid()):
        continue
    try:
        stat = open("/proc/%s/stat" % d).read()
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        parent[int(d)] = int(stat[stat.rindex(")") + 2:].split()[1])
        env = open("/proc/%s/environ" % d, "rb").read().split(b"\0")
    except (OSError, ValueError, IndexError):
        continue
    if want in env:
        (roots if comm == "slurmstepd" else marked).add(int(d))
def under_root(p):
    seen = set()
    while p > 1 and p not in seen:
        if p in roots:
            return True
        seen.add(p)
        p = parent.get(p, 0)
    return False
# A job task carries SLURM_JOB_ID; the shells of this script and of the tests do not.
job = set()
for p in marked:
    try:
        if b"SLURM_JOB_ID" in open("/proc/%d/environ" % p, "rb").read():
            job.add(p)
    except OSError:
        pass
print(" ".join(str(p) for p in parent if under_root(p) or p in job))
PY
}

slurm_down() {
  local dir=$state/slurm conf
  [ -d "$dir" ] || return 0
  conf=$dir/slurm.conf
  # Jobs first, while slurmctld and slurmd can still end their steps (KillWait bounds it).
  if [ -x "$dir/login" ] && [ -f "$dir/slurmctld.pid" ] && alive "$(cat "$dir/slurmctld.pid")"; then
    local jobs
    jobs=$(timeout 20 "$dir/login" squeue -h -o %A 2>/dev/null | tr '\n' ' ' || true)
    if [ -n "${jobs// /}" ]; then
      # shellcheck disable=SC2086
      timeout 20 "$dir/login" scancel $jobs 2>/dev/null || true
      for _ in $(seq 1 20); do
        [ -z "$(timeout 10 "$dir/login" squeue -h -o %A 2>/dev/null)" ] && break
        sleep 1
      done
    fi
  fi
  # The slurmds first, so that they log no lost-controller errors while going down.
  stop_pids "$dir"/slurmd-*.pid
  stop_pids "$dir/slurmctld.pid" "$dir/munged.pid"
  local pids
  pids=$(job_leftovers "$conf")
  if [ -n "$pids" ]; then
    echo "slurm.sh: ending leftover job processes: $pids" >&2
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    sleep 1
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
  fi
  if [ -f "$dir/munge_tmpdir" ]; then
    rm -rf "$(cat "$dir/munge_tmpdir")"
    rm -f "$dir/munge_tmpdir"
  fi
  rm -f "$dir/up"
}

# Runs a command that daemonizes itself, with stdin from /dev/null, stdout and stderr to LOG and
# no other descriptor it inherited: a daemon holding CTest's output pipe would keep the fixture's
# test open until its timeout.
daemon_start() { # log command...
  local log=$1
  shift
  (
    for fd in "/proc/$BASHPID/fd/"*; do
      fd=${fd##*/}
      [ "$fd" -le 2 ] || eval "exec $fd>&-" 2>/dev/null || true
    done
    exec "$@" </dev/null >>"$log" 2>&1
  )
}

# One slurmd in node NAME's network and UTS namespaces (so gethostname() gives its NodeName), in
# a new mount namespace where a private tmpfs covers TmpFS: the PMIx plugin's spmix_appdir_* stay
# per node. The job's /tmp and every other path stay shared with the machine.
start_slurmd() { # name holder_pid
  local dir=$state/slurm
  alive "$2" || { echo "slurm.sh: node $1's namespace holder ($2) is gone" >&2; return 1; }
  # shellcheck disable=SC2016 # $1 and $2 are the inner shell's
  SLURM_CONF=$dir/slurm.conf daemon_start "$dir/log/slurmd-$1.out" \
    nsenter -t "$2" -n -u unshare --mount --propagation private \
    sh -c 'mount -t tmpfs -o size=64m,mode=1777 tripar-slurm-tmp "$1" && exec slurmd -f "$2"' \
    slurmd-mount "$dir/tmp" "$dir/slurm.conf"
}

slurm_up() {
  rm -f "$state/slurm-up.err"
  [ "$(id -u)" = 0 ] || skip "needs root (namespaces, daemons as root)"
  local b
  for b in munged slurmctld slurmd srun sbatch squeue scontrol sinfo scancel nsenter unshare \
           mount ip; do
    command -v "$b" >/dev/null 2>&1 || skip "$b not found"
  done
  compgen -G '/usr/lib*/*/slurm*/mpi_pmix.so' >/dev/null || compgen -G '/usr/lib*/slurm*/mpi_pmix.so' \
    >/dev/null || skip "Slurm's mpi_pmix plugin is missing (slurm-wlm-basic-plugins)"
  # No cluster (its fixture skipped, e.g. without namespaces) is a skip too, with the cluster's reason.
  [ -s "$state/id" ] && [ -s "$state/nodes" ] ||
    skip "no emulated cluster at $state ($(tail -n 1 "$state/log/up.err" 2>/dev/null ||
      echo 'run cluster.sh up first'))"
  state=$(cd "$state" && pwd)
  local dir=$state/slurm br
  br=$(bridge_holder) || exit 1
  # A Slurm left from an interrupted run holds the pid files and the ports: end it first.
  slurm_down
  rm -rf "$dir"
  mkdir -p "$dir"/{ctld,spool,log,munge,tmp}
  chmod 755 "$dir" "$dir/munge"   # munged's socket dir must be searchable by every client

  # The controller's address and name: the head namespace's own on the bridge, and its hostname
  # (slurmctld refuses to start on a host not named in SlurmctldHost).
  local ctld_addr ctld_host
  ctld_addr=$(head_field 2)
  ctld_host=$(nsenter -t "$br" -u hostname)
  [ -n "$ctld_addr" ] || { echo "slurm.sh: $state/head names no address" >&2; exit 1; }

  local node_lines="" node_list="" name addr holder
  while read -r name addr holder _; do
    [ -n "$name" ] || continue
    node_lines+="NodeName=$name NodeAddr=$addr"$'\n'
    node_list+=${node_list:+,}$name
    mkdir -p "$dir/spool/$name"
  done <"$state/nodes"

  # Unix socket paths are limited to 108 bytes; deep build trees fall back to /tmp.
  local munge_dir=$dir/munge
  if [ ${#munge_dir} -gt 80 ]; then
    munge_dir=$(mktemp -d /tmp/tripar-munge.XXXXXX)
    chmod 755 "$munge_dir"
    echo "$munge_dir" >"$dir/munge_tmpdir"
  fi
  local munge_socket=$munge_dir/munge.socket.2

  sed -e "s|@STATE@|$dir|g" -e "s|@CTLD_ADDR@|$ctld_addr|g" -e "s|@CTLD_HOST@|$ctld_host|g" -e "s|@MUNGE_SOCKET@|$munge_socket|g" \
      -e "s|@CPUS@|$slurm_cpus|g" -e "s|@NODE_LIST@|$node_list|g" "$here/slurm.conf.in" |
    awk -v lines="${node_lines%$'\n'}" '$0 == "@NODE_LINES@" { print lines; next } { print }' \
      >"$dir/slurm.conf"
  cp "$here/../slurm/cgroup.conf" "$dir/cgroup.conf"
  : >"$dir/plugstack.conf"
  local conf=$dir/slurm.conf

  # The login node: the bridge's namespace (it reaches every node and the controller).
  cat >"$dir/login" <<SH
#!/bin/bash
# Runs a command on the emulated cluster's login node (the bridge's namespace) with its SLURM_CONF.
export SLURM_CONF=$conf PATH=\$PATH:/usr/sbin
exec nsenter -t $br -n -u "\$@"
SH
  chmod 755 "$dir/login"
  cat >"$dir/env.sh" <<SH
# Source this to talk to the emulated cluster's Slurm; run srun/sbatch through \$SLURM_LOGIN.
export SLURM_CONF=$conf
export SLURM_LOGIN=$dir/login
export PATH=\$PATH:/usr/sbin
SH

  fail() {
    note "slurm.sh: $*; logs:"
    tail -n 20 "$dir"/log/* >&2 2>/dev/null || true
    slurm_down
    exit 1
  }
  trap 'fail "interrupted"' TERM INT

  # munge with its own key; --origin so that it never looks up the machine's name.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  daemon_start "$dir/log/munged.out" nsenter -t "$br" -n -u munged --force \
    --socket="$munge_socket" --key-file="$dir/munge/munge.key" --pid-file="$dir/munged.pid" \
    --log-file="$dir/log/munged.log" --origin="$ctld_addr" --seed-file="$dir/munge/munged.seed" ||
    fail "munged failed"

  export SLURM_CONF=$conf
  daemon_start "$dir/log/slurmctld.out" nsenter -t "$br" -n -u slurmctld -i -f "$conf" ||
    fail "slurmctld failed"


  while read -r name addr holder _; do
    [ -n "$name" ] || continue
    start_slurmd "$name" "$holder" || fail "slurmd on $name failed"
  done <"$state/nodes"

  # Bounded wait: every node idle (slurmctld up and each slurmd registered).
  local n_nodes idle=0
  n_nodes=$(grep -c . "$state/nodes")
  local deadline=$((SECONDS + 60))
  while [ "$SECONDS" -lt "$deadline" ]; do
    idle=$(timeout 5 "$dir/login" sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 == "idle"' |
           sort -u | grep -c . || true)
    [ "$idle" = "$n_nodes" ] && break
    sleep 0.5
  done
  [ "$idle" = "$n_nodes" ] || fail "$idle of $n_nodes nodes idle after 60 s"
  trap - TERM INT
  date +%s >"$dir/up"
  echo "slurm.sh: $n_nodes nodes idle ($node_list), slurmctld at $ctld_addr; source $dir/env.sh"
}

# Starts node K's slurmd again (after a node-failure test killed it) and waits for it to register.
slurm_node_up() { # K
  local name=node$1 holder
  holder=$(awk -v n="$name" '$1 == n { print $3 }' "$state/nodes")
  [ -n "$holder" ] || { echo "slurm.sh: no $name in $state/nodes" >&2; exit 1; }
  stop_pids "$state/slurm/slurmd-$name.pid"
  start_slurmd "$name" "$holder" || exit 1
  local deadline=$((SECONDS + 60)) st=""
  while [ "$SECONDS" -lt "$deadline" ]; do
    st=$(timeout 5 "$state/slurm/login" sinfo -h -n "$name" -o '%T' 2>/dev/null || true)
    case $st in idle | mixed | allocated) echo "slurm.sh: $name $st"; return 0 ;; esac
    sleep 0.5
  done
  echo "slurm.sh: $name is '$st', not back, 60 s after its slurmd restarted" >&2
  exit 1
}

case $action in
  up) slurm_up ;;
  node-up)
    state=$(cd "$state" && pwd)
    slurm_node_up "${slurm_node:?node-up takes a node number}"
    ;;
  down)
    [ -d "$state" ] || exit 0
    state=$(cd "$state" && pwd)
    slurm_down
    ;;
  *) usage ;;
esac
