#!/usr/bin/env bash
# The memory check (docs/jobs.md, "Memory check") on a cgroup-limited run: the test makes a
# memory cgroup with a 256 MiB limit (1 GiB for fits, below), moves `mpirun -n 2 tripar run` into it (a shell writes
# its own pid to cgroup.procs, then execs mpirun, so mpirun and both ranks are inside), and
#   refuse: a synthetic model whose plan needs about 1.5 GiB a node: exit 2 within 60 s, one
#           message naming rank, host, need and have and the cgroup, and no OOM kill;
#   fits:   a tiny model runs normally (exit 0 within 120 s, the run file written);
#   oom:    the same large model with backend.memory_check: false: the kernel's OOM killer
#           kills a rank, and mpirun ends the job (exit non-zero within 60 s, an OOM kill
#           counted): a rank killed for memory ends the job like any killed rank.
# cgroup v2 (a child of the v2 root with the memory controller in its cgroup.subtree_control),
# else v1 (a child of this process's memory cgroup); the cgroup is removed afterwards.
# usage: memory_cgroup.sh CASE WORKDIR   (env: TRIPAR_BIN, MPIEXEC)
# Exit 77 (a ctest skip) with the reason printed when no memory cgroup can be made here.
set -uo pipefail
: "${TRIPAR_BIN:?}"
case_name=$1 work=$2/$1
MPIEXEC=${MPIEXEC:-mpiexec}
# 256 MiB, but 1 GiB where a tiny model must fit: every library the run maps is charged to the
# cgroup as page cache when first read, about 210 MiB in a CUDA build (cuBLAS, NCCL), which the
# check counts as in use (only inactive_file counts as reclaimable)
LIMIT=$((256 << 20))
[ "$case_name" = fits ] && LIMIT=$((1024 << 20))
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

skip() {
    echo "skipped: $*"
    exit 77
}
fail() {
    echo "FAIL ($case_name): $*" >&2
    [ -f log ] && { echo "---- output ----" >&2; cat log >&2; }
    exit 1
}

# Where the cgroup goes, and its files by version.
v2_mount=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
v1_mount=$(awk '$9 == "cgroup" && $NF ~ /(^|,)memory(,|$)/ {print $5; exit}' /proc/self/mountinfo)
if [ -n "$v2_mount" ] && grep -qw memory "$v2_mount/cgroup.subtree_control" 2>/dev/null; then
    parent=$v2_mount limit_file=memory.max
    oom_count() { awk '$1 == "oom_kill" {print $2}' "$cg/memory.events"; }
elif [ -n "$v1_mount" ]; then
    own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3; exit}' /proc/self/cgroup)
    parent=$v1_mount$own limit_file=memory.limit_in_bytes
    [ -d "$parent" ] || parent=$v1_mount # a cgroup namespace shows its own root as "/"
    oom_count() { awk '$1 == "oom_kill" {print $2}' "$cg/memory.oom_control"; }
else
    skip "no cgroup v2 with the memory controller enabled in its root's cgroup.subtree_control, and no cgroup v1 memory hierarchy mounted"
fi
[ -w "$parent" ] || skip "$parent is not writable (not root, or a read-only cgroup mount)"
cg=$parent/tripar-memtest-$case_name-$$
mkdir "$cg" 2>/dev/null || skip "cannot make a cgroup under $parent"
cleanup() {
    # only this test's processes are in the cgroup: a rank left over after a bound is ended
    if [ -f "$cg/cgroup.procs" ]; then
        while read -r pid; do kill -KILL "$pid" 2>/dev/null; done <"$cg/cgroup.procs"
        for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$cg/cgroup.procs" ] || break; sleep 0.5; done
    fi
    rmdir "$cg" 2>/dev/null || echo "warning: could not remove $cg" >&2
}
trap cleanup EXIT
echo "$LIMIT" >"$cg/$limit_file" 2>/dev/null || skip "cannot set $cg/$limit_file"
[ -z "$(oom_count)" ] && fail "no oom_kill count in $cg"
echo "cgroup $cg, $limit_file = $LIMIT"

# The large model: embd 2048, 4 layers, vocab 32000 at tp=2: about 510 MiB of weights and a
# 128 MiB loading buffer per rank, 1.5 GiB for the node with the headroom. The tiny one: 1 MiB.
# job FILE HEADS EMBD VOCAB
job() {
    printf '%s\n' "model: {synthetic: {layers: 4, heads: $2, embd: $3, vocab: $4, ctx: 64, seed: 1}}" \
        "backend: {kind: cpu, threads: 1}" "parallel: {tp: 2}" \
        "input: {synthetic: {batch: 1, length: 8, seed: 3}}" "generate: {new_tokens: 2}" \
        "record: {out: run.h5, timings: off}" >"$1"
}
job large.yaml 8 2048 32000
job tiny.yaml 2 32 64

# in_cgroup BOUND ARGS...: mpirun -n 2 tripar run ARGS inside the cgroup, killed after BOUND s.
in_cgroup() {
    local bound=$1
    shift
    timeout -s KILL "$bound" sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
        "$MPIEXEC" -n 2 "$TRIPAR_BIN" run "$@" >log 2>&1
}

case $case_name in
refuse)
    in_cgroup 60 large.yaml
    rc=$?
    [ $rc -eq 137 ] && fail "still running after 60 s (a rank hung)"
    [ $rc -eq 2 ] || fail "exit code $rc, expected 2"
    grep -Eq "\[rank 0 host [^]]+\] the run's memory plan does not fit: the 2 ranks of this node need [0-9.]+ MiB together, and host .* has [0-9.]+ MiB under its cgroup v[12] limit \(.*tripar-memtest-" log ||
        fail "no message naming rank, host, need, have and the cgroup"
    grep -Eq "^  rank 1: [0-9.]+ MiB = weights [0-9.]+" log || fail "rank 1 is not named"
    grep -q "model.precision: int8w" log || fail "no advice"
    [ "$(grep -c "does not fit" log)" -eq 1 ] || fail "the message is not printed once"
    [ "$(oom_count)" -eq 0 ] || fail "the OOM killer ran: $(oom_count) kills"
    ;;
fits)
    in_cgroup 120 tiny.yaml
    rc=$?
    [ $rc -eq 0 ] || fail "exit code $rc, expected 0"
    [ -s run.h5 ] || fail "no run file"
    [ "$(oom_count)" -eq 0 ] || fail "the OOM killer ran"
    ;;
oom)
    in_cgroup 60 large.yaml --set backend.memory_check=false
    rc=$?
    [ $rc -eq 137 ] && [ "$(oom_count)" -eq 0 ] && fail "still running after 60 s"
    [ $rc -ne 0 ] || fail "exit code 0: the large model fitted in $LIMIT bytes?"
    [ "$(oom_count)" -ge 1 ] || fail "no OOM kill counted (exit $rc)"
    # mpirun's own words for a rank ended by SIGKILL
    grep -Eq "signal 9|Killed" log || fail "mpirun did not report the killed rank (exit $rc)"
    ;;
*)
    fail "unknown case"
    ;;
esac
echo "ok ($case_name)"
