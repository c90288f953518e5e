#!/bin/sh
# CLI checks of job parsing that need files made at test time, one per call:
# cli_checks.sh CHECK WORKDIR. Uses $TRIPAR_BIN and $TRIPAR_SOURCE_DIR (tests/job/tests.cmake).
# Each refusal must be exit 2 with its message, and come within a wall bound (timeout 10):
# a refusal that takes minutes, or blocks, is the bug.
set -eu
check=$1
dir=$2
src=$TRIPAR_SOURCE_DIR
expect="$src/tests/expect_exit.sh"
py=/usr/bin/python3
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
# deep FILE OPEN CLOSE DEPTH: a job whose key x holds DEPTH nested OPENs, then CLOSEs
deep() {
    $py - "$@" <<'PY'
import sys
path, opening, closing, depth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with open(path, "w") as f:
    # a block sequence starts on its own line: "x:" then "- - - ... 1" on line 4
    f.write("model: {synthetic: {}}\ninput: {tokens: [1]}\nx:" + ("\n" if opening == "- " else " "))
    f.write(opening * depth + "1" + closing * depth + "\n")
PY
}

# refused CODE REGEX ARGS...: tripar run ARGS exits CODE with REGEX, within 10 s
refused() {
    code=$1
    regex=$2
    shift 2
    start=$(date +%s)
    "$expect" "$code" "$regex" -- timeout 10 "$TRIPAR_BIN" run "$@"
    echo "refused in $(($(date +%s) - start)) s: $*"
}

case $check in
deep)
    # 100k and 250k levels, as flow sequences, flow mappings and one-line block sequences:
    # refused while parsing, at the first level past the limit (was 40-65 s, and > 40 s)
    for depth in 100000 250000; do
        deep seq_$depth.yaml '[' ']' $depth
        deep map_$depth.yaml '{a: ' '}' $depth
        deep block_$depth.yaml '- ' '' $depth
        for kind in seq:3 map:3 block:4; do
            name=${kind%:*}_$depth
            refused 2 "$name\.yaml:${kind#*:}: nesting deeper than 32 levels; a job needs 4" \
                $name.yaml --dry-run
        done
    done
    ;;
huge)
    # a file over the size limit, one with more nodes than the limit, and many %TAG directives
    # (quadratic inside libyaml before the first event): each refused with the limit it broke
    $py -c "open('big.yaml', 'w').write('model: {synthetic: {}}\ninput: {tokens: [1]}\n# ' + 'x' * (17 << 20) + '\n')"
    refused 2 "big\.yaml: the job file is [0-9]+ bytes, more than the limit of 16 MiB" big.yaml \
        --dry-run
    $py -c "open('wide.yaml', 'w').write('model: {synthetic: {}}\ninput: {tokens: [' + '1,' * 1100000 + '1]}\n')"
    refused 2 "wide\.yaml:2: more than 1000000 YAML nodes" wide.yaml --dry-run
    $py -c "open('tags.yaml', 'w').write(''.join('%%TAG !t%d! tag:x%d:\n' % (i, i) for i in range(200000)) + '---\nmodel: {synthetic: {}}\ninput: {tokens: [1]}\n')"
    refused 2 "tags\.yaml:17: more than 16 YAML directives" tags.yaml --dry-run
    ;;
fifo)
    # a FIFO with no writer as the job file or the tokens file: refused before it is opened
    mkfifo job_fifo.yaml tokens_fifo
    refused 2 "job_fifo\.yaml: cannot open job file: it is a FIFO, not a regular file" \
        job_fifo.yaml --dry-run
    printf '%s\n' 'model: {synthetic: {}}' 'input: {tokens_file: tokens_fifo}' >fifo_tokens.yaml
    refused 2 "fifo_tokens\.yaml:2: input\.tokens_file: '.*/tokens_fifo' is a FIFO, not a regular file" \
        fifo_tokens.yaml --dry-run
    refused 2 "^.*--set input\.tokens_file=tokens_fifo: input\.tokens_file: '.*/tokens_fifo' is a FIFO" \
        "$src/jobs/tiny.yaml" --set input.tokens_file=tokens_fifo --dry-run
    mkfifo text_fifo
    refused 2 "--set input\.text_file=text_fifo: input\.text_file: '.*/text_fifo' is a FIFO" \
        "$src/jobs/tiny.yaml" --set input.text_file=text_fifo --dry-run
    ;;
directory)
    # a directory as the job file or the tokens file says so (was a YAML "input error", and
    # "holds no prompts")
    mkdir job_dir.yaml tokens_dir
    refused 2 "job_dir\.yaml: cannot open job file: it is a directory" job_dir.yaml --dry-run
    refused 2 "--set input\.tokens_file=tokens_dir: input\.tokens_file: '.*/tokens_dir' is a directory" \
        "$src/jobs/tiny.yaml" --set input.tokens_file=tokens_dir --dry-run
    ;;
sweep)
    # a bad swept value is reported as the --sweep that gave it, not as a --set
    refused 2 "^tripar: error: --sweep parallel\.tp=x: parallel\.tp: expected an integer, got 'x'" \
        "$src/jobs/tiny.yaml" --sweep parallel.tp=1,x --dry-run
    refused 2 "^tripar: error: --set parallel\.tp=x: parallel\.tp: expected an integer" \
        "$src/jobs/tiny.yaml" --set parallel.tp=x --dry-run
    # a value that parses but fails a check against keys of the file (prompt + new tokens >
    # ctx) is blamed on the sweep point, not on the file's generate line it meets
    refused 2 "^tripar: error: --sweep input\.synthetic\.length=100: prompt of 100 tokens plus 4 new tokens exceeds model\.ctx = 64" \
        "$src/tests/bench/small.yaml" --sweep input.synthetic.length=8,100 --dry-run
    refused 2 "^tripar: error: --sweep model\.synthetic\.ctx=6: prompt of 4 tokens plus 4 new tokens exceeds model\.ctx = 6" \
        "$src/jobs/tiny.yaml" --sweep model.synthetic.ctx=32,6 --dry-run
    # without a command-line key the file's generate line is blamed, as before
    printf '%s\n' 'model: {synthetic: {ctx: 6}}' 'input: {tokens: [[1, 2, 3, 4]]}' \
        'generate: {new_tokens: 4}' >ctx_file.yaml
    refused 2 "^tripar: error: ctx_file\.yaml:3: prompt of 4 tokens plus 4 new tokens exceeds" \
        ctx_file.yaml --dry-run
    ;;
text_origin)
    # text that the checkpoint's tokenizer cannot encode (its vocab lacks the byte 'z') is
    # reported at the --set or --sweep that gave it, with the tokenizer's reason (was FILE:0)
    $py "$src/tests/io/make_hf_dir.py" hf >/dev/null
    $py -c "import json; v = json.load(open('hf/vocab.json')); del v['z']; json.dump(v, open('hf/vocab.json', 'w'))"
    "$TRIPAR_BIN" import-hf hf --out ck.h5 >/dev/null
    printf '%s\n' 'model: {checkpoint: ck.h5}' 'input: {tokens: [1]}' >ck.yaml
    refused 2 "^tripar: error: --set input\.text=z: input\.text cannot be tokenized: tokenizer: symbol 'z' \(byte 0x7a\) is not in vocab\.json" \
        ck.yaml --set input.text=z --dry-run
    refused 2 "^tripar: error: --sweep input\.text=z: input\.text cannot be tokenized" \
        ck.yaml --sweep input.text=b,z --dry-run
    printf '%s\n' 'model: {checkpoint: ck.h5}' 'input:' '  text: z' >ck_text.yaml
    refused 2 "^tripar: error: ck_text\.yaml:3: input\.text cannot be tokenized" ck_text.yaml \
        --dry-run
    ;;
*)
    echo "cli_checks.sh: unknown check '$check'" >&2
    exit 64
    ;;
esac
