#!/bin/sh
# expect_stderr.sh CODE REGEX COUNT -- CMD ARGS...: runs CMD, and passes when its exit code is
# CODE, exactly COUNT lines of its stderr match REGEX (grep -E), and its stderr holds no HDF5
# error stack ("HDF5-DIAG"): a message printed once, by tripar, not by HDF5. For CLI tests.
set -u
if [ $# -lt 5 ] || [ "$4" != "--" ]; then
    echo "usage: $0 CODE REGEX COUNT -- CMD [ARGS...]" >&2
    exit 64
fi
code=$1
regex=$2
count=$3
shift 4
out=$(mktemp "${TMPDIR:-/tmp}/expect_stderr.XXXXXX") || exit 70
err=$(mktemp "${TMPDIR:-/tmp}/expect_stderr.XXXXXX") || exit 70
trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err"
got=$?
fail=0
if [ "$got" != "$code" ]; then
    echo "expect_stderr: exit code $got, expected $code" >&2
    fail=1
fi
matched=$(grep -Ec -e "$regex" "$err")
if [ "$matched" != "$count" ]; then
    echo "expect_stderr: $matched stderr lines match /$regex/, expected $count" >&2
    fail=1
fi
if grep -q "HDF5-DIAG" "$err"; then
    echo "expect_stderr: stderr holds an HDF5 error stack" >&2
    fail=1
fi
if [ $fail -ne 0 ]; then
    echo "expect_stderr: command: $*" >&2
    echo "---- stdout ----" >&2
    cat "$out" >&2
    echo "---- stderr ----" >&2
    cat "$err" >&2
    echo "----------------" >&2
    exit 1
fi
exit 0
