#!/usr/bin/env bash
# Output-path safety (docs/cli.md, "Files a command reads and writes"): an output that is also
# an input, or that cannot be a regular file, is refused with exit 2 before any compute,
# printed once, and every input is left byte-identical.
# usage: output_paths.sh CASE WORKDIR [HF_FIXTURES]   (env: TRIPAR_BIN, MPIEXEC)
# Exit 77 (a ctest skip) with the reason printed when a case cannot run here.
set -uo pipefail
: "${TRIPAR_BIN:?}"
case_name=$1 work=$2/$1 fixtures=${3:-}
MPIEXEC=${MPIEXEC:-mpiexec}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

fail() {
    echo "FAIL ($case_name): $*" >&2
    [ -f log ] && { echo "---- output ----" >&2; cat log >&2; }
    exit 1
}

# A small synthetic job on two ranks (dp=2), so a refusal must reach both.
cat >job.yaml <<'EOF'
model: {synthetic: {layers: 2, heads: 2, embd: 32, vocab: 64, ctx: 32, seed: 1}}
backend: {kind: cpu, threads: 1}
parallel: {dp: 2}
input: {synthetic: {batch: 2, length: 4, seed: 3}}
generate: {new_tokens: 2}
record: {out: run.h5}
EOF

# expect2 REGEX CMD...: CMD exits 2 within 60 s, its output matches REGEX, the error is printed
# once (rank 0) and no rank aborted.
expect2() {
    local regex=$1
    shift
    local t0=$SECONDS
    timeout 60 "$@" >log 2>&1
    local rc=$?
    [ $rc -eq 124 ] && fail "timed out after 60 s (a rank blocked or hung): $*"
    [ $rc -eq 2 ] || fail "exit code $rc, expected 2: $*"
    grep -Eq -e "$regex" log || fail "output does not match /$regex/"
    local n
    n=$(grep -c "error:" log)
    [ "$n" -le 1 ] || fail "the error was printed $n times, expected once"
    grep -qi "mpi_abort" log && fail "a rank called MPI_Abort"
    echo "ok: exit 2 in $((SECONDS - t0)) s: $(grep -m1 -E -e "$regex" log)"
}

tripar2=("$MPIEXEC" -n 2 --oversubscribe "$TRIPAR_BIN" run) # under timeout: no function

# same_bytes FILE: FILE still has the checksum recorded in FILE.sum.
keep() { sha256sum "$1" >"$1.sum"; }
same_bytes() { sha256sum -c --quiet "$1.sum" || fail "$1 was changed"; }

no_partial() {
    local left
    left=$(find . -name '*.partial' -o -name '*.partial.*')
    [ -z "$left" ] || fail "left behind: $left"
}

case $case_name in
import_onto_safetensors)
    # The input mapped by the import, named through DIR/./: once truncated under it (SIGBUS).
    cp -r "$fixtures/f32" hf && keep hf/model.safetensors
    expect2 "same file as the input '.*model.safetensors'" \
        "$TRIPAR_BIN" import-hf hf --out hf/./model.safetensors
    same_bytes hf/model.safetensors
    ;;
import_onto_shard)
    # A shard of a sharded index, named through a symbolic link outside DIR.
    cp -r "$fixtures/bf16" hf && keep hf/model-00002-of-00003.safetensors
    ln -s hf/model-00002-of-00003.safetensors link.h5
    expect2 "same file as the input '.*model-00002-of-00003.safetensors'" \
        "$TRIPAR_BIN" import-hf hf --out link.h5
    same_bytes hf/model-00002-of-00003.safetensors
    ;;
import_missing_config)
    cp -r "$fixtures/f32" hf && rm hf/config.json
    expect2 "^import-hf: hf/config.json does not exist$" "$TRIPAR_BIN" import-hf hf --out ck.h5
    grep -q -- "-1" log && fail "the message still has a line number"
    [ -e ck.h5 ] && fail "ck.h5 was created"
    ;;
run_out_is_job)
    keep job.yaml
    expect2 "--out '\./job.yaml' is the same file as the job file 'job.yaml'" \
        "${tripar2[@]}" job.yaml --out ./job.yaml
    same_bytes job.yaml
    no_partial
    ;;
run_out_is_checkpoint)
    "$TRIPAR_BIN" run job.yaml --set parallel.dp=1 --save-checkpoint ck.h5 >log 2>&1 ||
        fail "could not write the checkpoint"
    cat >ck.yaml <<'EOF'
model: {checkpoint: ck.h5}
backend: {kind: cpu, threads: 1}
parallel: {dp: 2}
input: {synthetic: {batch: 2, length: 4, seed: 3}}
generate: {new_tokens: 2}
EOF
    keep ck.h5
    ln -s ck.h5 link.h5
    expect2 "--out 'link.h5' is the same file as model.checkpoint '.*ck.h5'" \
        "${tripar2[@]}" ck.yaml --out link.h5
    same_bytes ck.h5
    expect2 "--save-checkpoint '\./ck.h5' is the same file as model.checkpoint" \
        "${tripar2[@]}" ck.yaml --out run.h5 --save-checkpoint ./ck.h5
    same_bytes ck.h5
    no_partial
    ;;
run_out_is_tokens)
    printf '1 2 3 4\n5 6 7 8\n' >prompts.txt
    keep prompts.txt
    expect2 "--out '\./prompts.txt' is the same file as input.tokens_file '.*prompts.txt'" \
        "${tripar2[@]}" job.yaml --set input.tokens_file=prompts.txt --out ./prompts.txt
    same_bytes prompts.txt
    no_partial
    ;;
run_save_checkpoint_is_out)
    expect2 "--save-checkpoint '\./x.h5' and --out 'x.h5' are the same file" \
        "${tripar2[@]}" job.yaml --out x.h5 --save-checkpoint ./x.h5
    [ -e x.h5 ] && fail "x.h5 was written"
    no_partial
    ;;
run_out_device)
    # Copies of /dev/null and /dev/full (the same char devices 1,3 and 1,7) made in the work
    # directory, so a tripar that renamed its file over one breaks the test, not the machine.
    if [ "$(id -u)" != 0 ]; then
        echo "SKIP: not root, so no device node can be made (and none replaced)"
        exit 77
    fi
    mknod null c 1 3 && mknod full c 1 7 || { echo "SKIP: mknod is not allowed here"; exit 77; }
    for dev in null full; do
        expect2 "--out '$dev' exists and is a character device" "${tripar2[@]}" job.yaml --out "$dev"
        [ -c "$dev" ] || fail "$dev is no longer a character device"
    done
    expect2 "--save-checkpoint 'null' exists and is a character device" \
        "${tripar2[@]}" job.yaml --out run.h5 --save-checkpoint null
    [ -c null ] || fail "null is no longer a character device"
    no_partial
    ;;
run_out_not_a_file)
    mkdir dir
    mkfifo pipe.h5
    expect2 "--out '' is an empty path" "${tripar2[@]}" job.yaml --out ''
    expect2 "--out 'dir' is a directory" "${tripar2[@]}" job.yaml --out dir
    expect2 "--out 'dir/' ends in '/'" "${tripar2[@]}" job.yaml --out dir/
    expect2 "--out 'pipe.h5' exists and is a FIFO" "${tripar2[@]}" job.yaml --out pipe.h5
    expect2 "--out 'missing-dir/x.h5' is in directory missing-dir, which does not exist" \
        "${tripar2[@]}" job.yaml --out missing-dir/x.h5
    expect2 "--save-checkpoint 'missing-dir/c.h5' is in directory missing-dir" \
        "${tripar2[@]}" job.yaml --out run.h5 --save-checkpoint missing-dir/c.h5
    [ -e run.h5 ] && fail "run.h5 was written"
    no_partial
    ;;
run_checkpoint_fifo)
    # Nobody writes to the FIFO: opening it would block every rank forever.
    mkfifo ck.h5
    sed 's/model: .*/model: {checkpoint: ck.h5}/' job.yaml >ck.yaml
    expect2 "ck.yaml:1: model.checkpoint '.*ck.h5' is a FIFO, not a regular file" "${tripar2[@]}" ck.yaml
    mkdir ckdir.h5
    expect2 "model.checkpoint '.*ckdir.h5' is a directory" \
        "${tripar2[@]}" ck.yaml --set model.checkpoint=ckdir.h5
    ;;
run_sweep_save_is_input)
    # Point 1 would save its model over b.h5, which point 2 then reads: refused before point 1.
    "$TRIPAR_BIN" run job.yaml --set parallel.dp=1 --save-checkpoint a.h5 >log 2>&1 ||
        fail "could not write the checkpoint"
    "$TRIPAR_BIN" run job.yaml --set parallel.dp=1 --set model.synthetic.seed=2 \
        --save-checkpoint b.h5 >log 2>&1 || fail "could not write the checkpoint"
    keep b.h5
    sed 's/model: .*/model: {checkpoint: a.h5}/' job.yaml >ck.yaml
    expect2 "--save-checkpoint 'b.h5' is the same file as model.checkpoint '.*/b.h5'" \
        "${tripar2[@]}" ck.yaml --sweep model.checkpoint=a.h5,b.h5 --save-checkpoint b.h5
    same_bytes b.h5
    grep -q "sweep point 1/2" log && fail "point 1 ran"
    no_partial
    ;;
commbench_out)
    keep job.yaml
    cb=("$MPIEXEC" -n 2 --oversubscribe "$TRIPAR_BIN" commbench)
    expect2 "--out '\./job.yaml' is the same file as 'job.yaml', an input of the job" \
        "${cb[@]}" job.yaml --sizes 8:64 --out ./job.yaml
    same_bytes job.yaml
    expect2 "--out 'missing-dir/cb.h5' is in directory missing-dir, which does not exist" \
        "${cb[@]}" --sizes 8:64 --out missing-dir/cb.h5
    grep -q "allreduce" log && fail "commbench measured before refusing --out"
    ;;
*)
    echo "unknown case $case_name" >&2
    exit 64
    ;;
esac
exit 0
