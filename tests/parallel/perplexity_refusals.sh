#!/bin/sh
# perplexity_refusals.sh CASE WORKDIR: writes a job that a perplexity run must refuse and checks
# that `tripar run --dry-run` exits 2 naming where (file:line or the --set) and what is allowed.
set -eu
: "${TRIPAR_BIN:?TRIPAR_BIN must point at the tripar binary}"
case_name=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
text="$here/../../data/text/tale-of-two-cities-ch1.txt"
mkdir -p "$work"
job="$work/$case_name.yaml"
# line 1..4 the model and backend; line 5 the input; line 6 on: the rest
head='model:
  arch: llama
  synthetic: {layers: 2, heads: 4, kv_heads: 2, embd: 16, vocab: 263, ctx: 64, seed: 1}
backend: {kind: cpu, threads: 1}'
input="input: {text_file: \"$text\"}"
rest='perplexity: {window: 32}'
sets=""
case $case_name in
window_ctx)
    rest='perplexity:
  window: 100'
    regex="$case_name\.yaml:7: perplexity\.window = 100 is more than model\.ctx = 64; allowed: 3 to 64" ;;
window_small)
    sets="perplexity.window=2"
    regex="perplexity\.window=2: perplexity\.window.* 2 .*3" ;;
short_text)
    input='input: {text: "It was the best of times."}'
    regex="$case_name\.yaml:5: input\.text is 25 tokens; perplexity\.window = 32 needs at least 2 x 32 = 64" ;;
new_tokens)
    rest='perplexity: {window: 32}
generate:
  new_tokens: 4'
    regex="$case_name\.yaml:8: generate\.new_tokens = 4 with perplexity; allowed: 0" ;;
token_input)
    input='input: {tokens: [1, 2, 3]}'
    regex="$case_name\.yaml:5: perplexity scores one text; give input\.text or input\.text_file .*not input\.tokens" ;;
arrival)
    sets="bench.arrival_rate=5"
    regex="bench\.arrival_rate=5: bench\.arrival_rate with perplexity; allowed: 0" ;;
unknown_key)
    rest='perplexity: {window: 32, stride: 4}'
    regex="$case_name\.yaml:6: .*stride.*window, chunks" ;;
*) echo "unknown case $case_name" >&2; exit 64 ;;
esac
printf '%s\n%s\n%s\n' "$head" "$input" "$rest" >"$job"
set --
[ -n "$sets" ] && set -- --set "$sets"
exec "$here/../expect_exit.sh" 2 "$regex" -- "$TRIPAR_BIN" run "$job" --dry-run "$@"
