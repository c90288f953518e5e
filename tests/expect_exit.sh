#!/bin/sh
# expect_exit.sh CODE REGEX -- CMD ARGS...: runs CMD, and passes when its exit code is CODE and
# its combined stdout+stderr matches REGEX (grep -E). Prints both on failure. For CLI tests.
set -u
if [ $# -lt 4 ] || [ "$3" != "--" ]; then
    echo "usage: $0 CODE REGEX -- CMD [ARGS...]" >&2
    exit 64
fi
code=$1
regex=$2
shift 3
out=$(mktemp "${TMPDIR:-/tmp}/expect_exit.XXXXXX") || exit 70
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
got=$?
fail=0
if [ "$got" != "$code" ]; then
    echo "expect_exit: exit code $got, expected $code" >&2
    fail=1
fi
if ! grep -Eq -e "$regex" "$out"; then
    echo "expect_exit: output does not match /$regex/" >&2
    fail=1
fi
if [ $fail -ne 0 ]; then
    echo "expect_exit: command: $*" >&2
    echo "---- output ----" >&2
    cat "$out" >&2
    echo "----------------" >&2
    exit 1
fi
exit 0
