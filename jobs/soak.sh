#!/usr/bin/env bash
# jobs/soak.sh: many consecutive real runs of random meshes and job keys, a few of them broken by a
# fault at a random moment, each checked for what a run must never do (issue 28, item 6):
#   - hang: every run has an outer timeout (--timeout, generous); a run past it is a "hang";
#   - leave an unreadable file: the run file is complete (exit 0, complete = 1) or a partial file
#     that h5py opens and reads whole (every dataset read back);
#   - leak: no process of the run left (the run is started in a session of its own: no process of
#     that session may outlive it), no shared memory left (Open MPI's vader segments go to a
#     per-run folder of /dev/shm, which must end empty, and no new SysV segment in `ipcs -m`
#     created by the run), no temporary file left (the run's TMPDIR, where Open MPI keeps its
#     session folder, must end empty) and nothing beside the run file in the run's folder.
# Runs: a synthetic 4-layer, 4-head model (tests/records_e2e/mesh.yaml's shape) on 1 to 8 ranks,
# dp x tp x pp drawn from every factorisation the model allows (tp divides 4 heads, pp <= 4 layers,
# dp <= batch), with random precision, kv_cache, microbatches, overlap, new_tokens, batch,
# record.timings and record.activations. A fault (--fault-rate of the runs) is a SIGKILL or a
# SIGSTOP of one rank at a random moment; faulty runs get record.stall_seconds 3, so a stopped
# rank is ended by the others' stall watchdog. Everything is drawn from --seed.
# Outcomes: complete (exit 0), killed / stalled (exit non-zero after a fault, partial readable; or
# no file yet when the fault came before the run file; or the complete file when it came after the
# run file was finished, while the ranks ended), refused (exit 2: a combination the job
# checks reject, nothing written). Failures: hang, unreadable, leak, error (any other exit).
# OUTDIR (new or empty) gets soak.tsv (one line per run) and a folder per failing run (its log,
# command and files); passing runs' folders are removed. Exit 0 only without a failure.
#   jobs/soak.sh [--runs 500] [--fault-rate 0.02] [--seed 1] [--timeout 180] [--out OUTDIR]
# Measured (2-core VM, Open MPI 4.1.4): see docs/benchmarks.md, "Soak".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
py=/usr/bin/python3
runs=500 fault_rate=0.02 seed=1 timeout=180 out=
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --fault-rate) fault_rate=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "soak.sh: unknown argument '$1' (allowed: --runs, --fault-rate, --seed, --timeout, --out)" >&2; exit 2 ;;
    esac
done
for v in runs seed timeout; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "soak.sh: --${v} '${!v}' is not a whole number" >&2; exit 2; }
done
[[ $fault_rate =~ ^(0(\.[0-9]+)?|1(\.0+)?)$ ]] || { echo "soak.sh: --fault-rate '$fault_rate' is not in 0..1" >&2; exit 2; }
tripar=${TRIPAR_BIN:-$root/build/tripar}
[ -x "$tripar" ] || { echo "soak.sh: no tripar binary at $tripar (build it, or set TRIPAR_BIN)" >&2; exit 2; }
"$py" -c 'import h5py' 2>/dev/null || { echo "soak.sh: $py lacks h5py (apt install python3-h5py)" >&2; exit 2; }
mpirun=${MPIEXEC:-mpirun}
mpiflags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && mpiflags+=(--allow-run-as-root)
out=${out:-$root/out/soak-$(date +%Y%m%d-%H%M%S)}
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
    echo "soak.sh: $out is not empty (give a new or empty --out)" >&2; exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
shm=/dev/shm/tripar-soak.$$
mkdir -p "$shm"
trap 'rm -rf "$shm"' EXIT

# The plan: one line per run, "np fault delay_s rank_pick set1 set2 ...", drawn from the seed.
"$py" - "$runs" "$fault_rate" "$seed" >"$out/plan.txt" <<'PY'
import random, sys
runs, rate, seed = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
layers, heads = 4, 4
for i in range(runs):
    fault = rng.choice(["kill", "stop"]) if rng.random() < rate else "none"
    batch = rng.randint(1, 8)
    meshes = [(dp, tp, pp) for dp in range(1, 9) for tp in (1, 2, 4) for pp in range(1, layers + 1)
              if dp * tp * pp <= 8 and dp <= batch]
    dp, tp, pp = rng.choice(meshes)
    # a faulty run generates longer, so that the fault can land while it generates
    new = rng.randint(1000, 3000) if fault != "none" else rng.randint(1, 24)
    sets = ["parallel.dp=%d" % dp, "parallel.tp=%d" % tp, "parallel.pp=%d" % pp,
            "parallel.microbatches=%d" % rng.randint(1, 3),
            "parallel.overlap=%s" % rng.choice(["false", "true"]),
            "model.precision=%s" % rng.choice(["fp32", "bf16", "int8w"]),
            "model.kv_cache=%s" % rng.choice(["contiguous", "paged"]),
            "model.synthetic.ctx=%d" % (new + 8), "input.synthetic.batch=%d" % batch,
            "input.synthetic.length=%d" % rng.randint(1, 8), "generate.new_tokens=%d" % new,
            "record.timings=%s" % rng.choice(["off", "step", "layer"]),
            "record.activations=%s" % rng.choice(["[]", "all", "[embed,logits]", "[layer.0.mlp,final]"])]
    if fault != "none":
        sets.append("record.stall_seconds=3")
    print(dp * tp * pp, fault, "%.2f" % rng.uniform(0.2, 2.5), rng.randrange(1 << 30), *sets)
PY

alive_in_session() { # processes of session $1, zombies excluded
    ps -eo sid=,stat=,pid=,comm= | awk -v s="$1" '$1 == s && $2 !~ /^Z/ {print $3 " " $4}'
}
shm_ids() { ipcs -m 2>/dev/null | awk '$2 ~ /^[0-9]+$/ {print $2}' | sort; }
# the h5py check: a complete file (complete = 1) or a partial one (complete = 0), every dataset read
check_file() {
    "$py" - "$@" <<'PY'
import sys, h5py
path, want = sys.argv[1], int(sys.argv[2])
try:
    with h5py.File(path, "r") as f:
        n = []
        f.visititems(lambda name, o: n.append(o[()]) if isinstance(o, h5py.Dataset) else None)
        c = int(f.attrs["complete"])
except Exception as exc:  # any failure to open or read is what the soak looks for
    print("unreadable: %s: %s" % (path, exc)); sys.exit(1)
if c != want:
    print("%s: complete = %d, want %d" % (path, c, want)); sys.exit(1)
PY
}

declare -A count=()
failures=0 t_start=$(date +%s) i=0
printf 'run\tnp\tfault\texit\toutcome\tseconds\tdetail\n' >"$out/soak.tsv"
while read -r np fault delay pick sets_line; do
    i=$((i + 1))
    id=$(printf '%04d' "$i")
    dir=$out/$id
    mkdir -p "$dir/run" "$dir/tmp" "$shm/$id"
    read -ra sets <<<"$sets_line"
    args=()
    for kv in "${sets[@]}"; do args+=(--set "$kv"); done
    cmd=("$mpirun" "${mpiflags[@]}" -n "$np" "$tripar" run "$root/tests/records_e2e/mesh.yaml"
        --out "$dir/run/run.h5" "${args[@]}")
    printf '%q ' "${cmd[@]}" >"$dir/cmd.txt"
    echo >>"$dir/cmd.txt"
    before_ipc=$(shm_ids)
    t0=$(date +%s.%N)
    # SIGPIPE ignored (inherited through exec): Open MPI 4.1.4's mpirun takes a SIGPIPE when a
    # rank leaves inside MPI_Init (killed, or ended by the stall watchdog there) and dies of it
    # or segfaults after it, leaving its session directory in TMPDIR; ignored, it ends the job
    # with the rank's exit code and cleans up (docs/benchmarks.md, "Soak")
    (trap '' PIPE && TMPDIR=$dir/tmp OMPI_MCA_btl_vader_backing_directory=$shm/$id exec setsid "${cmd[@]}" </dev/null >"$dir/log" 2>&1) &
    mp=$!
    sid=$mp # setsid from a non-leader execs in place: mpirun leads its own session
    faulted=no hang=no fault_note=
    deadline=$(($(date +%s) + timeout))
    fault_at=$(echo "$t0 + $delay" | bc)
    while kill -0 "$mp" 2>/dev/null; do
        if [ "$fault" != none ] && [ "$faulted" = no ] && [ "$(echo "$(date +%s.%N) >= $fault_at" | bc)" = 1 ]; then
            mapfile -t ranks < <(pgrep -P "$mp" -x tripar || true)
            if [ "${#ranks[@]}" -gt 0 ]; then
                victim=${ranks[$((pick % ${#ranks[@]}))]}
                if [ "$fault" = kill ]; then kill -KILL "$victim" 2>/dev/null || true
                else kill -STOP "$victim" 2>/dev/null || true; fi
                faulted=yes
                files_then=$(ls -A "$dir/run" | tr '\n' ' ')
                fault_note="SIG$([ "$fault" = kill ] && echo KILL || echo STOP) to rank pid $victim at $(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)") s, run folder then: ${files_then:-empty}"
            fi
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            hang=yes
            kill -KILL -- "-$sid" 2>/dev/null || true
            break
        fi
        sleep 0.05
    done
    rc=0
    wait "$mp" || rc=$?
    secs=$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")
    outcome= detail=
    leaks=()
    # processes: the run's session must empty (a stalled run's guard may take 5 s more)
    for _ in $(seq 100); do
        [ -z "$(alive_in_session "$sid")" ] && break
        sleep 0.1
    done
    left=$(alive_in_session "$sid" | tr '\n' ' ')
    if [ -n "$left" ]; then
        leaks+=("processes: $left")
        while read -r p _; do kill -CONT "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true; done < <(alive_in_session "$sid")
    fi
    [ -z "$(ls -A "$shm/$id")" ] || leaks+=("shared memory: $(ls -A "$shm/$id" | tr '\n' ' ')")
    [ -z "$(ls -A "$dir/tmp")" ] || leaks+=("temporary files: $(cd "$dir/tmp" && find . -mindepth 1 | tr '\n' ' ')")
    new_ipc=$(comm -13 <(echo "$before_ipc") <(shm_ids) | tr '\n' ' ')
    for m in $new_ipc; do # a segment of another program is no leak of this run
        cpid=$(ipcs -m -p 2>/dev/null | awk -v m="$m" '$1 == m {print $3}')
        [ -n "$cpid" ] && [ "$(ps -o sid= -p "$cpid" 2>/dev/null | tr -d ' ')" = "$sid" ] && leaks+=("SysV segment $m")
    done
    mapfile -t files < <(cd "$dir/run" && ls -A)
    runfile=
    if [ "${#files[@]}" -gt 1 ]; then
        leaks+=("beside the run file: ${files[*]}")
    fi
    [ "${#files[@]}" -ge 1 ] && runfile=$dir/run/${files[0]}
    if [ "$hang" = yes ]; then
        outcome=hang detail="still running after ${timeout} s"
    elif [ "$rc" -eq 0 ]; then
        outcome=complete
        if [ "$runfile" != "$dir/run/run.h5" ] || ! detail=$(check_file "$runfile" 1); then
            outcome=unreadable detail="exit 0 but ${detail:-no run.h5: ${files[*]:-none}}"
        fi
    elif [ "$rc" -eq 2 ] && [ "$faulted" = no ]; then
        outcome=refused detail=$(grep -m1 'tripar: error' "$dir/log" || true)
        [ -z "$runfile" ] || { outcome=error detail="exit 2 but wrote ${files[*]}"; }
    elif [ "$faulted" = yes ]; then
        [ "$fault" = kill ] && outcome=killed || outcome=stalled
        if [ -n "$runfile" ]; then
            case $runfile in
            "$dir"/run/run.h5.partial.*) detail=$(check_file "$runfile" 0) || outcome=unreadable ;;
            # the fault came after the run file was finished (renamed), while the ranks ended
            "$dir"/run/run.h5) detail=$(check_file "$runfile" 1) && detail="after the run file was complete" || outcome=unreadable ;;
            *) outcome=unreadable detail="a faulty run left ${files[*]}" ;;
            esac
        else
            detail="no run file yet"
        fi
    else
        outcome=error detail="exit $rc without a fault: $(grep -m1 'tripar: ' "$dir/log" || tail -1 "$dir/log")"
    fi
    [ -z "$fault_note" ] || detail="${detail:+$detail; }$fault_note"
    # after a hang, the leftovers are those of the soak's own SIGKILL of the launcher
    if [ "$outcome" = hang ] && [ "${#leaks[@]}" -gt 0 ]; then
        detail="$detail; after killing it: ${leaks[*]}"
    elif [ "${#leaks[@]}" -gt 0 ]; then
        detail="$outcome; ${leaks[*]}" outcome=leak
    fi
    count[$outcome]=$((${count[$outcome]:-0} + 1))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$np" "$fault" "$rc" "$outcome" "$secs" "$detail" >>"$out/soak.tsv"
    case $outcome in
    complete | killed | stalled | refused) rm -rf "$dir" "$shm/$id" ;;
    *) failures=$((failures + 1)); echo "soak: run $id: $outcome: $detail ($dir)" ;;
    esac
    [ $((i % 25)) -eq 0 ] && echo "soak: $i/$runs runs, $failures failing, $(($(date +%s) - t_start)) s"
done <"$out/plan.txt"

n() { echo "${count[$1]:-0}"; }
echo "soak: $i runs: $(n complete) complete, $(n killed) killed (partial readable), $(n stalled) stalled" \
    "(watchdog, partial readable), $(n refused) refused (exit 2), $(n hang) hangs, $(n leak) leaks," \
    "$(n unreadable) unreadable, $(n error) errors; $(($(date +%s) - t_start)) s; $out"
[ "$failures" -eq 0 ]
